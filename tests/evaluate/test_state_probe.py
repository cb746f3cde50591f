"""The state probe: a state id that determines the label beats the majority class, a random one does not."""

from __future__ import annotations

import random

import pytest

import torch

from eric.evaluate.state_probe import (
    UnitState,
    _scored,
    agreement,
    hidden_unit_pairs,
    linear_probe,
    majority_probe,
    prediction_cosines,
    quantize_hidden,
    unit_state_pairs,
    unit_state_vectors,
)
from tests.model.conftest import ENTITIES, SENT, make_batch, tiny_model

LABELS = ["travel", "fight", "meet"]


def _units(texts: int, informative: bool, seed: int) -> list[UnitState]:
    rng = random.Random(seed)
    out = []
    for t in range(texts):
        for n in range(6):
            label = rng.choices(LABELS, [5, 3, 2])[0]
            state = LABELS.index(label) * 10 + rng.randrange(3) if informative else rng.randrange(30)
            out.append(UnitState(t, n, state, state, label))
    return out


def test_informative_states_beat_the_majority_class_with_an_interval_above_zero():
    result = majority_probe(_units(200, True, 0), _units(80, True, 1))
    assert result.accuracy == pytest.approx(1.0)
    assert result.majority == pytest.approx(0.5, abs=0.06)
    assert result.gain_low > 0.3 and result.gain == pytest.approx(result.accuracy - result.majority)
    assert result.texts == 80 and result.units == 480 and result.states_seen == 9


def test_uninformative_states_do_not():
    result = majority_probe(_units(200, False, 2), _units(80, False, 3))
    assert result.gain_low <= 0  # no evidence of any gain
    assert result.gain < 0.02


def test_the_interval_is_the_bootstrap_over_texts_drawn_by_the_seed():
    """The vectorised bootstrap gives the interval of the plain loop: seeded draws of the texts,
    the gain of each resample over its units (texts of uneven length, so a mean of per-text
    gains would differ)."""
    rng = random.Random(4)
    test = [UnitState(t, n, 0, 0, rng.choice(LABELS)) for t in range(40) for n in range(rng.randrange(1, 9))]
    guesses = [u.label if rng.random() < 0.6 else "fight" for u in test]
    result = _scored(test, guesses, "travel", 0, resamples=200, seed=7)
    texts = sorted({u.text for u in test})
    draws = random.Random(7)
    gains = []
    for _ in range(200):
        units = [(u, g) for t in draws.choices(texts, k=len(texts)) for u, g in zip(test, guesses) if u.text == t]
        gains.append(sum(g == u.label for u, g in units) / len(units) - sum(u.label == "travel" for u, _ in units) / len(units))
    gains.sort()
    assert (result.gain_low, result.gain_high) == (gains[5], gains[194])
    assert result.texts == 40 and result.units == len(test)


def test_unseen_states_fall_back_to_the_majority_label():
    train = [UnitState(0, 0, 1, 1, "fight"), UnitState(0, 1, 2, 2, "travel"), UnitState(1, 0, 2, 2, "travel")]
    test = [UnitState(5, 0, 7, 7, "travel")]  # state 7 never seen: answer "travel"
    assert majority_probe(train, test, resamples=10).accuracy == 1.0


def test_pairs_come_from_the_models_predicted_and_gold_states():
    model = tiny_model()
    batch = make_batch(rows=3)
    rows = [{"units": list(range(6))} for _ in range(3)]
    pairs = unit_state_pairs(model, lambda chunk: batch, rows, lambda row, n: f"unit{n}", batch_size=3)
    out = model.eval()(**batch)
    assert len(pairs) == int((out.state_ids >= 0).sum()) > 0
    for p in pairs:
        assert p.gold == int(out.state_ids[p.text, p.unit]) and p.predicted == int(out.predicted_state_ids[p.text, p.unit])
        assert p.label == f"unit{p.unit}"


def test_state_vectors_are_the_predicted_quantized_and_gold_vectors_of_the_same_units():
    model = tiny_model()
    batch = make_batch(rows=3)
    pairs, vectors = unit_state_vectors(model, lambda chunk: batch, [{}] * 3, lambda row, n: f"unit{n}", batch_size=3)
    assert pairs == unit_state_pairs(model, lambda chunk: batch, [{}] * 3, lambda row, n: f"unit{n}", batch_size=3)
    out = model.eval()(**batch)
    codebook = model.state_space.vectors()
    assert all(v.shape == (len(pairs), codebook.shape[1]) for v in vectors.values())
    for i, p in enumerate(pairs):
        assert torch.allclose(vectors["predicted_vector"][i], out.predicted_events[p.text, p.unit].float(), atol=1e-6)
        assert torch.allclose(vectors["predicted_state_vector"][i], codebook[p.predicted].float(), atol=1e-6)
        # e_n: its nearest state is the unit's gold state
        assert int(model.state_space.nearest(vectors["gold_vector"][i][None])[0]) == p.gold
    assert not torch.allclose(vectors["predicted_vector"], vectors["gold_vector"])


def test_agreement_counts_units_whose_predicted_state_is_the_gold_one():
    pairs = [UnitState(0, 0, 3, 3, "a"), UnitState(0, 1, 2, 5, "a"), UnitState(1, 0, 4, 4, "b"), UnitState(1, 1, 1, 0, "b")]
    assert agreement(pairs) == 0.5


