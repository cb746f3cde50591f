"""Stage-one rows (eric/data/schema.py STAGE_ONE) -> the tensors `EricForConditionalGeneration` reads.

    input_ids, attention_mask   source, `<s> ... </s>`, truncated to max_source_length
    labels                      `<s> <sent> unit <sent> unit ... </s>`, -100 = padding
    entity_ids                  [B, N] p_n per unit: 0 = <none>, i+1 = <ei>, -100 = no unit
    entity_positions            [B, N] label position of p_n's chosen occurrence, -1 = none
    hard_negative_positions     [B, N] another placeholder of the unit, -1 = none (only
                                when `hard_negatives`, the authors' code)

p_n is drawn from the placeholders of unit n (`unit_entities`): uniformly over the
distinct ones (paper) or over occurrences (`entity_choice="occurrence"`, the code).
The draw is seeded per (seed, epoch, row id), so it does not depend on batching or
workers; call `set_epoch` to redraw each epoch.

`pad_multiple` rounds every padded width (source, target, units) up to a multiple of it: a
compiled forward on CUDA then sees lengths its kernels' alignment checks always accept, so
one graph serves every batch (docs/gpu.md); the padding is the ordinary kind (masked,
-100, no unit), so the loss is the same.

Truncation drops whole trailing units, so every kept unit is complete and its
entity list still holds; only a first unit longer than the budget is cut, and then
p_n is drawn among the placeholders that survived the cut.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Literal

import torch
from transformers import PreTrainedTokenizerBase

from eric.data.schema import placeholder
from eric.data.tokenizer import special_token_ids

NO_UNIT = -100
IGNORE = -100


@dataclass
class EncodedRow:
    source: list[int]
    labels: list[int]
    entity_ids: list[int]
    entity_positions: list[int]
    hard_negative_positions: list[int]


class StageOneCollator:
    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_source_length: int = 128,
        max_target_length: int = 512,
        max_entities: int = 100,
        entity_choice: Literal["uniform", "occurrence"] = "uniform",
        hard_negatives: bool = False,
        seed: int = 42,
        extras: Callable[[list[dict], dict], dict] | None = None,
        pad_multiple: int = 1,
    ):
        if pad_multiple < 1:
            raise ValueError(f"pad_multiple must be at least 1, got {pad_multiple}")
        if entity_choice not in ("uniform", "occurrence"):
            raise ValueError(f"entity_choice must be 'uniform' or 'occurrence', got {entity_choice!r}")
        if max_target_length < 4:
            raise ValueError("max_target_length must leave room for <s>, <sent>, a token and </s>")
        self.tokenizer = tokenizer
        self.ids = special_token_ids(tokenizer, max_entities)
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length
        self.entity_choice = entity_choice
        self.hard_negatives = hard_negatives
        self.seed = seed
        self.extras = extras
        self.pad_multiple = pad_multiple
        self.epoch = 0
        self.entity_class = {token: i + 1 for i, token in enumerate(self.ids.entities)}

    @classmethod
    def for_training(cls, tokenizer: PreTrainedTokenizerBase, model, seed: int,
                     extras: Callable[[list[dict], dict], dict] | None = None,
                     pad_multiple: int = 1) -> "StageOneCollator":
        """The training stage's collator for `model` (params' ModelParams): its lengths, entity
        draws and hard negatives, so whatever must see the training loop's very batches (the
        EntityWorld oracle line, the probes) builds the same one."""
        return cls(tokenizer, max_source_length=model.max_source_length, max_target_length=model.max_target_length,
                   max_entities=model.max_entities, entity_choice=model.entity_choice,
                   hard_negatives=model.hard_negatives, seed=seed, extras=extras, pad_multiple=pad_multiple)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        sources, targets = self._tokenize(rows)
        batch = self.pad([self._encode(row, s, t) for row, s, t in zip(rows, sources, targets)])
        if self.extras is not None:  # a baseline's own inputs (its class's batch_extras)
            batch.update(self.extras(rows, batch))
        return batch

    def encode(self, row: dict) -> EncodedRow:
        sources, targets = self._tokenize([row])
        return self._encode(row, sources[0], targets[0])

    def _tokenize(self, rows: list[dict]) -> tuple[list[list[int]], list[list[int]]]:
        """Sources with <s> </s> (truncated); targets bare, truncated later at unit boundaries."""
        sources = self.tokenizer([r["source"] for r in rows], truncation=True, max_length=self.max_source_length)
        targets = self.tokenizer([r["target"] for r in rows], add_special_tokens=False)
        return sources["input_ids"], targets["input_ids"]

    def _encode(self, row: dict, source: list[int], target: list[int]) -> EncodedRow:
        starts = [i for i, t in enumerate(target) if t == self.ids.sent]
        unit_entities = row["unit_entities"]
        if len(starts) != len(unit_entities) or (starts and starts[0] != 0):
            raise ValueError(
                f"row {row.get('id')!r}: target has {len(starts)} sentence tokens "
                f"(first at {starts[:1]}) but {len(unit_entities)} units"
            )
        target, starts = self._truncate(target, starts)
        labels = [self.ids.bos, *target, self.ids.eos]
        rng = random.Random(f"{self.seed}:{self.epoch}:{row.get('id')}")
        ends = [*starts[1:], len(target)]
        chosen = [self._choose(target, s, e, unit_entities[n], rng) for n, (s, e) in enumerate(zip(starts, ends))]
        return EncodedRow(
            source=source,
            labels=labels,
            entity_ids=[c for c, _, _ in chosen],
            entity_positions=[p + 1 if p >= 0 else -1 for _, p, _ in chosen],  # +1: the <s> in labels
            hard_negative_positions=[h + 1 if h >= 0 else -1 for _, _, h in chosen],
        )

    def _truncate(self, target: list[int], starts: list[int]) -> tuple[list[int], list[int]]:
        budget = self.max_target_length - 2  # <s> and </s>
        if len(target) <= budget:
            return target, starts
        kept = [s for s in starts if s < budget]
        ends = [*starts[1:], len(target)]
        whole = [s for s, e in zip(starts, ends) if e <= budget]
        if whole:  # cut at the last unit boundary that fits
            cut = ends[len(whole) - 1]
            return target[:cut], whole
        return target[:budget], kept[:1]  # a single over-long first unit: keep its head

    def _choose(self, target, start, end, unit_entities, rng) -> tuple[int, int, int]:
        """(entity class, position in target, hard-negative position) for one unit."""
        allowed = set(unit_entities)
        occurrences = [
            (i, self.entity_class[t])
            for i in range(start, end)
            if (t := target[i]) in self.entity_class and placeholder(self.entity_class[t] - 1) in allowed
        ]
        if not occurrences:
            return 0, -1, -1
        first_position: dict[int, int] = {}
        for position, cls in occurrences:
            first_position.setdefault(cls, position)
        if self.entity_choice == "uniform":
            cls = rng.choice(list(first_position))
            position = first_position[cls]
        else:
            position, cls = rng.choice(occurrences)
        negative = -1
        if self.hard_negatives:
            others = [c for c in first_position if c != cls]
            negative = first_position[rng.choice(others)] if others else -1
        return cls, position, negative

    def pad(self, encoded: list[EncodedRow]) -> dict[str, torch.Tensor]:
        pad, multiple = self.ids.pad, self.pad_multiple
        batch = {
            "input_ids": _pad([e.source for e in encoded], pad, multiple),
            "labels": _pad([e.labels for e in encoded], IGNORE, multiple),
            "entity_ids": _pad([e.entity_ids for e in encoded], NO_UNIT, multiple),
            "entity_positions": _pad([e.entity_positions for e in encoded], -1, multiple),
        }
        batch["attention_mask"] = (batch["input_ids"] != pad).long()
        if self.hard_negatives:
            batch["hard_negative_positions"] = _pad([e.hard_negative_positions for e in encoded], -1, multiple)
        return batch


def _pad(rows: list[list[int]], value: int, multiple: int = 1) -> torch.Tensor:
    width = max(max((len(r) for r in rows), default=0), 1)
    width = -(-width // multiple) * multiple
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out
