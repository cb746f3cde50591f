"""Static-shape decoding: fixed-capacity caches and a decoding step that compiles as one graph.

`generate(..., decode_step="static" | "compiled")` reads one token a step as the dynamic
path does, but every tensor the step touches keeps its shape for the whole call:

  * BART's self-attention keys/values live in transformers' `StaticCache` (one slot per
    token the call may read); a query sees the slots up to its position (a boolean mask
    built from a position tensor, not from a Python int, so no value is baked into a graph);
  * the state attention's folded keys live in `StaticStateCache`, `capacity` slots per row:
    every step computes the new entry of every row and writes it where the row reads a
    sentence token (elsewhere it writes the slot's old value back), so the step has no
    branch on the data; the capacity grows (doubling, a new graph) only when the host,
    which counts the steps that read a sentence token, sees that a row could overflow;
  * the cross-attention keys/values are computed once, by the first step, which runs
    eagerly (it also allocates the static cache); every later step is the same graph.

The token embedding (and what a model adds to it: the entity input, DiscoDVT's codes) is
computed outside the step, and so are the planner and the state predictor, which run a
few times per story. Masked slots add exactly zero to an attention, so the static step
equals the dynamic one to float rounding and, in practice, samples the same tokens
(tests/model/test_static_decoding.py).

With `compiled`, the step is `torch.compile(fullgraph=True)`; on CUDA in the
"reduce-overhead" mode (CUDA graphs), whose outputs are copied before the next replay.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache, StaticCache

from eric.model.state_attention import StateAttentionInputs, StateKeys, bias_mask, folded_attention_inputs

FIRST_CAPACITY = 32  # state slots per row before the first growth (a story has ~20 units)


class StaticStateCache:
    """Per-layer folded state-attention entries [B, capacity, 2 H d + H] and the keys per row.

    Same interface as the dynamic `StateAttentionCache` for `StateAttention._attend_folded`
    (`fold_maps`, `update`, `attention_inputs`), with fixed shapes."""

    def __init__(self, state_layers, batch: int, capacity: int, device, dtype):
        self.fold_maps = [layer.fold_map() for layer in state_layers]  # from the weights now, once per call
        self.entries = [torch.zeros(batch, capacity, weight.shape[0], device=device, dtype=dtype)
                        for weight, _ in self.fold_maps]
        self.counts = torch.zeros(batch, dtype=torch.long, device=device)
        self.capacity = capacity
        self.slots = torch.arange(capacity, device=device)
        self.dest: torch.Tensor | None = None  # [B, 1, 1] the slot this step writes
        self.writes: torch.Tensor | None = None  # [B, 1, 1] whether the row reads a sentence token

    def step_inputs(self, is_sent: torch.Tensor, dtype: torch.dtype) -> StateAttentionInputs:
        """The inputs every layer's state attention shares for one step; is_sent [B, 1]."""
        self.dest = self.counts.clamp(max=self.capacity - 1)[:, None, None]
        self.writes = is_sent[:, :, None]
        self.counts.add_(is_sent[:, 0].long())
        visible = self.slots[None, :] < self.counts[:, None]  # [B, capacity]
        slot = torch.zeros_like(is_sent, dtype=torch.long)  # the one token of the step (no positions needed)
        keys = StateKeys(slot, slot, is_sent)
        has_key = (self.counts > 0)[:, None, None]
        return StateAttentionInputs(keys, bias_mask(visible[:, None], dtype), has_key, self, True)

    def update(self, layer_idx: int, new: torch.Tensor) -> None:
        """Write a layer's new entry [B, 1, E] at each row's next slot, where the row reads <sent>."""
        entries = self.entries[layer_idx]
        index = self.dest.expand_as(new)
        entries.scatter_(1, index, torch.where(self.writes, new, entries.gather(1, index)))

    def attention_inputs(self, layer_idx: int, heads: int, visibility: torch.Tensor | None, length: int):
        return folded_attention_inputs(self.entries[layer_idx], heads, visibility, length)

    def grow(self, capacity: int) -> None:
        """More slots per row (contents kept): a new shape, so a compiled step compiles once more."""
        for i, entries in enumerate(self.entries):
            grown = entries.new_zeros(entries.shape[0], capacity, entries.shape[2])
            grown[:, : self.capacity] = entries
            self.entries[i] = grown
        self.capacity = capacity
        self.slots = torch.arange(capacity, device=self.counts.device)


