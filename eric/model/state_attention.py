"""The entity state attention layer (paper section "Entity State Attention Layer").

In every decoder block, between self-attention and cross-attention, each position
attends to the layer-normalized self-attention outputs at the sentence-token
positions at or before it (where the entity input E(p_n) + s_n entered). A
position with no such key (the prefix) gets zero. The layer is narrow: queries,
keys and values live in the state dimension D (the authors' code: one head of
D = 128), so at bart-base size the whole model gains only about 3% parameters.

Keys are gathered at sentence-token positions only (a handful per text), so the
layer costs two D-wide projections per token. With a cache (generation), each
decoding step adds keys only when some row reads a sentence token, each row's to its
own next slot (row-compact, like the gathered keys of a whole sequence), and the cache
holds them folded into d_model: q.k = h.(Wq^T k) + bq.k and Wo(sum a v) = sum a (Wo v)
(the weights sum to 1), so a decoding step runs no query or output projection, only the
attention over its row's few slots (equal to the unfolded layer to float rounding).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class StateKeys:
    """Which positions of the current chunk provide state-attention keys."""

    index: torch.Tensor  # [B, S] long: positions in the chunk
    positions: torch.Tensor  # [B, S] long: absolute positions
    valid: torch.Tensor  # [B, S] bool

    @classmethod
    def from_sentence_mask(cls, is_sent: torch.Tensor, past_length: int = 0,
                           any_sent: bool | None = None) -> StateKeys | None:
        """Gather the sentence-token positions of a chunk; None when it has none. `any_sent`:
        whether a one-token step has any (the caller knows it: saves a host sync a step)."""
        if is_sent.shape[1] == 1:  # a decoding step: one slot, valid where the row reads <sent>
            if not (bool(is_sent.any()) if any_sent is None else any_sent):
                return None
            index = torch.zeros_like(is_sent, dtype=torch.long)
            return cls(index, index + past_length, is_sent)
        counts = is_sent.sum(1)
        slots = int(counts.max()) if is_sent.numel() else 0
        if slots == 0:
            return None
        # a stable sort puts each row's sentence positions first, in order
        order = torch.sort((~is_sent).to(torch.int8), dim=1, stable=True).indices[:, :slots]
        valid = torch.arange(slots, device=is_sent.device)[None, :] < counts[:, None]
        return cls(order, order + past_length, valid)


def fit(buffer: torch.Tensor | None, needed: int, like: torch.Tensor, spare: bool = True) -> torch.Tensor:
    """`buffer` (shaped like `like` but for dim 1) with room for `needed` slots along dim 1,
    contents kept; when it must grow: to max(16, 2 * needed) (amortized), or exactly `needed`
    without `spare`; new slots zero."""
    if buffer is not None and buffer.shape[1] >= needed:
        return buffer
    grown = like.new_zeros(like.shape[0], max(16, 2 * needed) if spare else needed, *like.shape[2:])
    if buffer is not None:
        grown[:, : buffer.shape[1]] = buffer
    return grown


class StateAttentionCache:
    """Per-layer state-attention keys/values of the positions decoded so far (generation).

    Row-compact: row b's keys fill slots 0 .. counts[b] - 1 in the order of its sentence
    tokens, so a step attends over max(counts) slots (the units of the longest row), not
    over every step at which some row of the batch read a sentence token. Rows without a
    new key write into their first free slot, which stays masked until a key overwrites it.
    Each layer keeps one entry per slot, [keys H * d | values H * d | key biases H], folded
    with its own query and output projections by one linear map (`StateAttention.fold_map`,
    built once per cache, i.e. per `generate` call).
    """

    def __init__(self, num_layers: int):
        self.entries: list[torch.Tensor | None] = [None] * num_layers  # [B, capacity, 2 H d + H]
        self.fold_maps: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * num_layers  # (weight, bias)
        self.step_masks: list[tuple | None] = [None] * num_layers  # per layer: (visibility, a step's inputs)
        self.positions: torch.Tensor | None = None  # [B, capacity] absolute positions
        self.counts: torch.Tensor | None = None  # [B] keys per row
        self.slots = 0  # max(counts)
        self.uniform = True  # every row holds `slots` keys (no visibility mask needed)
        self.dest: torch.Tensor | None = None  # [B, S] slots of the current chunk's new keys
        self.step_visibility: tuple | None = None  # (bias, has_key) of a one-token step, until keys are added

    def add_slots(self, new: StateKeys | None) -> None:
        if new is None:
            return
        batch, width = new.positions.shape
        if self.counts is None:
            self.counts = torch.zeros(batch, dtype=torch.long, device=new.positions.device)
        self.dest = self.counts[:, None] + torch.arange(width, device=self.counts.device)
        self.positions = fit(self.positions, self.slots + width, new.positions)  # the furthest slot written, + 1
        self.positions.scatter_(1, self.dest, new.positions)
        self.counts += new.valid.sum(1)
        low, high = self.counts.aminmax()
        self.slots, self.uniform = int(high), bool(low == high)
        self.step_visibility = None
        self.step_masks = [None] * len(self.step_masks)

    def update(self, layer_idx: int, new: torch.Tensor) -> None:
        """Write a layer's new folded entries [B, S, E] at the slots `add_slots` gave them."""
        entries = fit(self.entries[layer_idx], self.positions.shape[1], new, spare=False)
        entries.scatter_(1, self.dest[..., None].expand_as(new), new)
        self.entries[layer_idx] = entries
        self.step_masks[layer_idx] = None

    def attention_inputs(self, layer_idx: int, heads: int, visibility: torch.Tensor | None, length: int):
        """(keys^T, values, additive mask) of a layer over its `slots` slots, for `length` queries:
        [B, d, S], [B, S, d], [B, T, S] with one head, else [B, H, d, S], [B, H, S, d], [B, H, T, S]
        (views of the entries). A one-token step's are kept until keys are added (for the same
        visibility bias)."""
        kept = self.step_masks[layer_idx] if length == 1 else None
        if kept is not None and kept[0] is visibility:
            return kept[1]
        inputs = folded_attention_inputs(self.entries[layer_idx][:, : self.slots], heads, visibility, length)
        if length == 1:
            self.step_masks[layer_idx] = (visibility, inputs)
        return inputs

    def step_inputs(self, dtype: torch.dtype) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(bias, has_key) of a one-token step: every row sees all of its keys; no mask when
        all rows hold as many (bias None), none needed before a row's first key (has_key)."""
        if self.step_visibility is None:
            slots = torch.arange(self.slots, device=self.counts.device)
            visible = slots[None, :] < self.counts[:, None]
            self.step_visibility = (None if self.uniform else bias_mask(visible[:, None], dtype),
                                    None if bool(self.counts.all()) else (self.counts > 0)[:, None, None])
        return self.step_visibility

    def chunk_inputs(self, past_length: int, length: int, dtype: torch.dtype):
        """(bias, has_key) of a chunk of `length` queries starting at `past_length`."""
        valid = torch.arange(self.slots, device=self.counts.device)[None, :] < self.counts[:, None]
        return _visibility(self.positions[:, : self.slots], valid, past_length, length, dtype)


