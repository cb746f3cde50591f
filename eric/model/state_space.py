"""The discrete entity state space D: K unit vectors of dimension D.

`StateSpace(e)` quantizes normalized vectors to their nearest state (highest cosine;
the paper's "argmin" is a typo) and returns a `Quantized` with:

    states          the state vectors d_k (normalized codebook rows). Gradient flows
                    to the CODEBOOK only from here: the paper's c_n = normalize(e_n +
                    s_n) uses them, so the codebook learns through L_CL alone.
    straight_through
                    value d_k, gradient copied to e (Bengio et al. 2013): what the
                    decoder reads, so L_LM trains the sentence encoder but not the
                    codebook.
    indices         k per vector.

Usage counts accumulate in the `usage_counts` buffer while training (state-space
utilization, paper appendix), and can be reset with `reset_usage()`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class Quantized:
    states: torch.Tensor
    straight_through: torch.Tensor
    indices: torch.Tensor


class StateSpace(nn.Module):
    def __init__(self, num_states: int, state_dim: int):
        super().__init__()
        self.codebook = nn.Parameter(torch.randn(num_states, state_dim))
        self.register_buffer("usage_counts", torch.zeros(num_states, dtype=torch.long))

    @property
    def vectors(self) -> torch.Tensor:
        """The K state vectors on the unit sphere."""
        return F.normalize(self.codebook, dim=-1)

    def nearest(self, e: torch.Tensor) -> torch.Tensor:
        """Index of the state with the highest cosine to each (normalized) vector."""
        with torch.no_grad():
            return (e.float() @ self.vectors.float().t()).argmax(dim=-1)

    def lookup(self, indices: torch.Tensor) -> torch.Tensor:
        return self.vectors[indices]

    def forward(self, e: torch.Tensor, counted: torch.Tensor | None = None) -> Quantized:
        """Quantize e [..., D]; in training, count the states of the vectors in `counted` (default all)."""
        indices = self.nearest(e)
        states = self.lookup(indices).to(e.dtype)
        straight_through = e + (states - e).detach()
        if self.training:
            used = indices if counted is None else indices[counted]
            self.usage_counts += torch.bincount(used.flatten(), minlength=self.usage_counts.numel())
        return Quantized(states, straight_through, indices)

    def reset_usage(self) -> None:
        self.usage_counts.zero_()