@dataclass
class StaticEricCache:
    """BART's static self-attention cache, the cross-attention cache and the static state cache."""

    attention: EncoderDecoderCache
    state: StaticStateCache | None
    position: torch.Tensor  # 0-d long: the position of the next token read (on the device)
    key_slots: torch.Tensor  # [max_length] the self-attention slots
    length: int = 0  # the same position on the host (advanced by the caller; DiscoDVT slices its codes with it)
    units_bound: int = 0  # the host's bound on any row's state keys: steps at which some row read <sent>

    @classmethod
    def empty(cls, model, batch: int, max_length: int, device, dtype) -> StaticEricCache:
        config = model.config
        self_attention = StaticCache(config=config, max_cache_len=max_length)
        attention = EncoderDecoderCache(self_attention, DynamicCache(config=config))
        state = None
        if config.use_state_attention:
            layers = [layer.state_attn for layer in model.model.decoder.layers]
            state = StaticStateCache(layers, batch, min(FIRST_CAPACITY, max_length), device, dtype)
        position = torch.zeros((), dtype=torch.long, device=device)
        return cls(attention, state, position, torch.arange(max_length, device=device))

    def step_inputs(self, is_sent: torch.Tensor, dtype: torch.dtype):
        """(query positions [1], self-attention mask [1, 1, 1, L], state inputs) of a one-token step;
        advances the device position."""
        positions = self.position.view(1).clone()  # not a view: the position advances below
        self_mask = (self.key_slots <= self.position)[None, None, None, :]
        state_inputs = self.state.step_inputs(is_sent, dtype) if self.state is not None else None
        self.position.add_(1)
        return positions, self_mask, state_inputs

    def expect_key(self) -> None:
        """Before a step at which some row reads <sent>: room for one more state key per row. Only when
        the host's bound passes the capacity is the exact count read (a sync) and the capacity doubled."""
        self.units_bound += 1
        if self.state is None or self.units_bound <= self.state.capacity:
            return
        self.units_bound = int(self.state.counts.max()) + 1
        capacity = self.state.capacity
        while capacity < self.units_bound:
            capacity *= 2
        if capacity > self.state.capacity:
            self.state.grow(capacity)

    def rollback(self) -> None:
        """Forget the last token read (contrastive search's lookahead): its slots are overwritten next."""
        self.attention.self_attention_cache.crop(-1)
        self.position.sub_(1)
        self.length -= 1


class StaticDecodeStep:
    """One token through the decoder on a `StaticEricCache`, eager or compiled (one graph)."""

    def __init__(self, model, compiled: bool):
        self.model = model
        self.step = _compiled_step(model) if compiled else _decoder_step
        self.copy_outputs = compiled and model.device.type == "cuda"  # CUDA graphs reuse their output buffers

    def __call__(self, cache: StaticEricCache, ids, unit_embed, encoder_hidden, cross_mask) -> torch.Tensor:
        embeds, is_sent = self.model.decoder_inputs(ids, unit_embed, cache.length)
        first = cache.length == 0  # computes the cross-attention keys and allocates the static cache
        step = _decoder_step if first else self.step
        hidden = step(self.model.model.decoder, embeds, is_sent, encoder_hidden, cross_mask, cache)
        cache.length += 1
        return hidden.clone() if self.copy_outputs and not first else hidden


def _decoder_step(decoder, embeds, is_sent, encoder_hidden, cross_mask, cache):
    return decoder(embeds, is_sent, encoder_hidden, cross_mask, cache=cache)


_COMPILED: dict[str, object] = {}


def _compiled_step(model):
    """One compiled step function per device type: every call of generate reuses its graphs
    (guards on shapes and dtypes, not on the cache objects)."""
    device_type = model.device.type
    if device_type not in _COMPILED:
        mode = "reduce-overhead" if device_type == "cuda" else None
        _COMPILED[device_type] = torch.compile(_decoder_step, fullgraph=True, mode=mode)
    return _COMPILED[device_type]
