"""flows/executions.py: a killed execution's checkpoints go to the next execution of its configuration."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import executions
from executions import alive, carry_resumable_state, execution_key, has_resumable_state, is_alive, killed_executions

CKPT = "models/checkpoints"


def _leftover(runs, name, step=None):
    """A checkout a killed execution left behind (with a checkpoint at `step`)."""
    checkout = runs / name
    checkout.mkdir(parents=True)
    if step is not None:
        (checkout / CKPT / "train_stage_one" / "eric").mkdir(parents=True)
        (checkout / CKPT / "train_stage_one" / "eric" / "latest").write_text(f"step{step:08d}")
    return checkout


def _carry(checkout, key, said):
    removed = []
    carried = carry_resumable_state(checkout, key, [CKPT], lambda dead: (removed.append(dead.name),
                                                                          shutil.rmtree(dead)), said.append)
    return carried, removed


def test_the_key_names_the_configuration():
    a = {"seed": 1, "train": {"lr": 0.0005, "max_steps": 1500}}
    assert execution_key(a) == execution_key({"train": {"max_steps": 1500, "lr": 0.0005}, "seed": 1})
    assert execution_key(a) != execution_key({**a, "seed": 2})
    assert len(execution_key(a)) == 12


def test_the_newest_killed_execution_of_the_configuration_is_resumed_from(tmp_path):
    runs = tmp_path / "eric-runs"
    older = _leftover(runs, "aaa-run1", step=500)
    newer = _leftover(runs, "aaa-run2", step=1000)
    other = _leftover(runs, "bbb-run3", step=250)  # another configuration: waits for its own
    older_time = newer.stat().st_mtime - 60
    os.utime(older, (older_time, older_time))
    checkout = _leftover(runs, "aaa-run4")
    said = []
    with alive(checkout):
        carried, removed = _carry(checkout, "aaa", said)
    assert carried == [checkout / CKPT]
    assert (checkout / CKPT / "train_stage_one" / "eric" / "latest").read_text() == "step00001000"
    assert sorted(removed) == ["aaa-run1", "aaa-run2"] and not older.exists() and not newer.exists()
    assert other.exists() and (other / CKPT).is_dir()
    assert len(said) == 1 and "aaa-run2" in said[0] and CKPT in said[0]


def test_a_running_execution_is_left_alone(tmp_path):
    runs = tmp_path / "eric-runs"
    running = _leftover(runs, "aaa-run1", step=500)
    checkout = _leftover(runs, "aaa-run2")
    with alive(running):
        assert is_alive(running) and killed_executions(checkout, "aaa") == []
        carried, removed = _carry(checkout, "aaa", [])
    assert carried == [] and removed == [] and (running / CKPT).is_dir()
    assert not is_alive(running)  # its lock went with its block


def test_a_process_killed_outright_frees_its_checkout(tmp_path):
    runs = tmp_path / "eric-runs"
    dead = _leftover(runs, "aaa-run1", step=750)
    flows = str(Path(executions.__file__).parent)
    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        sys.path.insert(0, {flows!r})
        from executions import alive
        with alive(Path({str(dead)!r})):
            print("holding", flush=True)
            os.kill(os.getpid(), 9)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == -9 and "holding" in done.stdout
    assert (runs / "aaa-run1.alive").exists() and not is_alive(dead)  # the file stays, the lock does not
    checkout = _leftover(runs, "aaa-run2")
    carried, removed = _carry(checkout, "aaa", [])
    assert carried == [checkout / CKPT] and removed == ["aaa-run1"]
    assert not (runs / "aaa-run1.alive").exists()


def test_a_killed_execution_without_checkpoints_is_only_removed(tmp_path):
    runs = tmp_path / "eric-runs"
    _leftover(runs, "aaa-run1")
    checkout = _leftover(runs, "aaa-run2")
    carried, removed = _carry(checkout, "aaa", [])
    assert carried == [] and removed == ["aaa-run1"] and not (checkout / CKPT).exists()


def test_a_failed_execution_keeps_its_checkout_only_when_it_has_checkpoints(tmp_path):
    runs = tmp_path / "eric-runs"
    assert has_resumable_state(_leftover(runs, "aaa-run1", step=500), [CKPT])
    assert not has_resumable_state(_leftover(runs, "aaa-run2"), [CKPT])
    empty = _leftover(runs, "aaa-run3")
    (empty / CKPT / "train_stage_one" / "eric").mkdir(parents=True)  # stopped before its first checkpoint
    assert not has_resumable_state(empty, [CKPT]) and not has_resumable_state(empty, [])