def folded_attention_inputs(entries: torch.Tensor, heads: int, visibility: torch.Tensor | None, length: int):
    """Folded entries [B, S, 2 H d + H] -> (keys^T, values, additive mask) for `length` queries:
    [B, d, S], [B, S, d], [B, T, S] with one head, else [B, H, d, S], [B, H, S, d], [B, H, T, S]
    (views of the entries); `visibility` [B, 1, T or 1, S] is added to the key biases."""
    batch, slots, width = entries.shape
    d = (width - heads) // (2 * heads)
    keys, values, key_bias = entries.split([heads * d, heads * d, heads], dim=-1)
    if heads == 1:
        keys_t, mask = keys.transpose(1, 2), key_bias.transpose(1, 2)  # mask [B, 1, S]
    else:
        keys_t = keys.view(batch, slots, heads, d).permute(0, 2, 3, 1)
        values = values.view(batch, slots, heads, d).transpose(1, 2)
        mask = key_bias.permute(0, 2, 1)[:, :, None, :]  # [B, H, 1, S]
    if visibility is not None:  # [B, 1, T, S]
        mask = mask + (visibility[:, 0] if heads == 1 else visibility)
    return keys_t, values, mask.expand(*mask.shape[:-2], length, slots)


@dataclass
class StateAttentionInputs:
    """What every layer's state attention shares in one forward: new key slots and visibility."""

    new_keys: StateKeys | None
    bias: torch.Tensor | None  # [B, 1, T, S] additive mask (None: every query sees every key)
    has_key: torch.Tensor | None  # [B, T, 1]: the query sees at least one key (None: all do)
    cache: StateAttentionCache | None = None
    active: bool = False  # some key exists (else the layer outputs zeros)

    @classmethod
    def build(
        cls, is_sent: torch.Tensor, past_length: int, dtype: torch.dtype, cache: StateAttentionCache | None = None,
        any_sent: bool | None = None, keys: StateKeys | None = None,
    ) -> StateAttentionInputs:
        """is_sent [B, T] of the current chunk, which starts at absolute position past_length.
        `keys`: the key slots, when the caller knows them (training: one per unit, the unit
        layout's), so no shape or branch depends on the data."""
        if keys is not None and cache is None:
            bias, has_key = _visibility(keys.positions, keys.valid, past_length, is_sent.shape[1], dtype, static=True)
            return cls(keys, bias, has_key, None, True)
        new_keys = StateKeys.from_sentence_mask(is_sent, past_length, any_sent)
        if cache is None:
            if new_keys is None:
                return cls(None, None, None)
            bias, has_key = _visibility(new_keys.positions, new_keys.valid, past_length, is_sent.shape[1], dtype)
            return cls(new_keys, bias, has_key, None, True)
        cache.add_slots(new_keys)
        if cache.counts is None:
            return cls(new_keys, None, None, cache)
        if is_sent.shape[1] > 1:
            return cls(new_keys, *cache.chunk_inputs(past_length, is_sent.shape[1], dtype), cache, True)
        # a decoding step sees every key of its row: the mask changes only when keys are added
        return cls(new_keys, *cache.step_inputs(dtype), cache, True)


