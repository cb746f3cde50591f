"""A DeepSpeed op build killed midway leaves torch's lock file, on which every later training
waited forever: eric/build_locks.py tells such a leftover from a build in progress and removes it."""

import logging
import os
import subprocess
import sys
import threading
import time

from torch.utils.file_baton import FileBaton

from eric import build_locks
from eric.train import runtime

# a builder as torch runs one: the lock created with O_EXCL and held open while it builds
BUILDER = """
import sys, time
from torch.utils.file_baton import FileBaton
assert FileBaton(sys.argv[1]).try_acquire()
print("building", flush=True)
time.sleep(600)
"""


def _age(path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_build_in_progress_is_left_and_a_killed_ones_lock_is_removed(tmp_path, caplog):
    lock = tmp_path / "deepspeed_shm_comm" / "lock"
    lock.parent.mkdir()
    builder = subprocess.Popen([sys.executable, "-c", BUILDER, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert builder.stdout.readline().strip() == "building"
        _age(lock, 3600)  # however old: a process holds it, so it is a build
        assert build_locks.held_open(lock)
        assert build_locks.clear_stale_locks(tmp_path) == [] and lock.exists()
    finally:
        builder.kill()
        builder.wait()
    assert not build_locks.held_open(lock)
    with caplog.at_level(logging.WARNING, logger="eric.build_locks"):
        assert build_locks.clear_stale_locks(tmp_path) == [lock]
    assert not lock.exists()
    assert "left by a killed build" in caplog.text and str(lock) in caplog.text


def test_a_young_lock_is_left_even_unheld(tmp_path):
    lock = tmp_path / "op" / "lock"
    lock.parent.mkdir()
    lock.touch()  # a builder on another host sharing the folder is not seen in /proc: age decides
    assert build_locks.stale_locks(tmp_path) == []
    assert build_locks.stale_locks(tmp_path, now=time.time() + build_locks.MIN_AGE_S) == [lock]
    assert build_locks.clear_stale_locks(tmp_path) == [] and lock.exists()


def test_the_watcher_lets_a_waiting_load_go_on(tmp_path):
    lock = tmp_path / "op" / "lock"
    lock.parent.mkdir()
    lock.touch()
    _age(lock, 3600)
    waiter = threading.Thread(target=FileBaton(str(lock)).wait, daemon=True)  # what a later load does
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive()  # torch alone would wait forever
    build_locks.watch(tmp_path, every_s=0.05)
    waiter.join(10)
    assert not waiter.is_alive() and not lock.exists()


def test_the_default_folder_is_the_one_training_builds_in(monkeypatch):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    assert build_locks.extensions_dir() == runtime.EXTENSIONS_DIR
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", "/elsewhere")
    assert str(build_locks.extensions_dir()) == "/elsewhere"


def test_training_clears_a_stale_lock_before_it_loads_an_op(tmp_path, monkeypatch, caplog):
    """init_distributed (every training's first DeepSpeed call, whose op loads take the lock)
    starts the process's watcher first: the load finds the leftover gone."""
    import deepspeed

    lock = tmp_path / "deepspeed_shm_comm" / "lock"
    lock.parent.mkdir()
    lock.touch()
    _age(lock, 3600)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(build_locks, "_watcher", None)  # this process's watcher: started anew here
    seen = []
    monkeypatch.setattr(deepspeed, "init_distributed", lambda **_: seen.append(lock.exists()))
    with caplog.at_level(logging.WARNING, logger="eric.build_locks"):
        runtime.init_distributed()
    assert seen == [False] and "left by a killed build" in caplog.text
    watcher = build_locks._watcher
    runtime.init_distributed()
    assert build_locks._watcher is watcher and watcher.is_alive()  # one watcher per process
