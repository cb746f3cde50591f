"""Deterministic, resumable data order.

The examples a rank reads at optimizer step `s` are a pure function of (seed, epoch,
step): an epoch is a seeded permutation cut into *step batches* of
micro_batch_size x grad_accum_steps x world_size examples (the tail that does not fill
one is dropped), so resuming at step `s` needs no saved sampler state and lands on
exactly the same examples. A step batch is dealt out as micro-step `a`, rank `r` ->
slot `a * world_size + r`; the same step batch therefore trains whether it is spread
over ranks or over accumulation steps.

With `lengths`, examples of similar length share micro-batches (less padding): the
permutation is sorted by length inside windows of `group_size` step batches and the
step batches are then shuffled again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np


@dataclass(frozen=True)
class DataOrder:
    n_examples: int
    micro_batch_size: int
    grad_accum_steps: int = 1
    world_size: int = 1
    rank: int = 0
    seed: int = 0
    lengths: Sequence[int] | None = None
    group_size: int = 32  # step batches per length-sorting window

    @property
    def step_batch_size(self) -> int:
        return self.micro_batch_size * self.grad_accum_steps * self.world_size

    @property
    def steps_per_epoch(self) -> int:
        return self.n_examples // self.step_batch_size

    def _rng(self, epoch: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, epoch])

    def step_batches(self, epoch: int) -> np.ndarray:
        """(steps_per_epoch, step_batch_size) example indices of one epoch, all ranks."""
        rng = self._rng(epoch)
        order = rng.permutation(self.n_examples)[: self.steps_per_epoch * self.step_batch_size]
        if self.lengths is not None:
            order = self._group_by_length(order)
        batches = order.reshape(self.steps_per_epoch, self.step_batch_size)
        return batches[rng.permutation(len(batches))] if self.lengths is not None else batches

    def _group_by_length(self, order: np.ndarray) -> np.ndarray:
        lengths = np.asarray(self.lengths)
        window = self.group_size * self.step_batch_size
        chunks = [order[i : i + window] for i in range(0, len(order), window)]
        # stable sort: equal lengths keep their shuffled order
        return np.concatenate([c[np.argsort(-lengths[c], kind="stable")] for c in chunks])

    def micro_batches(self, step_batch: np.ndarray) -> list[list[int]]:
        """This rank's micro-batches of one step batch, in accumulation order."""
        slots = step_batch.reshape(self.grad_accum_steps * self.world_size, self.micro_batch_size)
        return [slots[a * self.world_size + self.rank].tolist() for a in range(self.grad_accum_steps)]

    def iter_steps(self, epoch: int, start: int = 0) -> Iterator[tuple[int, list[list[int]]]]:
        """(position in epoch, this rank's micro-batches) from step `start` of `epoch` on."""
        batches = self.step_batches(epoch)
        for position in range(start, len(batches)):
            yield position, self.micro_batches(batches[position])


def eval_batches(n_examples: int, batch_size: int, rank: int = 0, world_size: int = 1,
                 lengths: Sequence[int] | None = None) -> list[list[int]]:
    """Fixed validation batches: this rank's share, longest first (no randomness)."""
    mine = np.arange(rank, n_examples, world_size)
    if lengths is not None:
        mine = mine[np.argsort(-np.asarray(lengths)[mine], kind="stable")]
    return [mine[i : i + batch_size].tolist() for i in range(0, len(mine), batch_size)]


def lengths(tokenizer, rows: list[dict], max_source: int, max_target: int) -> list[int]:
    """Token counts of stage-one rows (capped like the collator) for length-grouped batches:
    the training stage's, and anything that must see its very validation batches
    (eric/evaluate/world_lines.py)."""
    src = tokenizer([r["source"] for r in rows], add_special_tokens=False)["input_ids"]
    tgt = tokenizer([r["target"] for r in rows], add_special_tokens=False)["input_ids"]
    return [min(len(s) + 2, max_source) + min(len(t) + 2, max_target) for s, t in zip(src, tgt)]


def token_budget_batches(lengths: Sequence[tuple[int, int]], max_tokens: int) -> list[list[int]]:
    """Micro-batches by padded size, as a throughput run packs them: examples sorted by
    (target, source) length, packed while rows x (longest source + longest target) stays
    within `max_tokens` (an example longer than that goes alone). `lengths`: (source,
    target) token counts. Batch size and both lengths change from batch to batch: the
    shapes a compiled forward must serve (eric/train/engine.py `symbolic_shapes`)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i][1], lengths[i][0]))
    batches, current, longest = [], [], (0, 0)
    for i in order:
        grown = (max(longest[0], lengths[i][0]), max(longest[1], lengths[i][1]))
        if current and (len(current) + 1) * sum(grown) > max_tokens:
            batches.append(current)
            current, grown = [], lengths[i]
        current.append(i)
        longest = grown
    return [*batches, current] if current else batches
