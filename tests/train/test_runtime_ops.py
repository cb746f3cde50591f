"""infra/setup.sh (infra/build_ops.py) compiles DeepSpeed's CPU comm op once, into the checkout's
extensions folder, where every later training (and every test, e2e copies included) finds it."""

from __future__ import annotations

import os
import subprocess
import sys

from eric.config import PROJECT_ROOT
from eric.train.runtime import EXTENSIONS_DIR


def test_the_cpu_comm_op_is_built_into_the_checkouts_extensions_folder():
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_EXTENSIONS_DIR", "DS_ACCELERATOR")}
    script = PROJECT_ROOT / "infra" / "build_ops.py"
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert str(EXTENSIONS_DIR) in run.stdout
    assert (EXTENSIONS_DIR / "deepspeed_shm_comm" / "deepspeed_shm_comm.so").is_file()
