"""The discrete entity state space D: K unit vectors of dimension D. **Where a state is quantized.**

`StateSpace(e)` quantizes normalized vectors to their nearest state (highest cosine;
the paper's "argmin" is a typo) and returns a `Quantized` with:

    states          the state vectors d_k (normalized codebook rows), for c_n =
                    normalize(e_n + s_n) in L_CL. With `gradient="dense"` (the authors'
                    code) the value is d_k but the gradient reaches EVERY code through the
                    cosines, as `((onehot - cos).detach() + cos) @ C`: dead codes still move.
                    `gradient="selected"` (this project's first version) trains only d_k.
    straight_through
                    value d_k, gradient copied to e (Bengio et al. 2013): what the
                    decoder reads, so L_LM trains the sentence encoder but not the codebook.
    indices         k per vector.
    cosines         [..., K] cosines of e to every state (for the entropy regularizer).

Options beyond the paper (off by default, `docs/state-space.md` says where each comes
from and what it measured):
    ema_decay       the codebook follows an exponential moving average of the event
                    vectors assigned to each code (van den Oord et al. 2017, appendix;
                    Razavi et al. 2019) instead of L_CL's gradient.
Data-dependent initialisation and dead-code replacement need the optimizer (Adam state,
ZeRO master weights), so they live in eric/train/codebook.py; this module supplies the
pieces: `recent_events` (a ring buffer of the latest event vectors seen in training),
`steps_since_used`, `kmeans` and `assign_rows`.

Usage counts accumulate in the `usage_counts` buffer while training (state-space
utilization, paper appendix), and can be reset with `reset_usage()`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from eric.model.losses import masked_mean


@dataclass
class Quantized:
    states: torch.Tensor
    straight_through: torch.Tensor
    indices: torch.Tensor
    cosines: torch.Tensor | None = None


class StateSpace(nn.Module):
    def __init__(
        self,
        num_states: int,
        state_dim: int,
        *,
        init_std: float = 0.02,
        gradient: str = "dense",
        ema_decay: float | None = None,
        recent_events: int = 0,
    ):
        super().__init__()
        if gradient not in ("dense", "selected"):
            raise ValueError(f"gradient must be 'dense' or 'selected', not {gradient!r}")
        self.init_std, self.gradient, self.ema_decay = init_std, gradient, ema_decay
        self.codebook = nn.Parameter(torch.randn(num_states, state_dim) * init_std, requires_grad=ema_decay is None)
        self.register_buffer("usage_counts", torch.zeros(num_states, dtype=torch.long))
        # training-time bookkeeping for the remedies (not saved: a fresh run starts fresh)
        self.register_buffer("steps_since_used", torch.zeros(num_states, dtype=torch.long), persistent=False)
        self.register_buffer("_used_this_step", torch.zeros(num_states, dtype=torch.bool), persistent=False)
        self.register_buffer("recent", torch.zeros(recent_events, state_dim), persistent=False)
        self.register_buffer("recent_filled", torch.zeros((), dtype=torch.long), persistent=False)
        if ema_decay is not None:
            self.register_buffer("ema_sizes", torch.zeros(num_states))
            self.register_buffer("ema_sums", torch.zeros(num_states, state_dim))

    def bookkeeping(self) -> tuple[torch.Tensor, ...]:
        """The training-time buffers that are not saved (zero at the start of a run)."""
        return self.steps_since_used, self._used_this_step, self.recent, self.recent_filled

    @property
    def num_states(self) -> int:
        return self.codebook.shape[0]

    def vectors(self) -> torch.Tensor:
        """The normalized states [K, D]."""
        return F.normalize(self.codebook, dim=-1)

    def forward(
        self, e: torch.Tensor | None = None, indices: torch.Tensor | None = None, counted: torch.Tensor | bool = True,
        indices_only: bool = False,
    ) -> Quantized:
        """Quantize e [..., D], or look up `indices`. In training, the vectors in `counted`
        (a mask, or all/none) are added to the usage counts (and, with EMA, update the codes).
        `indices_only`: the nearest states' ids and vectors (`states`), without the training
        arithmetic (straight_through is None).

        Every codebook access goes through here, so that sharded parameters (ZeRO-3)
        are gathered by the module's forward hooks."""
        vectors = self.vectors()
        if e is None:
            states = vectors[indices]
            return Quantized(states, states, indices)
        if indices_only:
            with torch.no_grad():
                nearest = (e.detach().float() @ vectors.detach().float().t()).argmax(dim=-1)
                return Quantized(vectors.detach()[nearest], None, nearest)
        cosines = e.float() @ vectors.float().t()
        indices = cosines.detach().argmax(dim=-1)
        if self.gradient == "dense":
            # a comparison, not F.one_hot: that one reads the indices' range on the host
            onehot = (indices[..., None] == torch.arange(self.num_states, device=indices.device)).to(cosines.dtype)
            states = ((onehot - cosines).detach() + cosines) @ vectors.float()
        else:
            states = vectors[indices]
        states = states.to(e.dtype)
        straight_through = straight_through_state(e, states)
        if self.training and counted is not False:
            mask = torch.ones_like(indices, dtype=torch.bool) if counted is True else counted
            self.record(e.detach().flatten(0, -2), indices.flatten(), mask.flatten())
        return Quantized(states, straight_through, indices, cosines)

    @torch.no_grad()
    def record(self, events: torch.Tensor, indices: torch.Tensor, mask: torch.Tensor) -> None:
        """Count the vectors [M, D] quantized to `indices` [M] under `mask` [M] as used (masked sums,
        not a gather: static shapes), and update the remedies' bookkeeping. ERIC calls it after its
        forward (`finish_output`), with counted=False here."""
        counts = torch.zeros_like(self.usage_counts).index_add_(0, indices, mask.long())
        self.usage_counts += counts
        self._used_this_step |= counts > 0
        if self.recent.shape[0]:
            self._remember(events.float(), mask)
        if self.ema_decay is not None:
            self._ema_update(events.float() * mask[:, None], indices, counts)

    def _remember(self, events: torch.Tensor, mask: torch.Tensor) -> None:
        """Keep the latest `recent` event vectors under `mask` (a ring buffer, newest last). A
        stable sort moves the c kept vectors to the end in order; slot i of the new buffer is
        slot i + c of the old one, or, past its end, kept vector i + c - size."""
        size, m = self.recent.shape[0], events.shape[0]
        kept = mask.sum()
        order = torch.argsort(mask.to(torch.int8), stable=True)
        joined = torch.cat([self.recent, events[order].to(self.recent.dtype)])  # [size + m]
        slots = torch.arange(size, device=events.device)
        self.recent.copy_(joined[torch.where(slots + kept < size, slots + kept, slots + m)])
        self.recent_filled.copy_((self.recent_filled + kept).clamp(max=size))

    @torch.no_grad()
    def _ema_update(self, events: torch.Tensor, indices: torch.Tensor, counts: torch.Tensor) -> None:
        sums = torch.zeros_like(self.ema_sums).index_add_(0, indices, events.to(self.ema_sums.dtype))
        counts = counts.to(self.ema_sizes.dtype)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(sums)  # every rank applies the same update
            torch.distributed.all_reduce(counts)
        decay = self.ema_decay
        self.ema_sizes.mul_(decay).add_(counts, alpha=1 - decay)
        self.ema_sums.mul_(decay).add_(sums, alpha=1 - decay)
        seen = (self.ema_sizes > 1e-8)[:, None]
        means = self.ema_sums / self.ema_sizes.clamp(min=1e-8)[:, None]
        self.codebook.copy_(torch.where(seen, means.to(self.codebook.dtype), self.codebook))

    def pop_used(self) -> torch.Tensor:
        """The mask of codes used since the last call (this rank), and clear it."""
        used = self._used_this_step.clone()
        self._used_this_step.zero_()
        return used

    def age(self, used: torch.Tensor) -> None:
        """One optimizer step passed: codes in `used` are fresh, the others one step older."""
        self.steps_since_used.add_(1).masked_fill_(used.to(self.steps_since_used.device), 0)

    def recent_events(self) -> torch.Tensor:
        """The event vectors the ring buffer holds, oldest first."""
        return self.recent[self.recent.shape[0] - int(self.recent_filled):]

    @torch.no_grad()
    def assign_rows(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """Set the codebook rows where the mask `rows` [K] is set to `values` [K, D], in place
        (module tensors only: eric/train/codebook.py also updates the optimizer's master weights
        and state), and restart their bookkeeping."""
        rows = rows.to(self.codebook.device)
        values = values.to(self.codebook.device)
        self.codebook.data.copy_(torch.where(rows[:, None], values.to(self.codebook.dtype), self.codebook.data))
        self.steps_since_used.masked_fill_(rows, 0)
        if self.ema_decay is not None:
            self.ema_sizes.copy_(torch.where(rows, 1.0, self.ema_sizes))
            self.ema_sums.copy_(torch.where(rows[:, None], values.to(self.ema_sums.dtype), self.ema_sums))

    def nearest(self, e: torch.Tensor) -> torch.Tensor:
        """Index of the state with the highest cosine to each (normalized) vector; not counted."""
        return self(e, counted=False, indices_only=True).indices

    def nearest_states(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, vectors) of the nearest states in one codebook access: lookup(nearest(e)) (generation)."""
        q = self(e, counted=False, indices_only=True)
        return q.indices, q.states

    def lookup(self, indices: torch.Tensor) -> torch.Tensor:
        """The (normalized) state vectors of `indices`."""
        return self(indices=indices).states

    def reset_usage(self) -> None:
        self.usage_counts.zero_()


def straight_through_state(e: torch.Tensor, states: torch.Tensor, carries_gradient: bool = True) -> torch.Tensor:
    """The state the decoder reads: the value of `states`; its gradient is copied to `e`
    (Bengio et al. 2013) when `carries_gradient`, else it stops here (event_gradient lm/none)."""
    if not carries_gradient:
        return states.detach()
    return e + (states - e).detach()


def usage_perplexity(counts: torch.Tensor) -> float:
    """exp(entropy) of a usage histogram: the number of equally used states it is worth."""
    total = counts.sum()
    if total <= 0:
        return 0.0
    p = counts.double() / total
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def usage_entropy_penalty(cosines: torch.Tensor, tau: float, mask: torch.Tensor | None = None) -> torch.Tensor:
    """log K - H(mean_n softmax(cos_n / tau)) over the cosines [..., K] under `mask` (all if
    None): zero when the batch's soft assignments use every state equally (DiscoDVT's entropy
    penalization of the averaged posterior)."""
    soft = torch.softmax(cosines.float() / tau, dim=-1).flatten(0, -2)
    mean = masked_mean(soft, torch.ones_like(soft[:, 0], dtype=torch.bool) if mask is None else mask.flatten())
    entropy = -(mean * mean.clamp_min(1e-12).log()).sum()
    return torch.log(torch.tensor(float(cosines.shape[-1]), device=cosines.device)) - entropy


def kmeans(vectors: torch.Tensor, k: int, iterations: int = 10, generator: torch.Generator | None = None) -> torch.Tensor:
    """Spherical k-means: k unit centroids of the unit vectors [M, D] (cosine assignment).
    With fewer vectors than k, the extra centroids are random vectors from the data plus noise."""
    vectors = F.normalize(vectors.float(), dim=-1)
    m = vectors.shape[0]
    picks = torch.randperm(m, generator=generator)[:k] if m >= k else torch.randint(m, (k,), generator=generator)
    centroids = vectors[picks].clone()
    if m < k:
        noise = torch.randn(centroids.shape, generator=generator) * 0.1
        centroids = F.normalize(centroids + noise, dim=-1)
    for _ in range(iterations):
        assign = (vectors @ centroids.t()).argmax(dim=-1)
        sums = torch.zeros_like(centroids).index_add_(0, assign, vectors)
        filled = torch.bincount(assign, minlength=k) > 0
        centroids[filled] = F.normalize(sums[filled], dim=-1)
    return centroids