def test_prediction_cosines_compare_own_other_and_nearest_states():
    model, batch = tiny_model(), make_batch(rows=3)
    found = prediction_cosines(model, lambda chunk: batch, [{}] * 3, batch_size=3)
    out = model.eval()(**batch)
    target = out.state_ids >= 0
    vectors = model.state_space.vectors()
    own = (out.predicted_events[target] * vectors[out.state_ids[target]]).sum(-1).mean()
    assert found["units"] == int(target.sum())
    assert found["own_gold_state"] == pytest.approx(float(own.detach()), abs=1e-4)
    assert found["nearest_state"] >= max(found["own_gold_state"], found["other_gold_states"]) - 1e-4


def _blobs(texts: int, informative: bool, seed: int) -> tuple[list[UnitState], torch.Tensor]:
    """Vectors near one centre per label (informative) or anywhere (not)."""
    g = torch.Generator().manual_seed(seed)
    units = _units(texts, True, seed)
    centres = torch.eye(8)[: len(LABELS)] * 10
    vectors = torch.stack([centres[LABELS.index(u.label)] if informative else torch.zeros(8) for u in units])
    return units, vectors + torch.randn(len(units), 8, generator=g)


def test_hidden_vectors_quantized_into_clusters_probe_like_states():
    train, test = quantize_hidden(_blobs(150, True, 0), _blobs(60, True, 1), clusters=6)
    assert {u.predicted for u in train} <= set(range(6)) and len({u.predicted for u in test}) > 1
    assert majority_probe(train, test).accuracy == pytest.approx(1.0)  # every cluster holds one label
    noise = quantize_hidden(_blobs(150, False, 2), _blobs(60, False, 3), clusters=6)
    assert majority_probe(*noise).gain_low <= 0


class _Collator:
    """What hidden_unit_pairs reads of a collator: the sentence token's id and a batch."""

    def __init__(self, batch):
        self.batch, self.ids = batch, type("Ids", (), {"sent": SENT})()

    def __call__(self, chunk):
        return self.batch


def _own_states_pass(model, batch):
    """The decoder as the probes read it: every unit's predicted state injected, not the gold one."""
    model.eval()
    return model(**batch, state_ids=model(**batch).predicted_state_ids)


def test_hidden_pairs_read_the_decoder_at_each_units_sentence_token():
    model, batch = tiny_model(), make_batch(rows=3)
    rows = [{}] * 3
    pairs, vectors = hidden_unit_pairs(model, _Collator(batch), rows, lambda row, n: f"unit{n}", batch_size=3)
    out = _own_states_pass(model, batch)
    sents = (batch["labels"] == SENT).nonzero().tolist()
    assert len(pairs) == len(sents) == vectors.shape[0]
    for (b, i), pair, vector in zip(sents, pairs, vectors):
        assert pair.text == b and pair.label == f"unit{pair.unit}"
        assert torch.allclose(vector, out.decoder_last_hidden_state[b, i + 1].float(), atol=1e-5)


def test_a_linear_probe_reads_labels_from_separable_vectors_and_not_from_noise():
    found = linear_probe(_blobs(150, True, 0), _blobs(60, True, 1))
    assert found.accuracy == pytest.approx(1.0) and found.gain_low > 0.3
    noise = linear_probe(_blobs(150, False, 2), _blobs(60, False, 3))
    assert noise.gain_low <= 0 and noise.accuracy <= noise.majority + 0.05


def test_hidden_pairs_can_read_the_decoder_where_it_has_read_a_units_entity():
    model, batch = tiny_model(), make_batch(rows=3)
    labels = batch["labels"]
    present = next(token for token in ENTITIES if (labels == token).any())
    pairs, vectors = hidden_unit_pairs(model, _Collator(batch), [{}] * 3, lambda row, n: f"unit{n}", batch_size=3,
                                       entity=lambda row, n: present)
    out = _own_states_pass(model, batch)
    expected = []
    for b in range(3):
        starts = (labels[b] == SENT).nonzero()[:, 0].tolist()
        for n, (begin, end) in enumerate(zip(starts, [*starts[1:], labels.shape[1]])):
            hits = [i for i in range(begin + 1, end) if labels[b, i] == present]
            if hits:
                expected.append((b, n, hits[0] + 1))
    assert [(p.text, p.unit) for p in pairs] == [(b, n) for b, n, _ in expected] and expected
    for (b, _, position), vector in zip(expected, vectors):
        assert torch.allclose(vector, out.decoder_last_hidden_state[b, position].float(), atol=1e-5)


def test_the_decoder_probes_do_not_see_the_unit_they_label():
    """With the gold s_n injected, the hidden state at unit n's sentence token has read the
    sentence encoder's reading of unit n itself. The probes read a pass with the predicted
    states instead: where a unit's gold state is not its predicted one, the vector read there
    is not the gold pass's."""
    model, batch = tiny_model(), make_batch(rows=3)
    gold = model.eval()(**batch)
    pairs, vectors = hidden_unit_pairs(model, _Collator(batch), [{}] * 3, lambda row, n: f"u{n}", batch_size=3)
    starts = (batch["labels"] == SENT).nonzero().tolist()  # the pairs' order: text, then unit
    moved = [(i, b, position) for i, (b, position) in enumerate(starts)
             if gold.state_ids[b, pairs[i].unit] not in (-1, gold.predicted_state_ids[b, pairs[i].unit])]
    assert moved
    for i, b, position in moved:
        assert not torch.allclose(vectors[i], gold.decoder_last_hidden_state[b, position + 1].float(), atol=1e-4)
