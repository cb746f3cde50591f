"""Codebook remedies under the real engine: k-means init, dead-code replacement on one
process (ZeRO-0) and on two CPU ranks under ZeRO-2, and the codebook probe."""

from __future__ import annotations

import json

import torch

from tests.train.test_resume_and_ranks import finish, launch
from tests.train.tiny_states import train


def _assert_healthy(log: list[dict], ranks: int = 1, master: bool = False) -> None:
    assert log and all(row["ranks"] == ranks for row in log)  # the ranks really were compared
    assert all(row["master_seen"] == master for row in log)  # and the master copy, under ZeRO
    assert all(row["ranks_agree"] for row in log)
    assert all(row["master_matches"] for row in log), log
    assert all(row["moments_zeroed"] for row in log), log
    assert log[-1]["replaced_total"] > 0  # with dead_code_steps=1 codes are re-seeded
    assert any(row["moments_seen"] for row in log)  # the moments were really inspected


def test_dead_codes_are_reseeded_with_fresh_optimizer_state_on_one_process(tmp_path):
    _assert_healthy(train(tmp_path / "one", "infra/deepspeed/cpu.json", steps=4))


def test_dead_codes_on_two_cpu_ranks_under_zero2_agree_and_reach_the_master_weights(tmp_path):
    out, log = tmp_path / "two", tmp_path / "two.log"
    proc = launch(["-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",  # picks its own free port
                   "-m", "tests.train.tiny_states", str(out), "--steps", "4",
                   "--ds-config", "infra/deepspeed/cpu_zero2.json"], log)
    finish(proc, log)
    _assert_healthy(json.loads((out / "steps.json").read_text()), ranks=2, master=True)


def test_write_rows_without_master_copy_resets_torch_adam_moments():
    from types import SimpleNamespace

    from eric.train.codebook import write_rows

    param = torch.nn.Parameter(torch.ones(4, 2))
    optimizer = torch.optim.AdamW([param], lr=0.1)
    param.sum().backward()
    optimizer.step()
    write_rows(SimpleNamespace(optimizer=optimizer), param, torch.tensor([False, True, False, True]), torch.zeros(4, 2))
    assert param[1].abs().sum() == 0 and param[0].abs().sum() > 0
    state = optimizer.state[param]
    assert state["exp_avg"][[1, 3]].abs().sum() == 0 and state["exp_avg"][0].abs().sum() > 0


def test_probe_counts_codebook_gradient_rows():
    from eric.model.state_space import StateSpace
    from eric.train.codebook import CodebookProbe

    torch.manual_seed(0)
    space = StateSpace(num_states=5, state_dim=3, gradient="selected")
    probe = CodebookProbe(space)
    e = torch.nn.functional.normalize(torch.randn(2, 3), dim=-1)
    space(e).states.sum().backward()
    measured = probe.pop()
    assert 1 <= measured["codebook_grad_rows"] <= 2 and measured["codebook_grad_norm"] > 0
    assert probe.pop()["codebook_grad_rows"] == 0  # popped: the next step starts at zero
    assert abs(probe.drift()) < 1e-6
