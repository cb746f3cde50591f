"""`deepspeed.initialize` with a client torch AdamW and a linear-decay schedule.

A torch optimizer (not DeepSpeed's `{"type": "AdamW"}`) means nothing but the
communication op is JIT-compiled; DeepSpeed still wraps it for ZeRO, clipping,
accumulation and checkpointing. The scheduler is handed to DeepSpeed so it steps at
accumulation boundaries and is saved in checkpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from eric.train.checkpoint import use_safe_loading
from eric.train.compile_passes import RandomMasksFirst
from eric.train.runtime import device_kind, init_distributed, prepare_environment

NO_DECAY = ("bias", "norm", "layernorm", "layer_norm")


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """No weight decay on biases and normalisation weights, nor on what the model lists in
    `no_weight_decay()` (ERIC: the codebook and the embeddings, as in the authors' code)."""
    decay, no_decay = [], []
    exempt = set(model.no_weight_decay()) if hasattr(model, "no_weight_decay") else set()
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        is_exempt = param.ndim < 2 or name in exempt or any(key in name.lower() for key in NO_DECAY)
        (no_decay if is_exempt else decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]  # an empty group (nothing decays: the paper recipe) upsets DeepSpeed


def linear_schedule(total_steps: int, warmup_steps: int = 0):
    """LR multiplier: linear warm-up, then linear decay to 0 at `total_steps`."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        remaining = total_steps - step
        return max(0.0, remaining / max(1, total_steps - warmup_steps))

    return factor


def build_optimizer(model, lr: float, weight_decay: float, total_steps: int, warmup_steps: int = 0,
                    fused: bool | None = None):
    """AdamW + the schedule. `fused` (default: on CUDA) updates every tensor in one kernel; CPU
    keeps torch's default path, so CPU runs keep their committed results."""
    fused = device_kind() == "cuda" if fused is None else fused
    optimizer = torch.optim.AdamW(parameter_groups(model, weight_decay), lr=lr, fused=fused or None)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_schedule(total_steps, warmup_steps))
    return optimizer, scheduler


def initialize(model: torch.nn.Module, ds_config: dict, *, lr: float, weight_decay: float,
               total_steps: int, warmup_steps: int = 0, fused: bool | None = None):
    """A DeepSpeed engine around `model`; works as a lone process or under a launcher."""
    prepare_environment()
    init_distributed()
    import deepspeed

    deepspeed.utils.logger.setLevel(logging.WARNING)
    optimizer, scheduler = build_optimizer(model, lr, weight_decay, total_steps, warmup_steps, fused)
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_config
    )
    use_safe_loading(engine)
    if engine.world_size == 1 and engine.zero_optimization_stage() == 0:
        # a lone rank has nothing to average: skip flattening every gradient into buckets
        # for an all-reduce over one process (a few % of a tiny-model CPU step)
        engine.enable_backward_allreduce = False
    return engine


# compiled training pads every batch width to a multiple of this (the collator's pad_multiple):
# on CUDA, inductor guards on whether an SDPA mask's strides are multiples of 8, so lengths
# that are sometimes aligned and sometimes not would cost a second and third graph (docs/gpu.md)
COMPILED_PAD_MULTIPLE = 8


def compile_in_place(model: torch.nn.Module, backend: str | Callable = "inductor") -> None:
    """torch.compile `model`'s forward (and so its backward) in place: the module keeps its
    parameter names, so checkpoints and `save_pretrained` are unchanged. Feed it batches
    padded to COMPILED_PAD_MULTIPLE through `symbolic_shapes`, or new shapes cost compiles
    (docs/gpu.md). Inductor draws the dropout masks first (`RandomMasksFirst`): fewer kernels."""
    options = {"post_grad_custom_post_pass": RandomMasksFirst()} if backend == "inductor" else None
    model.compile(backend=backend, options=options)


def symbolic_shapes(batch: dict) -> dict:
    """Mark every dimension of the batch's tensors dynamic before the compiled forward sees
    them, so its first compile is already symbolic in batch size, lengths and unit count.

    Left to torch's automatic dynamic shapes, the first graph specializes on every size and
    each size that changes later costs one more compile (batch size, then unit count, ...):
    with token-budget batches that is a compile every few steps. A size of 1 stays
    specialized (torch's 0/1 rule): a lone-row batch adds one graph."""
    for value in batch.values():
        if isinstance(value, torch.Tensor):
            for dim in range(value.dim()):
                torch._dynamo.maybe_mark_dynamic(value, dim)
    return batch
