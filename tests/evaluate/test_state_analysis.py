"""Entity state analysis: mention control and state usage on crafted cases, the explorer page."""

from __future__ import annotations

import pytest
import torch

from eric.data.collate import StageOneCollator
from eric.evaluate.state_analysis import (
    StateUsage,
    UnitExample,
    explorer_html,
    generated_states,
    mention_control,
    plot_usage,
    read_usage,
    stage_one_units,
    training_state_usage,
    write_usage,
)
from tests.generate.tiny import MAX_ENTITIES, NUM_STATES, one_thread, synthetic_rows, tiny_stage_one, tiny_tokenizer  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


def test_mention_control_counted_by_hand():
    samples = [
        {"stage_one": "<sent> <e0> runs. <sent> Rain falls. <sent> <e1> hides. <sent> <e0> sees <e2>. <sent>",
         "unit_entities": ["<e0>", "<none>", "<e0>", "<e2>", "<e1>"]},  # hit, hit, miss, hit, (empty unit)
        {"stage_one": "<sent> <e3> waits. <sent> Nobody <e0> came.",
         "unit_entities": [None, "<none>"]},  # unplanned unit left out, miss
        {"stage_one": "<sent> A text from a variant without a planner.", "unit_entities": []},
    ]
    control = mention_control(samples)
    assert (control.hits, control.units) == (3, 5)
    assert control.share == pytest.approx(0.6)


def test_units_of_a_stage_one_text():
    assert stage_one_units("<sent> a <e0>. <sent> b. <sent>") == ["a <e0>.", "b.", ""]
    assert stage_one_units("no marker <sent> b") == ["no marker", "b"]


def test_generated_states_count_planned_states_only():
    counts = generated_states([{"unit_states": [3, -1, 3, 5]}, {"unit_states": []}, {"unit_states": [5, 7]}])
    assert counts == {3: 2, 5: 2, 7: 1}


def test_usage_numbers_on_a_crafted_count():
    usage = StateUsage(num_states=6, counts=[0, 5, 3, 0, 2, 0])
    assert (usage.used, usage.units) == (3, 10)
    assert usage.top(2) == [{"state": 1, "count": 5, "share": 0.5}, {"state": 2, "count": 3, "share": 0.3}]
    assert [t["state"] for t in usage.top(10)] == [1, 2, 4]  # unused states are not listed


@pytest.mark.parametrize("first_unit_state", [True, False])
def test_training_state_usage_counts_every_unit_with_an_entity(first_unit_state):
    rows = synthetic_rows(10, seed=5)
    tokenizer = tiny_tokenizer(synthetic_rows(20))
    model = tiny_stage_one(tokenizer, "eric", first_unit_state=first_unit_state)
    usage = training_state_usage(model, tokenizer, rows, batch_size=4, per_state=2, progress=False, seed=9)
    batch = StageOneCollator(tokenizer, max_entities=MAX_ENTITIES, seed=9)(rows)
    with_entity = batch["entity_ids"] > 0
    if not first_unit_state:  # the code's setting: unit 1 gets no state
        with_entity[:, 0] = False
    assert usage.units == int(with_entity.sum())  # one gold state per planned unit with an entity
    with torch.no_grad():  # the same states as the model's own forward over the whole set
        direct = model(**batch).state_ids
    assert usage.counts == torch.bincount(direct[direct >= 0], minlength=NUM_STATES).tolist()
    for state, examples in usage.nearest.items():
        assert 1 <= len(examples) <= 2 and usage.counts[state] >= len(examples)
        assert [e.cosine for e in examples] == sorted((e.cosine for e in examples), reverse=True)
        assert all(-1.0001 <= e.cosine <= 1.0001 and e.entity in e.text and e.state == state for e in examples)
    with pytest.raises(ValueError, match="no state space"):
        training_state_usage(tiny_stage_one(tokenizer, "bart"), tokenizer, rows, progress=False)


def test_explorer_lists_states_escapes_text_and_needs_no_network():
    example = UnitExample(2, 0.91, "s1", "A <b>bold</b> title", 0, "<e0> meets <e1> & <e0>.", "<e0>")
    page = explorer_html(StateUsage(4, [0, 0, 3, 1], {2: [example]}), "States")
    assert "id='state-2'" in page and "id='state-3'" in page and "id='state-0'" not in page
    assert page.index("State 2") < page.index("State 3")  # most used first
    assert "<mark>&lt;e0&gt;</mark> meets &lt;e1&gt; &amp; <mark>&lt;e0&gt;</mark>." in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page
    assert "Unused states (2): 0, 1" in page
    assert "http" not in page and "<script" not in page


def test_usage_csv_round_trip_and_plot(tmp_path):
    usage = StateUsage(4, [1, 0, 3, 0])
    rows = read_usage(write_usage(usage, tmp_path / "u.csv"))
    assert [(r["rank"], r["state"], r["count"]) for r in rows] == [(1, 2, 3), (2, 0, 1), (3, 1, 0), (4, 3, 0)]
    assert rows[0]["share"] == 0.75
    assert plot_usage({"ERIC": rows}, tmp_path / "u.png").read_bytes()[:4] == b"\x89PNG"
