import json

import pytest
import torch

from eric.train import ds_config
from eric.train.ds_config import apply_precision, build_ds_config
from eric.train.engine import linear_schedule, parameter_groups
from eric.train.errors import TrainError
from eric.train.meters import Averager, StateUsageWindow, batch_tokens, loss_terms
from tests.train.tiny import tiny_bart


def test_batch_fields_and_clipping_come_from_params():
    config = build_ds_config("infra/deepspeed/cpu.json", micro_batch_size=4, grad_accum_steps=3,
                             world_size=2, max_grad_norm=0.5, precision="fp32")
    assert config["train_batch_size"] == 24
    assert config["train_micro_batch_size_per_gpu"] == 4
    assert config["gradient_accumulation_steps"] == 3
    assert config["gradient_clipping"] == 0.5
    assert "torch_autocast" not in config and config["zero_optimization"]["stage"] == 0


def test_precision_modes():
    gpu = {"bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}
    assert "bf16" not in apply_precision(gpu, "fp32")
    assert apply_precision(gpu, "bf16") == gpu  # the file's bf16 mode is kept
    added = apply_precision({"zero_optimization": {"stage": 0}}, "bf16")
    assert added["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"}


def test_gpu_config_is_bf16_zero2():
    config = build_ds_config("infra/deepspeed/gpu_bf16_zero2.json", micro_batch_size=8,
                             grad_accum_steps=1, world_size=1, max_grad_norm=1.0, precision="bf16")
    assert config["bf16"]["enabled"] and config["zero_optimization"]["stage"] == 2


@pytest.mark.parametrize("kind, world_size, expected", [
    ("cpu", 1, "cpu.json"), ("cpu", 4, "cpu.json"),
    ("cuda", 1, "gpu_bf16.json"),  # one GPU: ZeRO 0 + autocast (ZeRO-2 measured 2x slower there)
    ("cuda", 8, "gpu_bf16_zero2.json"),
])
def test_auto_picks_the_recipe_by_device_and_ranks(monkeypatch, kind, world_size, expected):
    monkeypatch.setattr(ds_config, "device_kind", lambda: kind)
    assert ds_config.config_path("auto", world_size).name == expected
    config = build_ds_config("auto", micro_batch_size=2, grad_accum_steps=1, world_size=world_size,
                             max_grad_norm=1.0, precision="bf16")
    assert config["zero_optimization"]["stage"] == (2 if expected.endswith("zero2.json") else 0)
    assert ("bf16" in config) == expected.endswith("zero2.json")  # else fp32 weights, bf16 autocast
    assert ("torch_autocast" in config) != expected.endswith("zero2.json")


def test_bad_config_files_give_one_line_errors(tmp_path):
    with pytest.raises(TrainError, match="not found"):
        build_ds_config(tmp_path / "none.json", micro_batch_size=1, grad_accum_steps=1,
                        world_size=1, max_grad_norm=1.0)
    bad = tmp_path / "bad.json"
    bad.write_text("{zero: 1")
    with pytest.raises(TrainError, match="not valid JSON"):
        build_ds_config(bad, micro_batch_size=1, grad_accum_steps=1, world_size=1, max_grad_norm=1.0)


def test_linear_schedule_decays_to_zero_after_warmup():
    f = linear_schedule(total_steps=10, warmup_steps=0)
    assert [round(f(s), 2) for s in (0, 5, 9, 10)] == [1.0, 0.5, 0.1, 0.0]
    w = linear_schedule(total_steps=10, warmup_steps=4)
    assert w(0) < w(1) < w(3) < w(4) == 1.0 and w(10) == 0.0


def test_no_weight_decay_on_biases_and_norms():
    model = tiny_bart()
    decay, no_decay = parameter_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all("norm" in names[id(p)] or p.ndim == 1 for p in no_decay["params"])
    assert all(p.ndim == 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == 0.1


def test_state_usage_counts_distinct_states_over_a_window():
    window = StateUsageWindow(steps=2)
    assert window.distinct() is None  # a model without states reports nothing
    for ids in ([1, 2, -1], [2, 3], [4]):
        window.add(torch.tensor(ids))
        window.end_step()
    assert window.distinct() == 3  # {2, 3} | {4}: the first step left the window


def test_meters():
    avg = Averager()
    avg.add({"loss": 2.0}, weight=1)
    avg.add({"loss": 4.0, "lm_loss": 1.0}, weight=3)
    assert avg.pop() == {"loss": 3.5, "lm_loss": 1.0} and avg.pop() == {}
    batch = {"attention_mask": torch.tensor([[1, 1, 0]]), "labels": torch.tensor([[5, -100, -100]])}
    assert batch_tokens(batch) == 3

    class Out:
        loss = torch.tensor(2.5)
        lm_loss = torch.tensor(2.0)
        entity_loss = None

    assert loss_terms(Out()) == {"loss": 2.5, "lm_loss": 2.0}
