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

from eric import build_locks

# JIT-compiled DeepSpeed ops (the CPU shared-memory comm op, ~40 s) are built here once
EXTENSIONS_DIR = build_locks.DEFAULT_EXTENSIONS_DIR


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
        os.environ[OWN_PORT] = os.environ["MASTER_PORT"]
    return current_rank()


def avoid_per_shape_attention_plans() -> None:
    """Keep scaled-dot-product attention off cuDNN's kernels on CUDA (flash and memory-efficient
    kernels remain). cuDNN builds a plan for every new (batch, length) shape, and batches grouped
    by length change shape almost every step: on an H200 at bart-base size, at token-budget
    batches of the real lengths, planning made a step about 6x slower (benchmarks/gpu_train.py;
    the figures are on docs/gpu.md). No effect without CUDA."""
    if torch.cuda.is_available():
        torch.backends.cuda.enable_cudnn_sdp(False)


# set beside MASTER_PORT when prepare_environment picked it (no launcher did): then it may change
OWN_PORT = "ERIC_OWN_MASTER_PORT"


def init_distributed(attempts: int = 5) -> None:
    """deepspeed.init_distributed, retrying on a fresh port when the one prepare_environment picked
    was taken between free_port() and the store's bind (a race on a busy host: EADDRINUSE). A
    launcher's port is never changed. The op loads that follow wait on a build lock a killed
    process may have left: the lock guard (eric/build_locks.py) removes such a leftover."""
    import deepspeed
    from torch.distributed import DistNetworkError

    build_locks.guard()

    for attempt in range(attempts):
        try:
            deepspeed.init_distributed(verbose=False)
            return
        except DistNetworkError:
            own = os.environ.get(OWN_PORT) == os.environ.get("MASTER_PORT")
            if not own or attempt == attempts - 1:
                raise
            os.environ["MASTER_PORT"] = os.environ[OWN_PORT] = str(free_port())


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
