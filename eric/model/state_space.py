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

    def forward(
        self, e: torch.Tensor | None = None, indices: torch.Tensor | None = None, counted: torch.Tensor | bool = True
    ) -> Quantized:
        """Quantize e [..., D], or look up `indices`. In training, the states of the vectors
        in `counted` (a mask, or all/none) are added to the usage counts.

        Every codebook access goes through here, so that sharded parameters (ZeRO-3)
        are gathered by the module's forward hooks."""
        vectors = F.normalize(self.codebook, dim=-1)
        if indices is None:
            with torch.no_grad():
                indices = (e.detach().float() @ vectors.detach().float().t()).argmax(dim=-1)
        states = vectors[indices]
        if e is None:
            return Quantized(states, states, indices)
        states = states.to(e.dtype)
        straight_through = e + (states - e).detach()
        if self.training and counted is not False:
            used = indices if counted is True else indices[counted]
            self.usage_counts += torch.bincount(used.flatten(), minlength=self.usage_counts.numel())
        return Quantized(states, straight_through, indices)

    def nearest(self, e: torch.Tensor) -> torch.Tensor:
        """Index of the state with the highest cosine to each (normalized) vector; not counted."""
        return self(e, counted=False).indices

    def lookup(self, indices: torch.Tensor) -> torch.Tensor:
        """The (normalized) state vectors of `indices`."""
        return self(indices=indices).states

    def reset_usage(self) -> None:
        self.usage_counts.zero_()
