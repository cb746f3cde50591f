"""The state attention layer: keys only at earlier sentence tokens, zero for the prefix."""

from __future__ import annotations

import pytest
import torch

from eric.model.state_attention import StateAttention, StateAttentionCache, StateAttentionInputs, StateKeys
from eric.model.units import UnitLayout
from tests.model.conftest import PAD, SENT, tiny_model


def test_state_keys_gather_sentence_positions_in_order():
    is_sent = torch.tensor([[0, 1, 0, 1, 1], [0, 0, 1, 0, 0]], dtype=torch.bool)
    keys = StateKeys.from_sentence_mask(is_sent, past_length=10)
    assert keys.index[0].tolist() == [1, 3, 4]
    assert keys.index[1, :1].tolist() == [2]
    assert keys.valid.tolist() == [[True, True, True], [True, False, False]]
    assert keys.positions[0].tolist() == [11, 13, 14]
    assert StateKeys.from_sentence_mask(torch.zeros(2, 3, dtype=torch.bool)) is None


def test_prefix_positions_get_exactly_zero_and_later_ones_do_not():
    torch.manual_seed(0)
    layer = StateAttention(d_model=16, state_dim=8, num_heads=2)
    hidden = torch.randn(1, 6, 16)
    is_sent = torch.tensor([[0, 0, 1, 0, 1, 0]], dtype=torch.bool)
    out = layer(hidden, StateAttentionInputs.build(is_sent, 0, hidden.dtype))
    assert torch.equal(out[0, :2], torch.zeros(2, 16))
    assert out[0, 2:].abs().sum(-1).min() > 0


def test_state_attention_reads_only_sentence_positions_at_or_before_the_query():
    torch.manual_seed(0)
    layer = StateAttention(d_model=16, state_dim=8)
    hidden = torch.randn(1, 6, 16)
    is_sent = torch.tensor([[0, 1, 0, 0, 1, 0]], dtype=torch.bool)
    base = layer(hidden, StateAttentionInputs.build(is_sent, 0, hidden.dtype))
    changed = hidden.clone()
    changed[0, 3] += 5.0  # not a sentence token: never a key
    changed[0, 4] += 5.0  # a sentence token: a key from position 4 on
    out = layer(changed, StateAttentionInputs.build(is_sent, 0, hidden.dtype))
    assert torch.allclose(out[0, :3], base[0, :3], atol=1e-6)  # queries 0-2 see only key 1
    assert not torch.allclose(out[0, 5], base[0, 5])


def _layout_and_logits(model, batch, state_ids):
    out = model(**batch, state_ids=state_ids)
    decoder_ids = torch.cat([torch.full_like(batch["labels"][:, :1], 2), batch["labels"][:, :-1]], 1)
    layout = UnitLayout.from_ids(decoder_ids.masked_fill(decoder_ids < 0, PAD), SENT, PAD, state_ids.shape[1])
    return out.logits, layout


def test_changing_a_later_state_leaves_every_earlier_logit_unchanged(batch):
    model = tiny_model().eval()
    states = torch.where(batch["entity_ids"] > 0, 3, -1)
    logits, layout = _layout_and_logits(model, batch, states)
    row, unit = 0, 2  # row 0, unit 3 carries an entity (units 1 and 3 do)
    assert batch["entity_ids"][row, unit] > 0
    changed = states.clone()
    changed[row, unit] = 11
    new_logits, _ = _layout_and_logits(model, batch, changed)
    at = int(layout.sent_positions[row, unit])
    assert torch.equal(new_logits[row, :at], logits[row, :at])
    assert not torch.allclose(new_logits[row, at:], logits[row, at:])
    assert torch.equal(new_logits[1:], logits[1:])  # other rows untouched


def test_without_state_input_the_state_attention_still_makes_sentence_tokens_matter(batch):
    """w/o s_n keeps the state attention; changing the planned entity changes later logits only."""
    model = tiny_model(use_state=False).eval()
    logits = model(**batch).logits
    changed = dict(batch, entity_ids=batch["entity_ids"].clone())
    assert batch["entity_ids"][0, 2] > 0
    changed["entity_ids"][0, 2] = batch["entity_ids"][0, 2] % 5 + 1  # another placeholder
    new = model(**changed).logits
    decoder_ids = torch.cat([torch.full_like(batch["labels"][:, :1], 2), batch["labels"][:, :-1]], 1)
    at = int((decoder_ids[0] == SENT).nonzero()[2])
    assert torch.equal(new[0, :at], logits[0, :at])
    assert not torch.allclose(new[0, at:], logits[0, at:])


