"""What every baseline's tests share: sampling the same batch with and without the KV cache, or with
the dynamic and the static decoding step."""

from __future__ import annotations

import torch


def sample_with_and_without_cache(model, batch: dict, seed: int = 3, **kwargs) -> tuple:
    """(cached, uncached) outputs of `model.generate` on `batch`, each from a generator seeded alike."""
    return tuple(model.generate(batch["input_ids"], batch["attention_mask"], use_cache=cache,
                                generator=torch.Generator().manual_seed(seed), **kwargs) for cache in (True, False))


def sample_with_each_decode_step(model, batch: dict, steps=("dynamic", "static"), seed: int = 3, **kwargs) -> tuple:
    """One output of `model.generate` on `batch` per decoding step (eric/model/static_decoding.py),
    each from a generator seeded alike."""
    return tuple(model.generate(batch["input_ids"], batch["attention_mask"], decode_step=step,
                                generator=torch.Generator().manual_seed(seed), **kwargs) for step in steps)
