"""infra/setup.sh compiles DeepSpeed's CPU comm op once, into the checkout's extensions folder,
where every later training (and every test, e2e copies included) finds it."""

from __future__ import annotations

import os
import subprocess
import sys

from eric.train.runtime import EXTENSIONS_DIR

SCRIPT = "from eric.train.runtime import build_cpu_ops; print(build_cpu_ops())"


def test_the_cpu_comm_op_is_built_into_the_checkouts_extensions_folder():
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_EXTENSIONS_DIR", "DS_ACCELERATOR")}
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert str(EXTENSIONS_DIR) in run.stdout
    assert (EXTENSIONS_DIR / "deepspeed_shm_comm" / "deepspeed_shm_comm.so").is_file()
