"""Sampling: KV-cache parity, agreement with the training forward, batching, options."""

from __future__ import annotations

import pytest
import torch

from tests.model.conftest import EOS, SENT, make_batch, tiny_model


def _model(bias: float = 0.2, **overrides):
    """A random tiny model whose <sent> logit is nudged so that greedy decoding opens units."""
    model = tiny_model(**overrides).eval()
    with torch.no_grad():
        model.final_logits_bias[0, SENT] = bias
    return model


@pytest.mark.parametrize("residual", [False, True])
def test_greedy_decoding_with_and_without_cache_is_identical(residual):
    model, batch = _model(predictor_residual=residual), make_batch(rows=3)
    kwargs = dict(max_new_tokens=40, do_sample=False, no_repeat_ngram_size=2)
    cached = model.generate(batch["input_ids"], batch["attention_mask"], **kwargs)
    full = model.generate(batch["input_ids"], batch["attention_mask"], use_cache=False, **kwargs)
    assert (cached.sequences == SENT).sum(1).min() >= 3  # several units per row
    assert torch.equal(cached.sequences, full.sequences)
    assert torch.equal(cached.entity_ids, full.entity_ids)
    assert torch.equal(cached.state_ids, full.state_ids)
    planned = cached.entity_ids[cached.entity_ids >= 0]
    assert len(set(planned.tolist())) >= 2 and (cached.state_ids >= 0).any()


@pytest.mark.parametrize("residual", [False, True])  # the predictor reads its query directly, or not
def test_generation_agrees_with_the_teacher_forced_training_forward(residual):
    model, batch = _model(bias=0.0, predictor_residual=residual), make_batch(rows=3)
    out = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=30, do_sample=False)
    seq = out.sequences
    forward = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        decoder_input_ids=seq[:, :-1],
        entity_ids=out.entity_ids,
        state_ids=out.state_ids,
    )
    live = torch.ones_like(seq[:, 1:], dtype=torch.bool)
    live[:, 1:] = (seq[:, 1:-1] != EOS).cumprod(1).bool()  # up to and including </s>
    live[:, :2] = False  # <s> <sent> are forced
    assert torch.equal(forward.logits.argmax(-1)[live], seq[:, 1:][live])
    units = out.entity_ids >= 0
    assert torch.equal(forward.entity_logits.argmax(-1)[units], out.entity_ids[units])
    assert torch.equal(forward.predicted_state_ids[units], out.state_ids[units])


def test_a_batch_decodes_each_row_as_it_would_alone():
    model, batch = _model(), make_batch(rows=3)
    kwargs = dict(max_new_tokens=25, do_sample=False, no_repeat_ngram_size=2)
    together = model.generate(batch["input_ids"], batch["attention_mask"], **kwargs)
    for row in range(3):
        length = int(batch["attention_mask"][row].sum())
        alone = model.generate(batch["input_ids"][row : row + 1, :length], **kwargs)
        n = alone.sequences.shape[1]
        assert torch.equal(together.sequences[row, :n], alone.sequences[0])
        units = alone.entity_ids.shape[1]
        assert torch.equal(together.entity_ids[row, :units], alone.entity_ids[0])
        assert torch.equal(together.state_ids[row, :units], alone.state_ids[0])


def test_sampling_is_reproducible_and_follows_the_planned_entities():
    model, batch = _model(), make_batch(rows=2)
    kwargs = dict(max_new_tokens=30, top_p=0.9, top_k=20)
    a = model.generate(batch["input_ids"], batch["attention_mask"], generator=torch.Generator().manual_seed(1), **kwargs)
    b = model.generate(batch["input_ids"], batch["attention_mask"], generator=torch.Generator().manual_seed(1), **kwargs)
    assert torch.equal(a.sequences, b.sequences) and torch.equal(a.entity_ids, b.entity_ids)
    assert all(state == -1 for cls, state in zip(a.entity_ids.flatten().tolist(), a.state_ids.flatten().tolist())
               if cls == 0)
    pairs = a.units(0)
    assert pairs and all(p == "<none>" or p.startswith("<e") for p, _ in pairs)


def test_a_near_zero_entity_temperature_samples_the_most_likely_entity():
    model, batch = _model(), make_batch(rows=2)
    greedy = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=25, do_sample=False,
                            no_repeat_ngram_size=2)
    forced = model.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           decoder_input_ids=greedy.sequences[:, :-1], entity_ids=greedy.entity_ids,
                           state_ids=greedy.state_ids)
    sampled = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=3, top_k=1,
                             entity_temperature=1e-4, generator=torch.Generator().manual_seed(0))
    # the first unit is planned from the prefix only, so both runs see the same planner input
    assert sampled.entity_ids[:, 0].tolist() == forced.entity_logits[:, 0].argmax(-1).tolist()


def test_max_units_caps_the_number_of_units():
    model, batch = _model(bias=0.6), make_batch(rows=2)
    out = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=30, do_sample=False,
                         no_repeat_ngram_size=2, max_units=3)
    assert (out.sequences == SENT).sum(1).max() == 3


def test_code_option_leaves_the_first_unit_without_entity_and_state():
    model, batch = _model(first_unit_state=False), make_batch(rows=2)
    out = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=25, do_sample=False,
                         no_repeat_ngram_size=2)
    assert out.entity_ids[:, 0].tolist() == [0, 0] and out.state_ids[:, 0].tolist() == [-1, -1]


@pytest.mark.parametrize(
    "switches",
    [dict(use_state_attention=False), dict(use_state=False), dict(use_state=False, use_entity=False),
     dict(use_state=False, use_entity=False, use_state_attention=False)],
)
def test_every_variant_samples_and_keeps_cache_parity(switches):
    model, batch = _model(**switches), make_batch(rows=2)
    kwargs = dict(max_new_tokens=20, do_sample=False, no_repeat_ngram_size=2)
    cached = model.generate(batch["input_ids"], batch["attention_mask"], **kwargs)
    full = model.generate(batch["input_ids"], batch["attention_mask"], use_cache=False, **kwargs)
    assert torch.equal(cached.sequences, full.sequences)
    if switches.get("use_entity", True):
        assert torch.equal(cached.entity_ids, full.entity_ids) and torch.equal(cached.state_ids, full.state_ids)
        if switches.get("use_state", True):  # a state for every planned entity, none for <none>
            assert torch.equal(cached.state_ids >= 0, cached.entity_ids > 0)
        else:
            assert (cached.state_ids == -1).all()
    else:
        assert cached.entity_ids is None and cached.units(0) == []


def test_the_predictor_without_a_mask_equals_an_all_visible_mask():
    """Generation passes visible=None (every position read so far is visible): no mask is built."""
    from eric.model.planner import StatePredictor

    torch.manual_seed(0)
    predictor = StatePredictor(d_model=16, state_dim=8, num_heads=2).eval()
    hidden, query = torch.randn(3, 7, 16), torch.randn(3, 1, 16)
    keys, values = predictor.memory(hidden)
    everything = torch.ones(3, 1, 7, dtype=torch.bool)
    assert torch.equal(predictor(query, keys, values, None), predictor(query, keys, values, everything))
