"""DeepSpeed JSON configs: ZeRO stage and precision come from infra/deepspeed/*.json,
batch sizes and clipping from params, so one file serves every model size.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from eric.config import PROJECT_ROOT, resolve_path
from eric.train.errors import TrainError
from eric.train.runtime import bf16_supported, device_kind

CONFIG_DIR = PROJECT_ROOT / "infra" / "deepspeed"
# `auto`: one CUDA rank trains like a plain torch loop (fp32 weights, bf16 autocast, ZeRO 0);
# ZeRO-2 only pays with several ranks to shard over. Measured on one H100 at bart-base
# (benchmarks/gpu_profile.py): ZeRO-2 bf16 40.5k tokens/s for BART, 19.6k for ERIC; ZeRO 0 with
# autocast 83.6k and 50.9k (its per-parameter gradient hooks and flat-buffer copies buy nothing alone).
DEFAULT_CONFIGS = {"cpu": CONFIG_DIR / "cpu.json", "cuda": CONFIG_DIR / "gpu_bf16.json",
                   "cuda-ranks": CONFIG_DIR / "gpu_bf16_zero2.json"}
MIXED_PRECISION_KEYS = ("bf16", "fp16", "torch_autocast")

Precision = Literal["auto", "fp32", "bf16"]


def config_path(name: str | Path, world_size: int = 1) -> Path:
    """`auto` picks the CPU config, or the GPU one for one rank or for several; anything else
    is a path (project-relative ok)."""
    if str(name) == "auto":
        kind = device_kind()
        return DEFAULT_CONFIGS["cuda-ranks" if kind == "cuda" and world_size > 1 else kind]
    return resolve_path(name)


def read_config(name: str | Path, world_size: int = 1) -> dict:
    path = config_path(name, world_size)
    if not path.is_file():
        raise TrainError(f"DeepSpeed config not found: {path}")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TrainError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(config, dict):
        raise TrainError(f"{path}: top level must be an object")
    return config


def uses_bf16(config: dict) -> bool:
    return any(config.get(key, {}).get("enabled", False) for key in ("bf16", "torch_autocast"))


def apply_precision(config: dict, precision: Precision) -> dict:
    """fp32 strips every mixed-precision section; bf16 keeps the file's bf16 mode or
    adds bf16 autocast (fp32 master weights); auto is bf16 where the device supports it."""
    if precision == "auto":
        precision = "bf16" if bf16_supported() else "fp32"
    config = {k: v for k, v in config.items() if precision == "bf16" or k not in MIXED_PRECISION_KEYS}
    if precision == "bf16" and not uses_bf16(config):
        config["torch_autocast"] = {"enabled": True, "dtype": "bfloat16"}
    return config


def build_ds_config(
    name: str | Path,
    *,
    micro_batch_size: int,
    grad_accum_steps: int,
    world_size: int,
    max_grad_norm: float,
    precision: Precision = "auto",
) -> dict:
    """The full DeepSpeed config dict for `deepspeed.initialize`."""
    config = apply_precision(read_config(name, world_size), precision)
    config.update(
        train_micro_batch_size_per_gpu=micro_batch_size,
        gradient_accumulation_steps=grad_accum_steps,
        train_batch_size=micro_batch_size * grad_accum_steps * world_size,
        gradient_clipping=max_grad_norm,
    )
    config.setdefault("steps_per_print", 10**9)
    return config
