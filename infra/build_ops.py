"""Compile the DeepSpeed op a CPU training loads first (its shared-memory comm op) into the
checkout's extensions folder (eric/train/runtime.py EXTENSIONS_DIR), at set-up: built on first
use instead, it costs the first training, and every test that trains first, 2-3 minutes on busy
cores. A GPU machine needs none of it.

    .venv/bin/python infra/build_ops.py
"""

from __future__ import annotations

import os

import torch

from eric.build_locks import clear_stale_locks
from eric.train.runtime import prepare_environment


def build_cpu_ops() -> str:
    if torch.cuda.is_available():
        return "a GPU: no CPU op to build"
    prepare_environment()  # the accelerator and extensions folder a training sets up
    clear_stale_locks()  # a set-up killed mid-build would otherwise leave every later one waiting
    from deepspeed.accelerator import get_accelerator

    get_accelerator().create_op_builder("ShareMemCommBuilder").load(verbose=False)
    return f"DeepSpeed's CPU comm op built in {os.environ['TORCH_EXTENSIONS_DIR']}"


if __name__ == "__main__":
    print(build_cpu_ops())
