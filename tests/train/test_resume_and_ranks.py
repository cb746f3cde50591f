"""Crash safety and multi-process runs, with real processes: kill -9 mid-run and resume;
two CPU ranks (torchrun) against one rank accumulating the same step batches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from eric.config import PROJECT_ROOT
from tests.train.tiny import train_tiny


def launch(args: list[str], log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)  # each child sets up its own world, as a user's shell would
    return subprocess.Popen([sys.executable, *args], cwd=PROJECT_ROOT, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    """The run's exit; past the deadline (generous: ranks on a host that also trains, or that
    still compiles DeepSpeed's op, took 300 s) it is killed and the failure shows its log."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"still running after {timeout:.0f} s:\n{log.read_text()[-3000:]}")
    assert code == 0, log.read_text()[-3000:]


def wait_for(path: Path, proc: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    """Until `path` exists (the event), failing if the process ends first; a generous deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file():
            return
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear in {timeout:.0f} s")


def close_histories(a: list[dict], b: list[dict]) -> None:
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        assert ra["loss"] == pytest.approx(rb["loss"], abs=1e-4), ra["step"]
        assert ra["lr"] == pytest.approx(rb["lr"])


def test_kill_9_mid_run_then_rerun_ends_like_an_uninterrupted_run(tmp_path):
    reference = train_tiny(tmp_path / "reference", steps=12)  # in-process, same settings

    out, log = tmp_path / "killed", tmp_path / "killed.log"
    proc = launch(["-m", "tests.train.tiny", str(out), "--steps", "12", "--hold-at", "6"], log)
    wait_for(out / "held", proc, log)  # step 6 done and checkpointed; the run waits there
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "result.json").exists()  # it really died mid-way
    killed_at = int((out / "ckpt" / "latest").read_text()[4:])
    assert killed_at == 6

    rerun = launch(["-m", "tests.train.tiny", str(out), "--steps", "12"], tmp_path / "rerun.log")
    finish(rerun, tmp_path / "rerun.log")
    resumed = json.loads((out / "result.json").read_text())
    assert resumed["resumed_from"] == [killed_at]
    assert resumed["steps"] == reference["steps"] == 12
    close_histories(resumed["history"], reference["history"])
    assert resumed["final_val_loss"] == pytest.approx(reference["final_val_loss"], abs=1e-4)


@pytest.mark.slow
def test_two_cpu_ranks_match_one_rank_accumulating(tmp_path):
    """2 ranks x micro 4 (ZeRO-2) == 1 rank x micro 4 x 2 accumulation steps (ZeRO-0)."""
    single = train_tiny(tmp_path / "single", steps=6, accum=2, dropout=0.0, checkpoint_every=6)

    out, log = tmp_path / "two", tmp_path / "two.log"
    proc = launch(["-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",  # picks its own free port
                   "-m", "tests.train.tiny", str(out), "--steps", "6",
                   "--dropout", "0", "--checkpoint-every", "6",
                   "--ds-config", "infra/deepspeed/cpu_zero2.json"], log)
    finish(proc, log)
    two = json.loads((out / "result.json").read_text())
    close_histories(two["history"], single["history"])
    assert two["tokens"] == single["tokens"]
    assert two["final_val_loss"] == pytest.approx(single["final_val_loss"], abs=1e-4)
    ckpt = out / "ckpt" / "step00000006"
    assert {p.name for p in ckpt.glob("*rank*")} >= {
        "rng_rank0.pt", "rng_rank1.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"}
    a = load_file(out / "model" / "model.safetensors")
    b = load_file(tmp_path / "single" / "model" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
