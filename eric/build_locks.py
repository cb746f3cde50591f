"""Locks left by killed op builds: found, reported and removed.

torch builds DeepSpeed's JIT ops (the CPU shared-memory comm op) under a lock file in the
extensions folder (torch.utils.file_baton: created with O_EXCL and held open by the one
process that builds; the others wait while the file exists). Every load takes it, if only
for ninja's no-op check. A process killed meanwhile (a session's end, a test's timeout)
leaves the file behind, and every later training then waits on it forever, printing
nothing. A lock that no process on this host holds open, and that is older than a build
takes, is such a leftover: `watch` removes it, with a warning, so the waiters go on.
`guard` starts one watcher per process; training calls it before it loads an op
(eric/train/runtime.py `init_distributed`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from eric.config import PROJECT_ROOT

log = logging.getLogger(__name__)

# where training compiles its ops unless TORCH_EXTENSIONS_DIR says otherwise (eric/train/
# runtime.py points torch there): cached, reused by every later run and test
DEFAULT_EXTENSIONS_DIR = PROJECT_ROOT / ".torch_extensions"
# a full build of the comm op takes 40-80 s alone, 2-3 minutes on busy cores; a lock this old
# is not a build in progress even on a filesystem shared with other hosts, which no /proc sees
MIN_AGE_S = 300.0


def extensions_dir() -> Path:
    return Path(os.environ.get("TORCH_EXTENSIONS_DIR", DEFAULT_EXTENSIONS_DIR))


def held_open(path: Path, proc: Path = Path("/proc")) -> bool:
    """Whether a process on this host has `path` open (a builder holds its lock open).
    Processes whose descriptors cannot be read are not counted; without /proc, True."""
    if not proc.is_dir():
        return True
    target = str(path.resolve())
    for pid in proc.iterdir():
        if not pid.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (pid / "fd").iterdir()):
                return True
        except OSError:  # gone meanwhile, or another user's
            continue
    return False


def is_stale(lock: Path, min_age_s: float = MIN_AGE_S, now: float | None = None) -> bool:
    """Whether `lock` is at least `min_age_s` old and no process holds it."""
    try:
        age = (time.time() if now is None else now) - lock.stat().st_mtime
    except FileNotFoundError:  # released meanwhile
        return False
    return age >= min_age_s and not held_open(lock)


def stale_locks(folder: Path, min_age_s: float = MIN_AGE_S, now: float | None = None) -> list[Path]:
    """The stale build locks under `folder`, one per op: <op>/lock."""
    return [lock for lock in sorted(folder.glob("*/lock")) if is_stale(lock, min_age_s, now)]


def clear_stale_locks(folder: Path | None = None, min_age_s: float = MIN_AGE_S) -> list[Path]:
    """Remove the stale build locks under `folder` (default: the extensions folder), each
    with a warning; returns them."""
    removed = stale_locks(extensions_dir() if folder is None else folder, min_age_s)
    for lock in removed:
        lock.unlink(missing_ok=True)
        log.warning("removed %s: a build lock no process holds, left by a killed build "
                    "(every training would wait on it)", lock)
    return removed


def watch(folder: Path | None = None, every_s: float = 30.0, min_age_s: float = MIN_AGE_S) -> threading.Thread:
    """Clear stale build locks now, then every `every_s` seconds in a daemon thread: a process
    already waiting on one (torch polls the file) goes on once it is removed."""

    def clear() -> None:
        try:
            clear_stale_locks(folder, min_age_s)
        except OSError as exc:  # never the reason a stage fails
            log.warning("build-lock check failed: %s", exc)

    def loop() -> None:
        while True:
            time.sleep(every_s)
            clear()

    clear()
    thread = threading.Thread(target=loop, name="stale-build-locks", daemon=True)
    thread.start()
    return thread


_watcher: threading.Thread | None = None


def guard() -> None:
    """This process's one watcher of the extensions folder (`watch`), started on first call:
    before a load of an op, which may wait on a lock."""
    global _watcher
    if _watcher is None or not _watcher.is_alive():
        _watcher = watch()