def _decoder_ids(rows: int = 3, length: int = 24, seed: int = 0) -> torch.Tensor:
    """`</s> <s> <sent> ...` with <sent> at different steps in each row (one row gets none later)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(20, 64, (rows, length), generator=g)
    ids[:, :3] = torch.tensor([2, 0, SENT])
    ids[0, [6, 9, 10, 17]] = SENT  # two rows read <sent> at the same step (9), others alone
    ids[1, [9, 20]] = SENT
    return ids


def _cached_steps(model, ids, encoder_hidden, first: int = 1):
    """Decode `ids` with the cache: the first `first` tokens as one chunk, then one token a step."""
    from eric.model.decoder import EricCache

    cache = EricCache.empty(model.config)
    chunks = [model.decode(ids[:, :first], None, encoder_hidden, None, cache)]
    chunks += [model.decode(ids[:, t : t + 1], None, encoder_hidden, None, cache) for t in range(first, ids.shape[1])]
    return torch.cat(chunks, 1), cache.state


def test_row_compact_cache_decodes_like_the_full_sequence_and_keeps_only_each_rows_keys():
    model = tiny_model().eval()
    ids = _decoder_ids()
    with torch.no_grad():
        encoder_hidden = model.encode(torch.randint(20, 64, (3, 7)))
        full = model.decode(ids, None, encoder_hidden)
        for first in (1, 8):  # one token a step from the start, or after a chunk with <sent> in it
            stepped, state = _cached_steps(model, ids, encoder_hidden, first)
            torch.testing.assert_close(stepped, full, rtol=0, atol=1e-5)
            units = (ids == SENT).sum(1)
            assert state.counts.tolist() == units.tolist()
            # slots = the longest row's units (5), not the 7 steps at which some row read <sent>
            assert state.slots == int(units.max()) == 5
            assert state.entries[0].shape[0] == 3 and bool(state.positions[0, :5].eq(torch.tensor([2, 6, 9, 10, 17])).all())


def test_uniform_rows_need_no_mask_and_give_the_same_output_as_a_zero_mask():
    torch.manual_seed(0)
    layer = StateAttention(d_model=16, state_dim=8, num_heads=2).eval()
    cache = StateAttentionCache(1)
    with torch.no_grad():
        for step in range(4):  # both rows read <sent> at steps 0 and 2: uniform, no bias
            is_sent = torch.full((2, 1), step % 2 == 0)
            inputs = StateAttentionInputs.build(is_sent, step, torch.float32, cache)
            hidden = torch.randn(2, 1, 16)
            out = layer(hidden, inputs)
        assert inputs.bias is None and inputs.has_key is None and cache.slots == 2
        masked = StateAttentionInputs(None, torch.zeros(2, 1, 1, 2), None, cache, True)
        assert torch.equal(layer(hidden, masked), out)


@pytest.mark.parametrize("heads, dtype, atol", [(1, torch.float32, 1e-6), (2, torch.float32, 1e-6),
                                                (1, torch.bfloat16, 0.02), (2, torch.bfloat16, 0.02)])
def test_folded_cache_equals_the_projected_layer_with_uneven_rows(heads, dtype, atol):
    """The cache folds q/out projections into its keys and values: the same outputs, step by
    step and after a chunk, as the layer over the whole sequence (float rounding aside; bf16:
    a model cast whole, as DeepSpeed's bf16 mode does)."""
    torch.manual_seed(0)
    layer = StateAttention(d_model=16, state_dim=8, num_heads=heads).eval().to(dtype)
    hidden = torch.randn(3, 10, 16, dtype=dtype)
    is_sent = torch.zeros(3, 10, dtype=torch.bool)
    is_sent[0, [1, 4, 5]] = True
    is_sent[1, [6]] = True  # row 2 never reads <sent>: zero throughout
    with torch.no_grad():
        full = layer(hidden, StateAttentionInputs.build(is_sent, 0, dtype))
        for first in (1, 5):
            cache = StateAttentionCache(1)
            outs = [layer(hidden[:, :first], StateAttentionInputs.build(is_sent[:, :first], 0, dtype, cache))]
            for t in range(first, 10):
                outs.append(layer(hidden[:, t : t + 1], StateAttentionInputs.build(is_sent[:, t : t + 1], t, dtype, cache)))
            stepped = torch.cat(outs, 1)
            assert stepped.dtype == dtype
            torch.testing.assert_close(stepped.float(), full.float(), rtol=0, atol=atol)
    assert torch.equal(full[2], torch.zeros(10, 16, dtype=dtype)) and full[1, 6:].abs().sum() > 0


def test_add_input_is_the_residual_sum_and_leaves_keyless_queries_unchanged():
    """Eval and generation fuse the residual into the layer (`add_input`): hidden + output,
    exactly the input where a query sees no key."""
    torch.manual_seed(0)
    layer = StateAttention(d_model=16, state_dim=8).eval()
    hidden = torch.randn(2, 6, 16)
    is_sent = torch.zeros(2, 6, dtype=torch.bool)
    is_sent[0, [2, 4]] = True
    with torch.no_grad():
        inputs = StateAttentionInputs.build(is_sent, 0, hidden.dtype)
        assert torch.equal(layer(hidden, inputs, add_input=True), hidden + layer(hidden, inputs))
        cache = StateAttentionCache(1)
        stepped = [layer(hidden[:, t : t + 1], StateAttentionInputs.build(is_sent[:, t : t + 1], t, hidden.dtype, cache),
                         add_input=True) for t in range(6)]
    stepped = torch.cat(stepped, 1)
    torch.testing.assert_close(stepped, hidden + layer(hidden, inputs), rtol=0, atol=1e-6)
    assert torch.equal(stepped[0, :2], hidden[0, :2]) and torch.equal(stepped[1], hidden[1])  # no key yet / ever
