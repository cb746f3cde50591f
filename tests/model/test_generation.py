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


# -- contrastive search (SimCTG) --


def test_contrastive_scores_match_a_hand_computation():
    from eric.model.generation import contrastive_scores

    probs = torch.tensor([[0.5, 0.3]])
    candidates = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])  # h_v of the two candidates
    context = torch.tensor([[[1.0, 1.0], [3.0, 0.0]]])  # h_j of the positions read so far
    # candidate 0: max cos = max(1/sqrt2, 1) = 1; candidate 1: max(1/sqrt2, 0) = 1/sqrt2
    expected = torch.tensor([[0.4 * 0.5 - 0.6 * 1.0, 0.4 * 0.3 - 0.6 * 2 ** -0.5]])
    scores = contrastive_scores(probs, candidates, context, alpha=0.6)
    assert torch.allclose(scores, expected)
    assert scores.argmax().item() == 1  # the less likely but less repetitive candidate wins
    assert contrastive_scores(probs, candidates, context, alpha=0.0).argmax().item() == 0  # alpha 0: p alone


def _tiny_simctg():
    from tests.model.test_simctg import tiny_simctg

    model = tiny_simctg().eval()
    with torch.no_grad():
        model.final_logits_bias[0, SENT] = 0.2
    return model


@pytest.mark.parametrize("make", [_model, _tiny_simctg], ids=["eric", "simctg"])
@pytest.mark.parametrize("use_cache", [True, False])
def test_contrastive_search_with_alpha_zero_is_greedy_decoding(make, use_cache):
    model, batch = make(), make_batch(rows=3)
    kwargs = dict(max_new_tokens=30, no_repeat_ngram_size=2, use_cache=use_cache)
    greedy = model.generate(batch["input_ids"], batch["attention_mask"], do_sample=False, **kwargs)
    contrastive = model.generate(batch["input_ids"], batch["attention_mask"], penalty_alpha=0.0, top_k=4, **kwargs)
    assert torch.equal(greedy.sequences, contrastive.sequences)


@pytest.mark.parametrize("make", [_model, _tiny_simctg], ids=["eric", "simctg"])
def test_contrastive_search_with_and_without_cache_is_identical_and_differs_from_greedy(make):
    model, batch = make(), make_batch(rows=3)
    kwargs = dict(max_new_tokens=30, penalty_alpha=0.6, top_k=5)
    cached = model.generate(batch["input_ids"], batch["attention_mask"], **kwargs)
    full = model.generate(batch["input_ids"], batch["attention_mask"], use_cache=False, **kwargs)
    assert torch.equal(cached.sequences, full.sequences)
    if cached.entity_ids is not None:
        assert torch.equal(cached.entity_ids, full.entity_ids) and torch.equal(cached.state_ids, full.state_ids)
    greedy = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=30, do_sample=False)
    assert not torch.equal(cached.sequences, greedy.sequences)
    again = model.generate(batch["input_ids"], batch["attention_mask"], **kwargs)  # deterministic
    assert torch.equal(cached.sequences, again.sequences)


def test_each_contrastive_step_picks_the_formulas_argmax():
    """Replay the chosen tokens through the training forward and check every step by hand."""
    from eric.model.generation import contrastive_scores

    model, batch, alpha, k = _tiny_simctg(), make_batch(rows=2), 0.6, 4
    out = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=12, penalty_alpha=alpha, top_k=k)
    seq = out.sequences
    encoder = model.encode(batch["input_ids"], batch["attention_mask"])
    with torch.no_grad():
        hidden = model.decode(seq, None, encoder, batch["attention_mask"])  # [B, L, d]
        for t in range(2, seq.shape[1] - 1):  # the token at t + 1 was chosen after reading position t
            live = (seq[:, 1 : t + 1] != EOS).all(1)
            probs = torch.softmax(model.lm_logits(hidden[:, t]).float(), -1)
            top, candidates = probs.topk(k, -1)
            ahead = torch.stack([model.decode(torch.cat([seq[:, : t + 1], candidates[:, c : c + 1]], 1), None,
                                              encoder, batch["attention_mask"])[:, -1] for c in range(k)], 1)
            scores = contrastive_scores(top, ahead.float(), hidden[:, : t + 1].float(), alpha)
            chosen = candidates.gather(1, scores.argmax(-1, keepdim=True))[:, 0]
            assert torch.equal(chosen[live], seq[live, t + 1])


def test_a_unit_plan_fixes_the_entity_and_state_of_the_units_it_covers():
    """The bounds of what states can do: the reference's entity and state at units 0..U-1 (a
    negative entry, or a unit past U, is the model's own plan), or a uniform state at every unit."""
    from eric.model.generation import UnitPlan

    model, batch = _model(), make_batch(rows=3)
    kwargs = dict(max_new_tokens=40, do_sample=False, no_repeat_ngram_size=2)
    own = model.generate(batch["input_ids"], batch["attention_mask"], **kwargs)
    units = own.entity_ids.shape[1]
    assert units >= 4
    entities = torch.tensor([[1, 2, -1], [3, 3, 3], [-1, 1, 2]])
    states = torch.tensor([[5, 6, 7], [-1, 2, 2], [9, 9, -1]])
    planned = model.generate(batch["input_ids"], batch["attention_mask"], plan=UnitPlan(entities, states), **kwargs)
    got_entities, got_states = planned.entity_ids, planned.state_ids
    first = 0 if model.config.first_unit_state else 1  # unit 0 has no plan in the code's setting
    for b in range(3):
        for n in range(first, 3):
            if got_entities[b, n] < 0:
                continue  # the row wrote fewer units
            assert got_entities[b, n] == (entities[b, n] if entities[b, n] >= 0 else got_entities[b, n])
            if entities[b, n] >= 0 and states[b, n] >= 0:
                assert got_states[b, n] == states[b, n]
    assert int((got_entities[:, first:3] == entities[:, first:3]).sum()) >= 4
    drawn = model.generate(batch["input_ids"], batch["attention_mask"], plan=UnitPlan(random_states=True),
                           generator=torch.Generator().manual_seed(0), **kwargs)
    again = model.generate(batch["input_ids"], batch["attention_mask"], plan=UnitPlan(random_states=True),
                           generator=torch.Generator().manual_seed(0), **kwargs)
    assert torch.equal(drawn.state_ids, again.state_ids)
    with_state = drawn.state_ids[drawn.state_ids >= 0]
    assert len(set(with_state.tolist())) >= 3 and not torch.equal(drawn.state_ids, own.state_ids)
