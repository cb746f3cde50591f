"""The ERIC decoder: BART's decoder with a state attention layer in every block.

`EricDecoderLayer` keeps BART's sub-modules and names (so a BART checkpoint loads
into it) and runs: self-attention -> state attention (own residual and layer norm)
-> cross-attention -> feed-forward, post-norm like BART. The decoder takes input
embeddings already carrying the entity input at sentence tokens (see
modeling_eric.py) and a mask of those positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.models.bart.modeling_bart import BartDecoderLayer, BartLearnedPositionalEmbedding

from eric.model.config import EricConfig
from eric.model.state_attention import StateAttention, StateAttentionCache, StateAttentionInputs, StateKeys
from eric.model.static_decoding import StaticEricCache


def padding_mask_4d(mask: torch.Tensor | None, config) -> torch.Tensor | None:
    """A [B, S] padding mask as the [B, 1, 1, S] boolean mask SDPA reads as is. transformers'
    mask builders would first check on the host whether any position is padding (a sync a
    call); other attention implementations get the 2D mask back for those builders."""
    if mask is None or mask.dim() != 2 or config._attn_implementation != "sdpa":
        return mask
    return mask[:, None, None, :].bool()


@dataclass
class EricCache:
    """BART's self/cross-attention cache plus the state-attention memory."""

    attention: EncoderDecoderCache
    state: StateAttentionCache
    length: int = 0
    reads_sent: bool | None = None  # set by generate for its next step: some row reads <sent> (no host sync)

    @classmethod
    def empty(cls, config: EricConfig) -> EricCache:
        attention = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
        return cls(attention, StateAttentionCache(config.decoder_layers))


class EricDecoderLayer(BartDecoderLayer):
    def __init__(self, config: EricConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        self.layer_idx = layer_idx
        if config.use_state_attention:
            self.state_attn = StateAttention(
                config.d_model, config.state_dim, config.state_attention_heads, config.attention_dropout
            )
            self.state_attn_layer_norm = nn.LayerNorm(config.d_model)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None,
        state_inputs: StateAttentionInputs | None,
        cache: EricCache | None = None,
    ) -> torch.Tensor:
        attention_cache = cache.attention if cache is not None else None
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states, cache=attention_cache, attention_mask=attention_mask)
        hidden_states = self._residual(residual, hidden_states, self.self_attn_layer_norm)

        if hasattr(self, "state_attn"):
            if self.training:
                residual = hidden_states
                hidden_states = self.state_attn(hidden_states, state_inputs, self.layer_idx)
                hidden_states = self._residual(residual, hidden_states, self.state_attn_layer_norm)
            else:  # no dropout: the layer adds its input itself (one product less a step)
                hidden_states = self.state_attn(hidden_states, state_inputs, self.layer_idx, add_input=True)
                hidden_states = self.state_attn_layer_norm(hidden_states)

        residual = hidden_states
        hidden_states, _ = self.encoder_attn(
            hidden_states,
            key_value_states=encoder_hidden_states,
            attention_mask=encoder_attention_mask,
            cache=attention_cache,
        )
        hidden_states = self._residual(residual, hidden_states, self.encoder_attn_layer_norm)

        residual = hidden_states
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        hidden_states = self.fc2(hidden_states)
        return self._residual(residual, hidden_states, self.final_layer_norm)

    def _residual(self, residual: torch.Tensor, update: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
        update = nn.functional.dropout(update, p=self.dropout, training=self.training)
        return norm(residual + update)


class EricDecoder(nn.Module):
    """BART's decoder stack (embeddings are passed in) with ERIC's decoder layers."""

    def __init__(self, config: EricConfig):
        super().__init__()
        self.config = config
        self.dropout = config.dropout
        self.embed_positions = BartLearnedPositionalEmbedding(config.max_position_embeddings, config.d_model)
        self.layers = nn.ModuleList([EricDecoderLayer(config, i) for i in range(config.decoder_layers)])
        self.layernorm_embedding = nn.LayerNorm(config.d_model)

    def forward(
        self,
        inputs_embeds: torch.Tensor,
        is_sent: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: EricCache | StaticEricCache | None = None,
        state_keys: StateKeys | None = None,
    ) -> torch.Tensor:
        """inputs_embeds [B, T, d] (token + entity input), is_sent [B, T]; returns the last layer [B, T, d].

        `encoder_attention_mask` may be 2D (padding) or an already built 4D mask; `state_keys`
        the state attention's key slots if the caller knows them (else found from is_sent).
        """
        if isinstance(cache, StaticEricCache):  # one token on fixed shapes (eric/model/static_decoding.py)
            query_positions, self_mask, state_inputs = cache.step_inputs(is_sent, inputs_embeds.dtype)
            hidden = self._embed(inputs_embeds, query_positions)
            cross_mask = encoder_attention_mask  # built once by generate
        else:
            hidden, self_mask, cross_mask, state_inputs = self._dynamic_inputs(
                inputs_embeds, is_sent, encoder_hidden_states, encoder_attention_mask, attention_mask, cache, state_keys
            )
        for layer in self.layers:
            hidden = layer(hidden, self_mask, encoder_hidden_states, cross_mask, state_inputs, cache)
        return hidden

    def _dynamic_inputs(self, inputs_embeds, is_sent, encoder_hidden_states, encoder_attention_mask, attention_mask,
                        cache, state_keys):
        """(embedded input, self- and cross-attention masks, state inputs) of a whole sequence (training)
        or of a chunk on the dynamic cache; advances the cache's length."""
        length = inputs_embeds.shape[1]
        past = cache.length if cache is not None else 0
        hidden = self._embed(inputs_embeds, torch.arange(past, past + length, device=inputs_embeds.device))
        self_mask = self._self_attention_mask(inputs_embeds, attention_mask, cache, past)
        cross_mask = padding_mask_4d(encoder_attention_mask, self.config)
        if cross_mask is not None and cross_mask.dim() == 2:
            cross_mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=inputs_embeds,
                attention_mask=encoder_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
            )
        state_inputs = None
        if self.config.use_state_attention:
            state_cache = cache.state if cache is not None else None
            any_sent = cache.reads_sent if cache is not None else None  # read for one-token steps only
            state_inputs = StateAttentionInputs.build(is_sent, past, hidden.dtype, state_cache, any_sent, state_keys)
        if cache is not None:
            cache.length += length
            cache.reads_sent = None
        return hidden, self_mask, cross_mask, state_inputs

    def _embed(self, inputs_embeds: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        hidden = inputs_embeds + self.embed_positions(None, position_ids=query_positions)
        return nn.functional.dropout(self.layernorm_embedding(hidden), p=self.dropout, training=self.training)

    def _self_attention_mask(self, inputs_embeds, attention_mask, cache, past):
        length = inputs_embeds.shape[1]
        if length == 1 and attention_mask is None:
            return None  # one query at the end of the cache sees everything
        if attention_mask is None and cache is None and self.config._attn_implementation == "sdpa":
            return None  # SDPA's own causal mask (is_causal): padding sits at the end, after every real token
        if attention_mask is None:
            attention_mask = torch.ones(inputs_embeds.shape[0], past + length, device=inputs_embeds.device)
        return create_causal_mask(
            config=self.config,
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            cache=cache.attention.self_attention_cache if cache is not None else None,
        )
