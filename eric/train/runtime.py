"""Process environment for DeepSpeed: one code path for a lone CPU process and launched ranks.

`deepspeed`/`torchrun` export RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT.
A plain `python stages/...` run has none of them, and DeepSpeed would then go looking
for MPI; `prepare_environment()` fills in a world of one instead. Every value is only a
default, so a launcher's (or a user's) settings always win.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch

from eric.config import PROJECT_ROOT

# JIT-compiled DeepSpeed ops (the CPU shared-memory comm op, ~40 s) are cached here
# and reused by every later run and test.
EXTENSIONS_DIR = PROJECT_ROOT / ".torch_extensions"


@dataclass(frozen=True)
class Rank:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare_environment() -> Rank:
    """Set the distributed variables DeepSpeed needs when no launcher did. Idempotent."""
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(EXTENSIONS_DIR))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port())
    return current_rank()


def current_rank() -> Rank:
    return Rank(
        rank=int(os.environ.get("RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
    )


def device_kind() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def bf16_supported() -> bool:
    """bf16 pays off on CUDA cards with bf16 and on CPUs with native bf16 (AVX512-BF16/AMX,
    which oneDNN reports). Without it, bf16 matmuls are emulated: measured 7x slower than
    fp32 on this AVX2-only EPYC, so `precision: auto` stays in fp32 there."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
