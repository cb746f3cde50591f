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


def entity_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """L_Ent: cross-entropy of the planner over the units in `mask` (zero if none)."""
    if not bool(mask.any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits[mask].float(), targets[mask])


def joint_representation(events: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """c_n = normalize(e_n + s_n): the positive/negative for the contrastive loss."""
    return F.normalize(events + states, dim=-1)


def info_nce(
    anchors: torch.Tensor, positives: torch.Tensor, tau: float, extra_negatives: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """InfoNCE with in-batch negatives: anchor i's positive is positives[i], the others are negatives.

    anchors, positives [M, D] (normalized); extra_negatives [H, D] are negatives for
    every anchor (the authors' hard negatives). `allowed` [M, M + H] bool, if given, limits
    each anchor's candidates (e.g. to its own text); the diagonal must be allowed. Zero when M = 0.
    """
    if anchors.shape[0] == 0:
        return anchors.sum() * 0.0 + positives.sum() * 0.0
    candidates = positives if extra_negatives is None else torch.cat([positives, extra_negatives], dim=0)
    logits = anchors.float() @ candidates.float().t() / tau
    if allowed is not None:
        logits = logits.masked_fill(~allowed, torch.finfo(logits.dtype).min)
    return F.cross_entropy(logits, torch.arange(anchors.shape[0], device=anchors.device))


def same_text_candidates(anchor_rows: torch.Tensor, candidate_rows: torch.Tensor) -> torch.Tensor:
    """[M, C] bool: candidate j comes from the same text (batch row) as anchor i."""
    return anchor_rows[:, None] == candidate_rows[None, :]


def event_spread(events: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(mean pairwise cosine, effective rank) of unit vectors [M, D]; None for M < 2.

    Effective rank = exp(entropy of the normalized singular values) (Roy & Vetterli 2007):
    1 when every vector is the same, D when they fill the space evenly."""
    if events.shape[0] < 2:
        return None
    events = events.float()
    m = events.shape[0]
    gram = events @ events.t()
    mean_cosine = (gram.sum() - gram.diagonal().sum()) / (m * (m - 1))
    singular = torch.linalg.svdvals(events)
    p = singular / singular.sum().clamp_min(1e-12)
    rank = torch.exp(-(p * p.clamp_min(1e-12).log()).sum())
    return mean_cosine, rank
