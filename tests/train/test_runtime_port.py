"""A lone training process picks its own rendezvous port; if another process takes it before the
store binds (a busy host), init_distributed moves to a fresh port instead of failing."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, socket
import torch.distributed as dist
from eric.train import runtime

taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
taken.bind(("127.0.0.1", 0)); taken.listen()
busy = taken.getsockname()[1]
ports = iter([busy])
real = runtime.free_port
runtime.free_port = lambda: next(ports, None) or real()
runtime.prepare_environment()
assert os.environ["MASTER_PORT"] == str(busy)
runtime.init_distributed()
assert dist.is_initialized() and os.environ["MASTER_PORT"] != str(busy)
print("moved", busy, "->", os.environ["MASTER_PORT"])
"""


def test_a_taken_port_is_replaced_when_this_process_chose_it():
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("MASTER_PORT", "RANK", "WORLD_SIZE")}
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "moved" in run.stdout


def test_a_launchers_port_is_kept_and_the_error_raised():
    script = SCRIPT.replace("runtime.prepare_environment()", "os.environ['MASTER_PORT'] = str(busy); runtime.prepare_environment()")
    script = script.replace("runtime.init_distributed()", "\ntry:\n    runtime.init_distributed()\nexcept Exception as exc:\n    print('raised', type(exc).__name__); raise SystemExit(0)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("MASTER_PORT", "RANK", "WORLD_SIZE")}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "raised DistNetworkError" in run.stdout
