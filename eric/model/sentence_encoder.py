"""The training-only sentence encoder: e_n, the entity-aware event representation.

A separate BART encoder stack (initialized as a copy of the pretrained encoder, with
its own copy of the token embeddings as in the authors' code; `sentence_encoder_embeddings:
shared` reads the model's instead) reads the gold target one unit at a time: attention is
block-diagonal over units and positions restart at each unit. e_n is
normalize(Linear(h at the position of p_n)), D-dimensional.

With `event_target: anonymous` the encoder never sees which placeholder it reads: every
placeholder token enters as one learned marker, and the one e_n is read at as another (the
`markers` rows 1 and 0). c_n then cannot be matched by the identity of p_n (which the
predictor's query carries: docs/state-predictor.md), only by what happens to it.

Every shape follows the batch's shape, never its values: the target is encoded in place
([B, T], units kept apart by the mask), so the forward needs no host sync and compiles as
one graph (`train.compile`). The last layer runs only at the positions e_n is read from
(its keys and values still come from the whole unit).
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


@dataclass
class UnitRows:
    """Where each target token sits: its unit and its position inside it."""

    unit_ids: torch.Tensor  # [B, T] unit number (1-based; -1 = not in a unit)
    positions: torch.Tensor  # [B, T] position inside the unit (0 at its sentence token)
    same_unit: torch.Tensor  # [B, T, T] bool: key t' is in the unit of query t
    query_found: torch.Tensor  # [B, K] bool: the query lies in a unit that is needed

    @classmethod
    def locate(cls, ids: torch.Tensor, sent_id: int, unit_needed: torch.Tensor, in_unit: torch.Tensor,
               queries: torch.Tensor) -> UnitRows:
        """ids [B, T]; unit_needed [B, N+1] (column n = unit n); in_unit [B, T] marks the tokens
        of a unit (not <s>, </s>, padding); queries [B, K] positions (-1 = none)."""
        is_sent = ids == sent_id
        unit = is_sent.long().cumsum(1)  # 0 before the first <sent>
        member = in_unit & (unit > 0) & (unit < unit_needed.shape[1])
        unit_ids = torch.where(member, unit, -1)
        steps = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        start = torch.where(is_sent, steps, 0).cummax(1).values  # the unit's <sent>
        positions = torch.where(member, steps - start, 0)
        same_unit = (unit_ids[:, :, None] == unit_ids[:, None, :]) & (unit_ids[:, None, :] >= 0)
        at = queries.clamp(min=0)
        needed = unit_needed.gather(1, unit.gather(1, at).clamp(max=unit_needed.shape[1] - 1))
        found = (queries >= 0) & member.gather(1, at) & needed
        return cls(unit_ids, positions, same_unit, found)


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
        self.markers = None  # [focal, other entity] input vectors in place of the placeholders
        if config.event_target == "anonymous":
            self.markers = nn.Embedding(2, config.d_model)
            self.register_buffer("entity_tokens", self.entity_table(config), persistent=False)

    @staticmethod
    def entity_table(config: EricConfig) -> torch.Tensor:
        return torch.tensor(config.entity_token_ids or [], dtype=torch.long)

    def forward(
        self,
        labels: torch.Tensor,
        embed_tokens: nn.Module,
        unit_needed: torch.Tensor,
        query_positions: torch.Tensor,
        focal: int | None = None,
    ) -> torch.Tensor:
        """e at label positions `query_positions` [B, K] (normalized, [B, K, D]; zero where < 0).

        labels [B, T] (the gold target, -100 = padding); unit_needed [B, N+1] bool says
        which units (column n = unit n; column 0 unused) to encode. With markers, the first
        `focal` query columns (all if None) are the focal placeholders (the anchors' p_n).
        """
        config = self.config
        ids = labels.masked_fill(labels < 0, config.pad_token_id)
        in_unit = (labels >= 0) & ~torch.isin(ids, ids.new_tensor([config.eos_token_id, config.bos_token_id]))
        rows = UnitRows.locate(ids, config.sent_token_id, unit_needed, in_unit, query_positions)

        hidden = embed_tokens(ids)
        if self.markers is not None:
            hidden = self._anonymized(hidden, ids, query_positions[:, :focal])
        hidden = hidden + self.embed_positions(None, position_ids=rows.positions)[0]  # restarted positions
        hidden = F.dropout(self.layernorm_embedding(hidden), p=self.dropout, training=self.training)
        mask = _additive(rows.same_unit, hidden.dtype)  # once, for every layer but the last
        for layer in self.layers[:-1]:
            hidden = layer(hidden, mask)
        picked = self._last_layer_at_queries(hidden, rows.same_unit, query_positions.clamp(min=0))

        projected = self.event_proj(picked)
        if self.event_norm is not None:
            projected = masked_batch_norm(self.event_norm, projected, rows.query_found).to(projected.dtype)
        events = F.normalize(projected, dim=-1)
        return events * rows.query_found[..., None].to(events.dtype)

    def _anonymized(self, hidden: torch.Tensor, ids: torch.Tensor, focal_positions: torch.Tensor) -> torch.Tensor:
        """Every placeholder's input vector -> markers[1], those at `focal_positions` [B, F] -> markers[0]."""
        found = (focal_positions >= 0).long()
        focal = torch.zeros_like(ids).scatter_reduce(1, focal_positions.clamp(min=0), found, "amax") > 0
        is_entity = torch.isin(ids, self.entity_tokens)
        # through the module's forward, so that a sharded weight (ZeRO-3) is gathered
        focal_vec, other_vec = self.markers(torch.arange(2, device=ids.device)).to(hidden.dtype)
        hidden = torch.where(is_entity[..., None], other_vec, hidden)
        return torch.where(focal[..., None], focal_vec, hidden)

    def _last_layer_at_queries(self, hidden, same_unit, at) -> torch.Tensor:
        """The last encoder layer, evaluated only at the query positions `at` [B, K] ([B, K, d])."""
        layer = self.layers[-1]
        queries = hidden.gather(1, at[..., None].expand(-1, -1, hidden.shape[-1]))
        mask = same_unit.gather(1, at[..., None].expand(-1, -1, same_unit.shape[-1]))
        update, _ = layer.self_attn(queries, key_value_states=hidden, attention_mask=_additive(mask, hidden.dtype))
        out = layer.self_attn_layer_norm(queries + F.dropout(update, p=layer.dropout, training=self.training))
        residual = out
        out = layer.activation_fn(layer.fc1(out))
        out = F.dropout(out, p=layer.activation_dropout, training=self.training)
        out = F.dropout(layer.fc2(out), p=layer.dropout, training=self.training)
        return layer.final_layer_norm(residual + out)


def masked_batch_norm(norm: nn.BatchNorm1d, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`norm` over the vectors of x [..., D] where `mask`, in float32 (also when DeepSpeed's bf16
    mode cast the buffers), with static shapes: the statistics are masked sums, not a gather. A
    training batch with fewer than two vectors has no statistics of its own (a small micro-batch
    with short length limits): it is normalized with the running ones, as at evaluation."""
    x, weight = x.float(), mask[..., None].float()
    running_mean, running_var = norm.running_mean.float(), norm.running_var.float()
    if not norm.training:
        return (x - running_mean) / torch.sqrt(running_var + norm.eps)
    dims = tuple(range(x.dim() - 1))
    count = weight.sum()
    mean = (x * weight).sum(dims) / count.clamp(min=1)
    var = ((x - mean) ** 2 * weight).sum(dims) / count.clamp(min=1)
    enough = count >= 2
    mean, var_used = torch.where(enough, mean, running_mean), torch.where(enough, var, running_var)
    with torch.no_grad():  # what nn.BatchNorm1d does to its buffers (unbiased variance), if it had a batch
        m = norm.momentum
        unbiased = var * count / (count - 1).clamp(min=1)
        norm.running_mean.copy_(torch.where(enough, (1 - m) * running_mean + m * mean, running_mean))
        norm.running_var.copy_(torch.where(enough, (1 - m) * running_var + m * unbiased, running_var))
        norm.num_batches_tracked.add_(enough.long())
    return (x - mean) / torch.sqrt(var_used + norm.eps)


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[B, Q, T] bool -> [B, 1, Q, T] additive mask."""
    bias = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return bias.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]