def _visibility(positions, valid, past_length: int, length: int, dtype: torch.dtype, static: bool = False):
    """Key slot s is visible from query t if it is a real key at or before t: (bias, has_key);
    has_key is None when every query sees a key, unless `static` (no host read of the data)."""
    query_positions = torch.arange(past_length, past_length + length, device=positions.device)
    visible = valid[:, None, :] & (positions[:, None, :] <= query_positions[None, :, None])
    has_key = visible.any(-1, keepdim=True)
    return bias_mask(visible, dtype), has_key if static or not bool(has_key.all()) else None


def bias_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """visible [B, T, S] -> the additive mask [B, 1, T, S]."""
    bias = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    return bias.masked_fill_(~visible, torch.finfo(dtype).min)[:, None]


class StateAttention(nn.Module):
    """Attention from every position to earlier sentence-token positions, in D dimensions."""

    def __init__(self, d_model: int, state_dim: int, num_heads: int = 1, dropout: float = 0.0):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = state_dim // num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, state_dim)
        self.k_proj = nn.Linear(d_model, state_dim)
        self.v_proj = nn.Linear(d_model, state_dim)
        self.out_proj = nn.Linear(state_dim, d_model)

    def forward(
        self, hidden: torch.Tensor, inputs: StateAttentionInputs, layer_idx: int = 0, add_input: bool = False
    ) -> torch.Tensor:
        """The layer's output for queries `hidden` [B, T, d]; with `add_input`, hidden + output (the
        residual, which the cached path folds into its last product)."""
        if not inputs.active:
            return hidden if add_input else torch.zeros_like(hidden)
        source = None
        if inputs.new_keys is not None:
            index = inputs.new_keys.index[..., None].expand(-1, -1, hidden.shape[-1])
            source = hidden.gather(1, index)
        if inputs.cache is not None:
            out = self._attend_folded(hidden, inputs, layer_idx, source, add_input)
        else:
            out = self._attend(hidden, self.k_proj(source), self.v_proj(source), inputs.bias)
            out = out + hidden if add_input else out
        if inputs.has_key is None:
            return out
        # a query with no visible key (the prefix) gets zero, not a uniform average
        return torch.where(inputs.has_key, out, hidden if add_input else torch.zeros_like(out))

    def _attend(self, hidden, keys, values, bias):
        """The layer as the paper writes it: project queries, attend, project the output."""
        query = self.q_proj(hidden)
        if bias is not None and bias.dtype != query.dtype:
            bias = bias.to(query.dtype)
        out = F.scaled_dot_product_attention(
            self._heads(query),
            self._heads(keys),
            self._heads(values),
            attn_mask=bias,
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.out_proj(self._merge(out))

    def fold_map(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(weight, bias) of one linear map from a sentence-token input s [d] to its folded cache
        entry [keys H * d | values H * d | key biases H]. Per head h (Dh wide, scale 1/sqrt(Dh)):
        q_h . k_h = h . (Wq_h^T k_h) + bq_h . k_h with k_h = Wk_h s + bk_h, so the key is
        scale Wq_h^T (Wk_h s + bk_h) and the key bias scale bq_h . (Wk_h s + bk_h); and
        Wo (sum a v) + bo = sum a (Wo_h v_h + bo / H) summed over heads (a query's weights sum
        to 1), so the value is Wo_h (Wv_h s + bv_h) + bo / H."""
        heads, dh, d = self.num_heads, self.head_dim, self.q_proj.in_features
        scale = dh**-0.5
        wq, wk, wv = (p.weight.view(heads, dh, d) for p in (self.q_proj, self.k_proj, self.v_proj))
        bq, bk, bv = (p.bias.view(heads, dh, 1) for p in (self.q_proj, self.k_proj, self.v_proj))
        wo = self.out_proj.weight.view(d, heads, dh).transpose(0, 1)  # [H, d, Dh]
        weight = torch.cat([
            (scale * wq.transpose(1, 2) @ wk).reshape(heads * d, d),  # keys
            (wo @ wv).reshape(heads * d, d),  # values
            scale * (bq.transpose(1, 2) @ wk)[:, 0],  # key biases
        ])
        bias = torch.cat([
            (scale * wq.transpose(1, 2) @ bk).reshape(-1),
            ((wo @ bv)[..., 0] + self.out_proj.bias / heads).reshape(-1),
            scale * (bq * bk).sum((1, 2)),
        ])
        return weight, bias

    def _attend_folded(self, hidden, inputs: StateAttentionInputs, layer_idx: int, source, add_input: bool):
        """Attention over the cache's folded entries: the hidden states are the queries. Written
        as matrix products, not scaled_dot_product_attention: over a handful of slots its fixed
        cost per call is ~3x that of the three products (CPU, measured)."""
        cache = inputs.cache
        if source is not None:
            if cache.fold_maps[layer_idx] is None:  # built once per generate call, from the weights now
                cache.fold_maps[layer_idx] = self.fold_map()
            cache.update(layer_idx, F.linear(source, *cache.fold_maps[layer_idx]))
        keys_t, values, mask = cache.attention_inputs(layer_idx, self.num_heads, inputs.bias, hidden.shape[1])
        dtype = hidden.dtype
        if self.num_heads == 1:  # [B, T, d] x [B, d, S] -> [B, T, S] -> [B, T, d]
            probs = torch.softmax(torch.baddbmm(mask.to(dtype), hidden, keys_t.to(dtype)), dim=-1)
            values = values.to(probs.dtype)
            return torch.baddbmm(hidden.to(probs.dtype), probs, values) if add_input else torch.bmm(probs, values)
        scores = torch.matmul(hidden[:, None], keys_t.to(dtype)) + mask.to(dtype)  # [B, H, T, S]
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, values.to(probs.dtype)).sum(1)
        return out + hidden if add_input else out

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, H * Dh] -> [B, H, T, Dh]; one head (the paper's setting): a view, no transpose."""
        if self.num_heads == 1:
            return x.unsqueeze(1)
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)

    def _merge(self, x: torch.Tensor) -> torch.Tensor:
        """[B, H, T, Dh] -> [B, T, H * Dh]."""
        if self.num_heads == 1:
            return x.squeeze(1)
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)
