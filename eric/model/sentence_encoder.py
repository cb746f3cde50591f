"""The training-only sentence encoder: e_n, the entity-aware event representation.

A separate BART encoder stack (initialized as a copy of the pretrained encoder, with
its own copy of the token embeddings as in the authors' code; `sentence_encoder_embeddings:
shared` reads the model's instead) reads the gold target one unit at a time: attention is
block-diagonal over units and positions restart at each unit. e_n is
normalize(Linear(h at the position of p_n)), D-dimensional.

Two savings keep it cheap, neither changes e_n:
- only units that carry an entity are encoded, packed next-fit into rows (units of
  different texts may share a row, the block-diagonal mask keeps them apart);
- the last layer runs only at the positions e_n is read from (its keys and values
  still come from the whole unit).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers.models.bart.modeling_bart import (
    BartEncoderLayer,
    BartLearnedPositionalEmbedding,
    BartScaledWordEmbedding,
)

from eric.model.config import EricConfig

MIN_ROW = 128  # packed row length (longer if a unit is longer)


@dataclass
class PackedUnits:
    token_ids: torch.Tensor  # [R, C] packed tokens
    unit_ids: torch.Tensor  # [R, C] packed unit index (-1 = padding)
    positions: torch.Tensor  # [R, C] position inside the unit
    query_rows: torch.Tensor  # [R, Q] packed column of each query of the row
    query_valid: torch.Tensor  # [R, Q] bool
    query_slot: torch.Tensor  # [M] (row * Q + slot) of each valid query, in input order
    query_found: torch.Tensor  # [B, K] bool: the query position lies in an encoded unit


def pack_units(
    ids: torch.Tensor, sent_id: int, unit_needed: torch.Tensor, in_unit: torch.Tensor, queries: torch.Tensor
) -> PackedUnits:
    """Pack the needed units of a batch next-fit into rows; locate the query positions.

    ids [B, T]; unit_needed [B, N+1] (column n = unit n); in_unit [B, T] bool marks the
    tokens that belong to a unit (not <s>, </s>, padding); queries [B, K] positions (-1 = none).
    """
    batch, length = ids.shape
    device = ids.device
    unit = (ids == sent_id).long().cumsum(1)  # 1-based unit number; 0 before the first <sent>
    columns = unit_needed.shape[1]
    member = in_unit & (unit > 0) & (unit < columns)
    unit_col = torch.where(member, unit, torch.zeros_like(unit))
    sizes = torch.zeros(batch, columns, dtype=torch.long, device=device)
    sizes.scatter_add_(1, unit_col, member.long())
    sizes[:, 0] = 0
    sizes = torch.where(unit_needed, sizes, torch.zeros_like(sizes))
    starts = torch.full((batch, columns), length, dtype=torch.long, device=device)
    positions = torch.arange(length, device=device).expand(batch, length)
    starts.scatter_reduce_(1, unit_col, torch.where(member, positions, length), reduce="amin")

    # next-fit: walk the needed units in batch order (a handful per text; host-side)
    flat = sizes.flatten().nonzero()[:, 0]
    lengths = sizes.flatten()[flat]
    capacity = max(MIN_ROW, int(lengths.max())) if flat.numel() else 1
    rows, offsets, row, used = [], [], 0, 0
    for size in lengths.tolist():
        if used + size > capacity:
            row, used = row + 1, 0
        rows.append(row)
        offsets.append(used)
        used += size
    n_rows = row + 1
    rows_t = torch.tensor(rows, dtype=torch.long, device=device)
    offsets_t = torch.tensor(offsets, dtype=torch.long, device=device)

    # scatter the tokens of every needed unit to (row, offset + i)
    index = torch.arange(flat.numel(), device=device)
    token_unit = torch.repeat_interleave(index, lengths)
    within = torch.arange(token_unit.numel(), device=device) - torch.repeat_interleave(
        lengths.cumsum(0) - lengths, lengths
    )
    src_b = flat[token_unit] // columns
    src_t = starts.flatten()[flat][token_unit] + within
    dst_r, dst_c = rows_t[token_unit], offsets_t[token_unit] + within
    token_ids = torch.full((n_rows, capacity), 0, dtype=torch.long, device=device)
    token_ids[dst_r, dst_c] = ids[src_b, src_t]
    unit_ids = torch.full((n_rows, capacity), -1, dtype=torch.long, device=device)
    unit_ids[dst_r, dst_c] = token_unit
    packed_positions = torch.zeros((n_rows, capacity), dtype=torch.long, device=device)
    packed_positions[dst_r, dst_c] = within

    # queries: their unit's packed slot, then grouped by row
    slot_of = torch.full((batch * columns,), -1, dtype=torch.long, device=device)
    slot_of[flat] = index
    q_pos = queries.clamp(min=0)
    q_unit = unit.gather(1, q_pos).clamp(max=columns - 1)
    q_index = slot_of.view(batch, columns).gather(1, q_unit)
    found = (queries >= 0) & (q_index >= 0) & member.gather(1, q_pos)
    q_index = q_index[found]
    q_row = rows_t[q_index]
    q_col = offsets_t[q_index] + (queries[found] - starts.flatten()[flat][q_index])
    order = torch.argsort(q_row, stable=True)
    per_row = torch.bincount(q_row, minlength=n_rows)
    width = max(int(per_row.max()), 1) if q_row.numel() else 1
    rank = torch.arange(q_row.numel(), device=device) - (per_row.cumsum(0) - per_row)[q_row[order]]
    query_rows = torch.zeros((n_rows, width), dtype=torch.long, device=device)
    query_valid = torch.zeros((n_rows, width), dtype=torch.bool, device=device)
    query_rows[q_row[order], rank] = q_col[order]
    query_valid[q_row[order], rank] = True
    query_slot = torch.empty_like(q_row)
    query_slot[order] = q_row[order] * width + rank
    return PackedUnits(token_ids, unit_ids, packed_positions, query_rows, query_valid, query_slot, found)


class SentenceEncoder(nn.Module):
    def __init__(self, config: EricConfig):
        super().__init__()
        self.config = config
        self.dropout = config.dropout
        self.embed_tokens = None  # own token embeddings (a copy of the model's), or the model's
        if config.sentence_encoder_embeddings == "own":
            scale = config.d_model**0.5 if config.scale_embedding else 1.0
            self.embed_tokens = BartScaledWordEmbedding(config.vocab_size, config.d_model, config.pad_token_id, scale)
        self.embed_positions = BartLearnedPositionalEmbedding(config.max_position_embeddings, config.d_model)
        self.layers = nn.ModuleList([BartEncoderLayer(config, layer_idx=i) for i in range(config.encoder_layers)])
        self.layernorm_embedding = nn.LayerNorm(config.d_model)
        self.event_proj = nn.Linear(config.d_model, config.state_dim)
        # remedy (docs/state-space.md): centre and scale e_n over the batch before normalizing, so a
        # direction every unit shares (what L_LM pulls them along) cannot take over
        self.event_norm = nn.BatchNorm1d(config.state_dim, affine=False) if config.event_norm == "batch" else None

    def forward(
        self,
        labels: torch.Tensor,
        embed_tokens: nn.Module,
        unit_needed: torch.Tensor,
        query_positions: torch.Tensor,
    ) -> torch.Tensor:
        """e at label positions `query_positions` [B, K] (normalized, [B, K, D]; zero where < 0).

        labels [B, T] (the gold target, -100 = padding); unit_needed [B, N+1] bool says
        which units (column n = unit n; column 0 unused) to encode.
        """
        config = self.config
        ids = labels.masked_fill(labels < 0, config.pad_token_id)
        in_unit = (labels >= 0) & ~torch.isin(ids, ids.new_tensor([config.eos_token_id, config.bos_token_id]))
        packed = pack_units(ids, config.sent_token_id, unit_needed, in_unit, query_positions)
        out = torch.zeros(*query_positions.shape, config.state_dim, device=labels.device)
        if not bool(packed.query_found.any()):
            return out

        hidden = embed_tokens(packed.token_ids)
        hidden = hidden + self.embed_positions(None, position_ids=packed.positions)[0]  # restarted positions
        hidden = F.dropout(self.layernorm_embedding(hidden), p=self.dropout, training=self.training)
        same_unit = (packed.unit_ids[:, :, None] == packed.unit_ids[:, None, :]) & (packed.unit_ids[:, None, :] >= 0)
        for layer in self.layers[:-1]:
            hidden = layer(hidden, _additive(same_unit, hidden.dtype))
        picked = self._last_layer_at_queries(hidden, same_unit, packed)

        projected = self.event_proj(picked)
        if self.event_norm is not None:
            valid = packed.query_valid
            projected = projected.clone()
            projected[valid] = _float_batch_norm(self.event_norm, projected[valid]).to(projected.dtype)
        events = F.normalize(projected, dim=-1)
        out = out.to(events.dtype)
        out[packed.query_found] = events.flatten(0, 1)[packed.query_slot]
        return out

    def _last_layer_at_queries(self, hidden, same_unit, packed) -> torch.Tensor:
        """The last encoder layer, evaluated only at the query positions ([R, Q, d])."""
        layer = self.layers[-1]
        rows = packed.query_rows
        queries = hidden.gather(1, rows[..., None].expand(-1, -1, hidden.shape[-1]))
        mask = same_unit.gather(1, rows[..., None].expand(-1, -1, same_unit.shape[-1]))
        update, _ = layer.self_attn(queries, key_value_states=hidden, attention_mask=_additive(mask, hidden.dtype))
        out = layer.self_attn_layer_norm(queries + F.dropout(update, p=layer.dropout, training=self.training))
        residual = out
        out = layer.activation_fn(layer.fc1(out))
        out = F.dropout(out, p=layer.activation_dropout, training=self.training)
        out = F.dropout(layer.fc2(out), p=layer.dropout, training=self.training)
        return layer.final_layer_norm(residual + out)


def _float_batch_norm(norm: nn.BatchNorm1d, x: torch.Tensor) -> torch.Tensor:
    """The batch norm in float32, also when the module was cast to bf16 (DeepSpeed's bf16 mode
    casts every buffer, and batch_norm refuses float input with bf16 statistics). A training
    batch with fewer than two events has no statistics of its own (a small micro-batch with
    short length limits): it is normalized with the running ones, as at evaluation."""
    if norm.training and x.shape[0] < 2:
        return F.batch_norm(x.float(), norm.running_mean.float(), norm.running_var.float(), training=False, eps=norm.eps)
    if norm.running_mean.dtype == torch.float32:
        return norm(x.float())
    mean, var = norm.running_mean.float(), norm.running_var.float()
    out = F.batch_norm(x.float(), mean, var, training=norm.training, momentum=norm.momentum, eps=norm.eps)
    if norm.training:  # what the module would do, kept at the buffers' precision
        with torch.no_grad():
            norm.running_mean.copy_(mean)
            norm.running_var.copy_(var)
            norm.num_batches_tracked.add_(1)
    return out


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[R, Q, C] bool -> [R, 1, Q, C] additive mask."""
    bias = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return bias.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]
