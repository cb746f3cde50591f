"""L_CL of a fixed critic on ERIC's collated batches: lines no learned model needs.

ERIC's contrastive loss (eric/model/modeling_eric.py) has, per anchor (text b, unit n,
entity p_n), a positive c_n among candidates. `batch_pairs` lists the anchors and hard
negatives of a collated batch in the model's order; `candidate_mask` says which of them
each anchor is scored against, for each candidate set:

  batch   every anchor of the batch and every hard negative (the paper's)
  text    those of the anchor's own text (batch row)
  entity  the anchor's own positive and the same entity's LATER units of its text (m > n,
          p_m == p_n); no hard negative. An anchor with no later unit of its entity has
          nothing to pick among and is skipped. Earlier units are left out: they are in
          the prefix and could be matched by copying.

A critic scores every (anchor, candidate) pair ([A, C] float64: an identity bonus of 1e4
sits beside scores of a few units without rounding them away); `critic_loss` is its
InfoNCE (mean over counted anchors) with chance = mean ln(candidates) over the same
anchors. `identity` knows only which placeholder each candidate carries: every candidate
of an `entity` set carries the anchor's, so it scores exactly chance there, while on
`batch` / `text` it only has to pick among the candidates with the anchor's placeholder
and goes below chance: a learned L_CL there counts as learning only below this line.
Critics add as scores (eric/world/oracle.py's oracle plus identity: eric/evaluate/world_lines.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from eric.model.losses import same_entity_later, same_text_candidates

CANDIDATE_SETS = ("batch", "text", "entity")
IDENTITY_BONUS = 1e4  # exp(-1e4) is 0 in float64: the other placeholders are out of the race


@dataclass(frozen=True)
class Candidate:
    row: int  # batch row (the text)
    story: str  # its id
    unit: int  # 0-based target unit
    entity: int  # cast index k of the placeholder <ek> it carries


@dataclass
class Pairs:
    anchors: list[Candidate]  # anchor i's positive is candidate i
    negatives: list[Candidate]  # hard negatives, after the anchors among the candidates
    later: torch.Tensor  # [A, A] bool: the model's entity candidates among the anchors

    @property
    def candidates(self) -> list[Candidate]:
        return self.anchors + self.negatives


def batch_pairs(batch: dict, ids: list[str], entity_class: dict[int, int]) -> Pairs:
    """Anchors (units with an entity and its position: those with a gold state) and hard
    negatives of a collated batch, in the model's order; `ids`: the rows' ids in batch order."""
    entity_ids, labels = batch["entity_ids"], batch["labels"]
    has_entity = entity_ids > 0
    target = has_entity & (batch["entity_positions"] >= 0)
    anchors = [Candidate(b, ids[b], n, int(entity_ids[b, n]) - 1) for b, n in target.nonzero().tolist()]
    slots = target.flatten().nonzero().flatten()  # the anchors' slots, in the same order
    later = same_entity_later(entity_ids, target)[slots][:, slots]
    hard = batch.get("hard_negative_positions")
    if hard is None:
        return Pairs(anchors, [], later)
    k_of = {token: cls - 1 for token, cls in entity_class.items()}  # <ek>'s token id -> k
    negatives = [Candidate(b, ids[b], n, k_of[int(labels[b, int(hard[b, n])])])
                 for b, n in (has_entity & (hard >= 0)).nonzero().tolist()]
    return Pairs(anchors, negatives, later)


def candidate_mask(pairs: Pairs, which: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(allowed [A, C] bool: candidate j is in anchor i's set, counted [A] bool: anchors scored)."""
    if which not in CANDIDATE_SETS:
        raise ValueError(f"unknown candidate set {which!r} ({', '.join(CANDIDATE_SETS)})")
    m, candidates = len(pairs.anchors), pairs.candidates
    if which == "batch":
        return torch.ones(m, len(candidates), dtype=torch.bool), torch.ones(m, dtype=torch.bool)
    if which == "text":
        row = torch.tensor([c.row for c in candidates], dtype=torch.long)
        return same_text_candidates(row[:m], row), torch.ones(m, dtype=torch.bool)
    allowed = torch.nn.functional.pad(pairs.later, (0, len(pairs.negatives)))  # no hard negative
    return allowed, pairs.later.sum(1) >= 2


def identity(anchors: list[Candidate], candidates: list[Candidate], bonus: float = IDENTITY_BONUS) -> torch.Tensor:
    """+bonus where the candidate carries the anchor's placeholder, else 0."""
    a = torch.tensor([c.entity for c in anchors], dtype=torch.long)
    c = torch.tensor([x.entity for x in candidates], dtype=torch.long)
    return (a[:, None] == c[None, :]).double() * bonus


def critic_loss(scores: torch.Tensor, allowed: torch.Tensor, counted: torch.Tensor) -> tuple[float, float, int]:
    """(InfoNCE of `scores` [A, C] over the allowed candidates, mean ln(candidates), anchors
    counted): means over the counted anchors; (0, 0, 0) when none is."""
    if not bool(counted.any()):
        return 0.0, 0.0, 0
    logits = scores.double().masked_fill(~allowed, -math.inf)[counted]
    targets = torch.arange(scores.shape[0])[counted]
    loss = torch.nn.functional.cross_entropy(logits, targets)
    chance = allowed[counted].sum(1).double().log().mean()
    return float(loss), float(chance), int(counted.sum())
