"""The three training objectives (paper eq. for L_LM, L_Ent, L_CL).

Each is a mean over its items (tokens, planned units, units with an entity), so
lambda1 = lambda2 = 1 weigh terms of comparable size whatever the text length.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def language_model_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Token cross-entropy; -100 labels are ignored."""
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the rows of `values` [M, ...] where `mask` [M]; zero when there is none. A
    weighted sum, not a gather: no shape depends on the mask (a static, sync-free step)."""
    weight = mask.to(values.dtype).reshape(-1, *[1] * (values.dim() - 1))
    return (values * weight).sum(0) / weight.sum().clamp(min=1)


def entity_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """L_Ent: cross-entropy of the planner over the units in `mask` (zero if none)."""
    per_unit = F.cross_entropy(logits.float().flatten(0, -2), targets.flatten(), reduction="none")
    return masked_mean(per_unit, mask.flatten())


def joint_representation(events: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """c_n = normalize(e_n + s_n): the positive/negative for the contrastive loss."""
    return F.normalize(events + states, dim=-1)


def info_nce(
    anchors: torch.Tensor, positives: torch.Tensor, tau: float, extra_negatives: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None, valid: torch.Tensor | None = None, candidates_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """InfoNCE with in-batch negatives: anchor i's positive is positives[i], the others are negatives.

    anchors, positives [M, D] (normalized); extra_negatives [H, D] are negatives for
    every anchor (the authors' hard negatives). `allowed` [M, M + H] bool, if given, limits
    each anchor's candidates (e.g. to its own text); the diagonal must be allowed. `valid` [M] and
    `candidates_valid` [M + H] mark the real rows of padded inputs (all if None): the loss is the
    mean over valid anchors of their cross-entropy over valid candidates, zero when there is none.
    """
    candidates = positives if extra_negatives is None else torch.cat([positives, extra_negatives], dim=0)
    logits = anchors.float() @ candidates.float().t() / tau
    if candidates_valid is not None:
        allowed = candidates_valid[None, :] if allowed is None else allowed & candidates_valid[None, :]
    if allowed is not None:
        logits = logits.masked_fill(~allowed, torch.finfo(logits.dtype).min)
    per_anchor = F.cross_entropy(logits, torch.arange(anchors.shape[0], device=anchors.device), reduction="none")
    return masked_mean(per_anchor, torch.ones_like(per_anchor, dtype=torch.bool) if valid is None else valid)


def same_text_candidates(anchor_rows: torch.Tensor, candidate_rows: torch.Tensor) -> torch.Tensor:
    """[M, C] bool: candidate j comes from the same text (batch row) as anchor i."""
    return anchor_rows[:, None] == candidate_rows[None, :]


def same_entity_later(entity_ids: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[B*N, B*N] bool: slot j = (text b', unit m) is an entity candidate of anchor slot i = (b, n):
    same text, same entity, m >= n, both with a state (`target` [B, N]). The earlier units are
    left out: they are in the predictor's prefix, where copying them would match them."""
    b, n = target.shape
    rows = torch.arange(b, device=target.device)[:, None].expand(b, n).flatten()
    units = torch.arange(n, device=target.device)[None, :].expand(b, n).flatten()
    entity, valid = entity_ids.flatten(), target.flatten()
    return ((rows[:, None] == rows[None, :]) & (entity[:, None] == entity[None, :])
            & (units[None, :] >= units[:, None]) & valid[:, None] & valid[None, :])


def event_cosine(events: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean pairwise cosine of the unit vectors [M, D] under `valid` [M]; NaN for fewer than two
    (the loop's means skip NaN). Masked sums: no shape depends on `valid`."""
    events = events.float() * valid[:, None].float()
    m = valid.sum().float()
    gram = events @ events.t()
    mean = (gram.sum() - gram.diagonal().sum()) / (m * (m - 1)).clamp(min=1)
    return torch.where(m < 2, torch.full_like(mean, float("nan")), mean)


def effective_rank(events: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """exp(entropy of the normalized singular values) of the vectors [M, D] under `valid` (Roy &
    Vetterli 2007): 1 when every vector is the same, D when they fill the space evenly; NaN for
    fewer than two. Masked rows are zeroed, which adds only zero singular values. The SVD
    synchronizes a CUDA device with the host (torch's docs), so the model computes it only on
    the steps whose row the loop logs (`EricForConditionalGeneration.finish_output`)."""
    events = events.float() * valid[:, None].float()
    singular = torch.linalg.svdvals(events)
    p = singular / singular.sum().clamp_min(1e-12)
    rank = torch.exp(-(p * p.clamp_min(1e-12).log()).sum())
    return torch.where(valid.sum() < 2, torch.full_like(rank, float("nan")), rank)
