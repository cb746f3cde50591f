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
DEFAULT_CONFIGS = {"cpu": CONFIG_DIR / "cpu.json", "cuda": CONFIG_DIR / "gpu_bf16_zero2.json"}
MIXED_PRECISION_KEYS = ("bf16", "fp16", "torch_autocast")

Precision = Literal["auto", "fp32", "bf16"]


def config_path(name: str | Path) -> Path:
    """`auto` picks the CPU or GPU config; anything else is a path (project-relative ok)."""
    if str(name) == "auto":
        return DEFAULT_CONFIGS[device_kind()]
    return resolve_path(name)


def read_config(name: str | Path) -> dict:
    path = config_path(name)
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
    config = apply_precision(read_config(name), precision)
    config.update(
        train_micro_batch_size_per_gpu=micro_batch_size,
        gradient_accumulation_steps=grad_accum_steps,
        train_batch_size=micro_batch_size * grad_accum_steps * world_size,
        gradient_clipping=max_grad_norm,
    )
    config.setdefault("steps_per_print", 10**9)
    return config
