"""Where the units sit in a decoder input, and per-unit pooling.

A decoder input looks like `</s> <s> <sent> w w w <sent> w w ... <pad>`. Unit n
(n = 1..N) runs from the n-th sentence token up to the next one; the positions
before the first sentence token form unit 0, the prefix. The planner predicts p_n
from q_{n-1}, the mean of the last decoder layer over unit n-1, so unit 1 is
planned from the prefix, exactly as at generation time.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from eric.model.state_attention import StateKeys


@dataclass
class UnitLayout:
    is_sent: torch.Tensor  # [B, T] bool: sentence-token positions
    valid: torch.Tensor  # [B, T] bool: not padding
    unit_of_position: torch.Tensor  # [B, T] long: 0 = prefix, n = unit n
    sent_positions: torch.Tensor  # [B, N] long: position of the n-th sentence token (0 if none)
    unit_exists: torch.Tensor  # [B, N] bool

    @classmethod
    def from_ids(cls, ids: torch.Tensor, sent_id: int, pad_id: int, num_units: int | None = None) -> UnitLayout:
        valid = ids != pad_id
        is_sent = (ids == sent_id) & valid
        unit = is_sent.long().cumsum(1)
        counts = is_sent.sum(1)
        if num_units is None:
            n = int(counts.max())
        else:  # the collator's unit count: checked without waiting for the device (no host sync)
            n = num_units
            torch._assert_async((counts <= n).all(), "a decoder input has more sentence tokens than units were given")
        batch, length = ids.shape
        # The n-th sentence token writes its position into column n-1; others go to a spill column.
        column = torch.where(is_sent, unit - 1, torch.full_like(unit, n))
        positions = torch.arange(length, device=ids.device).expand(batch, length)
        sent_positions = ids.new_zeros(batch, n + 1).scatter_(1, column, positions)[:, :n]
        unit_exists = torch.arange(n, device=ids.device)[None, :] < counts[:, None]
        return cls(is_sent, valid, unit, sent_positions, unit_exists)

    @property
    def num_units(self) -> int:
        return self.sent_positions.shape[1]

    def previous_unit_means(self, hidden: torch.Tensor) -> torch.Tensor:
        """q_{n-1} for n = 1..N: mean hidden state over unit n-1 (unit 0 = prefix). [B, N, d]"""
        batch, _, dim = hidden.shape
        n = self.num_units
        index = torch.where(self.valid, self.unit_of_position, torch.full_like(self.unit_of_position, n + 1))
        # float32 sums: bf16 cannot count past 256 exactly
        sums = torch.zeros(batch, n + 2, dim, device=hidden.device)
        sums.scatter_add_(1, index[..., None].expand(-1, -1, dim), hidden.float())
        counts = torch.zeros(batch, n + 2, device=hidden.device)
        counts.scatter_add_(1, index, torch.ones_like(index, dtype=counts.dtype))
        return (sums[:, :n] / counts[:, :n, None].clamp(min=1)).to(hidden.dtype)

    def keys_before_units(self) -> torch.Tensor:
        """[B, N, T] bool: position t precedes the n-th sentence token (and is not padding)."""
        length = self.valid.shape[1]
        positions = torch.arange(length, device=self.valid.device)
        return (positions[None, None, :] < self.sent_positions[:, :, None]) & self.valid[:, None, :]

    def state_keys(self) -> StateKeys:
        """The state attention's key slots: the sentence tokens, one slot per unit (static shape)."""
        return StateKeys(self.sent_positions, self.sent_positions, self.unit_exists)

    def scatter_to_positions(self, per_unit: torch.Tensor) -> torch.Tensor:
        """Place per-unit vectors [B, N, d] at their sentence-token positions of a [B, T, d] zero tensor."""
        batch, length = self.valid.shape
        dim = per_unit.shape[-1]
        per_unit = per_unit * self.unit_exists[..., None].to(per_unit.dtype)
        out = per_unit.new_zeros(batch, length, dim)
        return out.scatter_add_(1, self.sent_positions[..., None].expand(-1, -1, dim), per_unit)
