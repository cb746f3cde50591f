"""The engine in-process on a tiny BART: training, validation, checkpoints, final model, MLflow."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, BartForConditionalGeneration, PreTrainedTokenizerFast

from eric.train.errors import TrainError
from eric.train.loop import LoopSettings, Trainer
from tests.train.tiny import VOCAB, collate, copy_task, lengths, tiny_bart

TRAIN, VAL = copy_task(64, seed=1), copy_task(16, seed=2)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, **{f"t{i}": i for i in range(4, VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")


def make_trainer(ckpt: Path, fingerprint="tiny", model=None, tracker=None, **settings) -> Trainer:
    base = dict(deepspeed_config="infra/deepspeed/cpu.json", precision="fp32", micro_batch_size=8,
                lr=3e-3, epochs=1, checkpoint_every=4, log_every=2, progress=False)
    return Trainer(model or tiny_bart(seed=0), LoopSettings(**{**base, **settings}),
                   train_set=TRAIN, val_set=VAL, collate_fn=collate, train_lengths=lengths(TRAIN),
                   val_lengths=lengths(VAL), checkpoint_dir=ckpt, seed=5,
                   fingerprint=fingerprint, tracker=tracker)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """20 steps (2.5 epochs) at the default precision, tracked in MLflow."""
    root = tmp_path_factory.mktemp("loop")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        from eric.tracking import start_run

        tracker = start_run("tiny-corpus", stage="train_test", variant="bart",
                            params={"train": {"lr": 3e-3}})
        trainer = make_trainer(root / "ckpt", tracker=tracker, precision="auto", max_steps=20)
        result = trainer.fit()
        out = trainer.save_pretrained(root / "model", tokenizer=tiny_tokenizer())
        tracker.finish()
        yield dict(root=root, trainer=trainer, result=result, out=out, run_id=tracker.run_id,
                   uri=f"sqlite:///{root / 'mlflow.db'}")


def test_validation_loss_falls_and_history_is_complete(trained):
    result = trained["result"]
    assert result.steps == 20 and result.epochs == 2.5
    assert result.final_val_loss < result.initial_val_loss - 0.1
    assert [row["step"] for row in result.val_history] == [0, 8, 16, 20]
    assert [row["step"] for row in result.history] == list(range(2, 21, 2))
    lrs = [row["lr"] for row in result.history]
    assert lrs == sorted(lrs, reverse=True) and lrs[-1] < 3e-3 * 0.15
    assert result.tokens > 0 and result.tokens_per_s > 0
    assert result.states_used is None  # BART has no codebook


def test_final_model_is_hf_safetensors_in_fp32(trained):
    out = trained["out"]
    assert (out / "model.safetensors").is_file() and not list(out.glob("*.bin"))
    loaded = BartForConditionalGeneration.from_pretrained(out)
    engine_params = dict(trained["trainer"].engine.module.named_parameters())
    for name, param in loaded.named_parameters():
        assert param.dtype == torch.float32
        assert torch.equal(param, engine_params[name].detach().float()), name
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.convert_tokens_to_ids("t7") == 7


def test_checkpoints_are_complete_and_pruned(trained):
    ckpt = trained["root"] / "ckpt"
    assert (ckpt / "latest").read_text() == "step00000020"
    assert sorted(p.name for p in ckpt.glob("step*")) == ["step00000016", "step00000020"]
    assert not (ckpt / ".partial").exists()
    state = json.loads((ckpt / "step00000020" / "trainer_state.json").read_text())
    assert state["step"] == 20 and state["fingerprint"] == "tiny" and state["world_size"] == 1


def test_mlflow_run_has_tags_params_and_curves(trained):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=trained["uri"])
    run = client.get_run(trained["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["variant"] == "bart" and run.data.tags["stage"] == "train_test"
    assert len(run.data.tags["git_commit"]) in (40, 7) or run.data.tags["git_commit"] == "unknown"
    assert run.data.params["train.lr"] == "0.003"
    losses = client.get_metric_history(trained["run_id"], "train_loss")
    assert [m.step for m in losses] == list(range(2, 21, 2))
    assert [m.step for m in client.get_metric_history(trained["run_id"], "val_loss")] == [0, 8, 16, 20]
    assert {"lr", "tokens_per_s"} <= set(run.data.metrics)


def test_rerun_of_a_finished_run_resumes_at_the_end(trained):
    trainer = make_trainer(trained["root"] / "ckpt", precision="auto", max_steps=20)
    result = trainer.fit()
    assert result.resumed_from == [20] and result.steps == 20
    assert result.final_val_loss == trained["result"].final_val_loss


def test_other_settings_do_not_resume_and_stale_files_are_dropped(tmp_path):
    ckpt = tmp_path / "ckpt"
    make_trainer(ckpt, max_steps=4).fit()
    (ckpt / ".partial" / "step00000008").mkdir(parents=True)  # a save killed mid-way
    (ckpt / ".partial" / "step00000008" / "junk").write_text("x")
    result = make_trainer(ckpt, fingerprint="other", max_steps=2).fit()
    assert result.resumed_from == [] and result.steps == 2
    assert not (ckpt / ".partial").exists()
    assert sorted(p.name for p in ckpt.glob("step*")) == ["step00000002"]


def test_zero2_bf16_resumes_and_saves_fp32_masters(tmp_path):
    """bf16 module weights + fp32 masters in the ZeRO optimizer: the checkpoint reloads
    with weights_only=True and the saved model holds the fp32 masters."""
    from deepspeed.utils import safe_get_full_fp32_param

    config = tmp_path / "zero2_bf16.json"
    config.write_text(json.dumps({"bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}))
    first = make_trainer(tmp_path / "ckpt", deepspeed_config=str(config), precision="bf16",
                         max_steps=3, checkpoint_every=3, eval_at_start=False)
    first.fit()
    second = make_trainer(tmp_path / "ckpt", deepspeed_config=str(config), precision="bf16",
                          max_steps=5, checkpoint_every=3, eval_at_start=False)
    result = second.fit()
    assert result.resumed_from == [3] and result.steps == 5
    module = second.engine.module
    assert next(module.parameters()).dtype == torch.bfloat16
    out = second.save_pretrained(tmp_path / "model")
    saved = load_file(out / "model.safetensors")
    name, param = "model.encoder.layers.0.fc1.weight", module.get_parameter("model.encoder.layers.0.fc1.weight")
    assert saved[name].dtype == torch.float32
    assert torch.equal(saved[name], safe_get_full_fp32_param(param).float())
    assert not torch.equal(saved[name], param.detach().float())  # not the rounded bf16 copy


def test_too_small_training_set_is_a_clear_error(tmp_path):
    with pytest.raises(TrainError, match="do not fill one step batch"):
        Trainer(tiny_bart(), LoopSettings(micro_batch_size=128), train_set=TRAIN,
                collate_fn=collate, checkpoint_dir=tmp_path)


def test_snapshots_keep_the_model_every_n_steps_and_at_the_end(tmp_path):
    trainer = Trainer(tiny_bart(seed=0), LoopSettings(deepspeed_config="infra/deepspeed/cpu.json", precision="fp32",
                                                      micro_batch_size=8, lr=3e-3, max_steps=5, snapshot_every=2,
                                                      checkpoint_every=10, progress=False, eval_at_start=False),
                      train_set=TRAIN, collate_fn=collate, checkpoint_dir=tmp_path / "ckpt", seed=5,
                      snapshot_dir=tmp_path / "snapshots", tokenizer=tiny_tokenizer())
    trainer.fit()
    found = sorted(p.name for p in (tmp_path / "snapshots").iterdir())
    assert found == ["step-000002", "step-000004", "step-000005"]
    last = BartForConditionalGeneration.from_pretrained(tmp_path / "snapshots" / "step-000005")
    final = trainer.save_pretrained(tmp_path / "final")
    assert all(torch.equal(a, b) for a, b in zip(last.state_dict().values(),
                                                 BartForConditionalGeneration.from_pretrained(final).state_dict().values()))
    assert AutoTokenizer.from_pretrained(tmp_path / "snapshots" / "step-000002").pad_token == "<pad>"  # loads alone


def test_validation_logs_the_input_gap(trained):
    """Every validation row has the LM loss with the next row's input and its rise over the own."""
    for row in trained["result"].val_history:
        assert row["val_input_gap"] == pytest.approx(row["val_other_input_lm_loss"] - row["val_loss"], abs=1e-4)


def test_the_input_gap_gives_each_row_the_next_rows_input():
    """A model whose loss is how far its input's first token is from the label's: with its own
    input 0, with the next row's the mean distance; the mask travels with its input."""
    from types import SimpleNamespace

    from eric.train.loop import input_gap, next_rows_input

    def model(input_ids, attention_mask, labels):
        return SimpleNamespace(loss=(input_ids[:, 0] - labels[:, 0]).abs().float().mean(), lm_loss=None)

    batch = {"input_ids": torch.tensor([[4, 1], [6, 6], [9, 9]]), "attention_mask": torch.tensor([[1, 0], [1, 1], [1, 1]]),
             "labels": torch.tensor([[4], [6], [9]])}
    swapped = next_rows_input(batch)
    assert swapped["attention_mask"].tolist() == [[1, 1], [1, 0], [1, 1]] and swapped["labels"] is batch["labels"]
    found = input_gap(model(**batch), model(**swapped))
    assert float(found["other_input_lm_loss"]) == pytest.approx((5 + 2 + 3) / 3)  # rows get 9, 4, 6
    assert float(found["input_gap"]) == pytest.approx(10 / 3)
    assert next_rows_input({k: v[:1] for k, v in batch.items()}) is None  # one row: no other input
