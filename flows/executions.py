"""A killed execution resumes: its checkpoints go to the next execution of the same configuration.

Each execution runs in a checkout of its own (flows/dvc_steps.py) named
`<configuration key>-<flow run id>`, the key a hash of the effective params. While it
runs it holds an OS lock on `<checkout>.alive` (released by the OS when the process
dies, however it dies). An execution that fails or is interrupted (Ctrl-C, SIGTERM) leaves
its checkout behind too when it holds a checkpoint. A checkout left behind whose lock is
free is a killed execution's: the next execution of the same configuration moves its
resumable state (`train.checkpoint_dir`: DeepSpeed checkpoints and the snapshots written
so far) into its own checkout, where training resumes from the newest checkpoint written for the
same settings (eric/train/checkpoint.py checks a fingerprint, and starts afresh
otherwise), and removes the dead checkout. Leftovers of other configurations stay for
their own next execution.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

KEY_LENGTH = 12
LATEST = "latest"  # a checkpoint root's pointer to its newest checkpoint (eric/train/checkpoint.py)


def execution_key(params: dict) -> str:
    """The configuration's name: equal effective params, equal key."""
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def _alive_file(checkout: Path) -> Path:
    return checkout.with_name(checkout.name + ".alive")


@contextmanager
def alive(checkout: Path) -> Iterator[None]:
    """Mark `checkout` as in use for as long as the block runs (and the process lives)."""
    path = _alive_file(checkout)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def is_alive(checkout: Path) -> bool:
    path = _alive_file(checkout)
    if not path.exists():
        return False
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def has_resumable_state(checkout: Path, resumable: list[str]) -> bool:
    """Whether a failed or interrupted execution left something to resume from: then its
    checkout stays for the next execution of its configuration (Ctrl-C, SIGTERM and a crash
    end the flow through its `finally`, which would otherwise remove the checkpoints)."""
    return any(any((checkout / rel).rglob(LATEST)) for rel in resumable if (checkout / rel).is_dir())


def killed_executions(checkout: Path, key: str) -> list[Path]:
    """Checkouts of the same configuration that no process holds, newest first."""
    found = [p for p in checkout.parent.glob(f"{key}-*") if p.is_dir() and p != checkout and not is_alive(p)]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def carry_resumable_state(
    checkout: Path, key: str, resumable: list[str], remove: Callable[[Path], None], log: Callable[[str], None]
) -> list[Path]:
    """Move each `resumable` folder (relative to a checkout) of the newest killed execution
    of this configuration into `checkout`, then remove the killed checkouts; returns what
    was carried."""
    carried = []
    for dead in killed_executions(checkout, key):
        for rel in resumable:
            source, target = dead / rel, checkout / rel
            if has_resumable_state(dead, [rel]) and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(source), str(target))
                carried.append(target)
                log(f"resuming: {rel} carried from the killed execution {dead.name} of this configuration")
        remove(dead)
        _alive_file(dead).unlink(missing_ok=True)
    return carried
