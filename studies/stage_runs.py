"""A runner study's way to call a pipeline stage: the real script, one torch thread, a log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def stage(script: str, params_path: Path, log: Path, *args: str) -> None:
    """`python stages/<script> [args] <params_path>` from the project root, output into `log`."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    with log.open("w") as handle:
        code = subprocess.call([sys.executable, f"stages/{script}", *args, str(params_path)], cwd=ROOT, env=env,
                               stdout=handle, stderr=subprocess.STDOUT)
    if code:
        raise RuntimeError(f"{script} failed (exit {code}); see {log}")
