"""The static decoding step (eric/model/static_decoding.py): fixed shapes, the dynamic step's samples,
one compiled graph reused across calls. Every architecture's static-vs-dynamic parity is in the
architecture suite (tests/model/architecture_suite.py)."""

from __future__ import annotations

import pytest
import torch

from eric.model import static_decoding
from eric.model.static_decoding import StaticStateCache
from tests.model.baselines import sample_with_each_decode_step
from tests.model.conftest import SENT, make_batch
from tests.model.test_generation import _model, _tiny_simctg


@pytest.fixture
def fresh_dynamo():
    """Compile anew: the suite's other compiles must not count against dynamo's recompile limit."""
    torch._dynamo.reset()
    static_decoding._COMPILED.clear()
    yield
    torch._dynamo.reset()
    static_decoding._COMPILED.clear()


def _same(a, b) -> bool:
    same_units = a.entity_ids is None or (torch.equal(a.entity_ids, b.entity_ids) and torch.equal(a.state_ids, b.state_ids))
    return torch.equal(a.sequences, b.sequences) and same_units


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("kwargs", [dict(do_sample=False, no_repeat_ngram_size=2), dict(top_p=0.9, top_k=20)],
                         ids=["greedy", "top_p"])
def test_the_static_step_samples_the_dynamic_steps_tokens_entities_and_states(residual, kwargs):
    model, batch = _model(bias=0.4, predictor_residual=residual), make_batch(rows=3)
    dynamic, static = sample_with_each_decode_step(model, batch, max_new_tokens=60, **kwargs)
    assert (static.sequences == SENT).sum() >= 6 and (static.state_ids >= 0).any()
    assert _same(dynamic, static)


def test_the_state_slots_grow_when_a_row_could_overflow_them(monkeypatch):
    grown = []
    monkeypatch.setattr(static_decoding, "FIRST_CAPACITY", 2)
    original = StaticStateCache.grow
    monkeypatch.setattr(StaticStateCache, "grow", lambda self, capacity: (grown.append(capacity), original(self, capacity)))
    model, batch = _model(bias=1.0), make_batch(rows=3)
    dynamic, static = sample_with_each_decode_step(model, batch, max_new_tokens=40, do_sample=False,
                                                   no_repeat_ngram_size=2)
    assert (static.sequences == SENT).sum(1).max() > 4  # past two doublings
    assert grown[:2] == [4, 8] and _same(dynamic, static)


@pytest.mark.parametrize("make", [_model, _tiny_simctg], ids=["eric", "simctg"])
def test_contrastive_search_reads_ahead_and_rolls_the_static_cache_back(make):
    model, batch = make(), make_batch(rows=3)
    dynamic, static = sample_with_each_decode_step(model, batch, max_new_tokens=30, penalty_alpha=0.6, top_k=5)
    assert _same(dynamic, static)


def test_a_state_cache_step_writes_only_the_rows_that_read_a_sentence_token():
    model = _model()
    layers = [layer.state_attn for layer in model.model.decoder.layers]
    cache = StaticStateCache(layers, batch=3, capacity=4, device="cpu", dtype=torch.float32)
    width = cache.entries[0].shape[-1]
    for step, reads in enumerate(([True, False, True], [False, False, True])):
        inputs = cache.step_inputs(torch.tensor(reads)[:, None], torch.float32)
        cache.update(0, torch.full((3, 1, width), float(step + 1)))
    assert cache.counts.tolist() == [1, 0, 2]
    assert cache.entries[0][:, :, 0].tolist() == [[1, 0, 0, 0], [0, 0, 0, 0], [1, 2, 0, 0]]
    visible = inputs.bias[:, 0, 0] == 0
    assert visible.tolist() == [[True, False, False, False], [False] * 4, [True, True, False, False]]
    assert inputs.has_key[:, 0, 0].tolist() == [True, False, True]


def test_a_static_step_needs_the_cache_and_a_known_name():
    model, batch = _model(), make_batch(rows=1)
    with pytest.raises(ValueError, match="use_cache=True"):
        model.generate(batch["input_ids"], decode_step="static", use_cache=False, max_new_tokens=4)
    with pytest.raises(ValueError, match="decode_step must be one of"):
        model.generate(batch["input_ids"], decode_step="graph", max_new_tokens=4)


def test_the_compiled_step_is_one_graph_that_samples_the_eager_tokens_and_serves_later_calls(fresh_dynamo):
    """fullgraph=True: a graph break would raise. A second call (another batch size and source
    length, new cache objects) may add one graph with dynamic sizes, not one per call."""
    model = _model(bias=0.4)
    for rows in (3, 2, 4):
        batch = make_batch(seed=rows, rows=rows)
        dynamic, compiled = sample_with_each_decode_step(model, batch, ("dynamic", "compiled"), max_new_tokens=30,
                                                         top_p=0.9)
        assert _same(dynamic, compiled)
        if rows == 3:
            first = torch._dynamo.utils.counters["stats"]["unique_graphs"]
            assert first >= 1
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= first + 1
