"""State transitions (the paper's Table 5): pairs, rankings and confidences by hand, the CSV,
the report and the explorer."""

from __future__ import annotations

import pytest
import torch

from eric.data.collate import StageOneCollator
from eric.evaluate.report import ReportInputs, write_report
from eric.evaluate.state_analysis import StateUsage, UnitExample, explorer_html, training_state_usage
from eric.evaluate.state_transitions import (
    Transitions,
    UnitPair,
    ranked,
    read_transitions,
    summary,
    summary_line,
    transitions_markdown,
    unit_pairs,
    write_transitions,
)
from tests.generate.tiny import MAX_ENTITIES, one_thread, synthetic_rows, tiny_stage_one, tiny_tokenizer  # noqa: F401


def unit(entity, n, state, cosine, story="s1", title="One", text=None):
    return UnitExample(state, cosine, story, title, n, text or f"{entity} acts in unit {n}.", entity)


# Text A: <e0> in units 0, 3, 5 with <e1> between (1, 4) and unit 2 without a state; given shuffled.
TEXT_A = [unit("<e0>", 5, 3, 1.0), unit("<e1>", 4, 5, 0.6), unit("<e0>", 0, 3, 0.9), unit("<e1>", 1, 5, 0.8),
          unit("<e0>", 3, 4, 0.5)]
# Text B: <e2> (one unit, no pair) between two units of <e0>.
TEXT_B = [unit("<e0>", 1, 3, 0.7, "s2", "Two"), unit("<e2>", 2, 4, 0.2, "s2", "Two"),
          unit("<e0>", 3, 4, 0.9, "s2", "Two")]
# Text C has text A's id: texts are told apart by add_text, not by id.
TEXT_C = [unit("<e1>", 0, 5, 0.95), unit("<e1>", 1, 5, 0.95)]
TEXT_D = [unit("<e3>", 2, 3, 0.6, "s4", ""), unit("<e3>", 5, 4, 0.5, "s4", "")]


def hand_built() -> Transitions:
    transitions = Transitions()
    for text in (TEXT_A, TEXT_B, TEXT_C, TEXT_D):
        transitions.add_text(text)
    return transitions


def test_pairs_of_one_text_skip_other_entities_and_units_without_state():
    pairs = unit_pairs(TEXT_A)
    assert [(p.entity, p.first, p.second, p.state_from, p.state_to) for p in pairs] == [
        ("<e0>", 0, 3, 3, 4), ("<e0>", 3, 5, 4, 3), ("<e1>", 1, 4, 5, 5)]
    assert [p.confidence for p in pairs] == pytest.approx([0.9 * 0.5, 0.5 * 1.0, 0.8 * 0.6])
    assert pairs[0] == UnitPair("<e0>", "s1", "One", 0, 3, 3, 4, "<e0> acts in unit 0.", "<e0> acts in unit 3.",
                                pytest.approx(0.45))
    assert [(p.entity, p.first, p.second) for p in unit_pairs(TEXT_B)] == [("<e0>", 1, 3)]
    assert unit_pairs([unit("<e0>", 2, 1, 0.5)]) == [] and unit_pairs([]) == []


def test_counts_confidences_and_examples_by_hand():
    rows = hand_built().rows()
    # 3->4: A .9*.5=.45, B .7*.9=.63, D .6*.5=.30; 5->5: A .8*.6=.48, C .95*.95=.9025; 4->3: A .5*1.0
    assert [(r["state_from"], r["state_to"], r["count"]) for r in rows] == [(3, 4, 3), (5, 5, 2), (4, 3, 1)]
    confidences = [(0.45 + 0.63 + 0.30) / 3, (0.48 + 0.9025) / 2, 0.5]
    assert [r["confidence"] for r in rows] == pytest.approx(confidences, abs=1e-6)
    assert [r["share"] for r in rows] == pytest.approx([3 / 6, 2 / 6, 1 / 6], abs=1e-6)  # CSV precision
    examples = rows[0]["examples"]  # the two most confident, units numbered from 1
    assert [(e["story"], e["entity"], e["unit_from"], e["unit_to"]) for e in examples] == [
        ("s2", "<e0>", 2, 4), ("s1", "<e0>", 1, 4)]
    assert [e["confidence"] for e in examples] == pytest.approx([0.63, 0.45])
    assert len(rows[2]["examples"]) == 1
    assert summary(rows) == {"transitions": 6, "pairs": 3, "self_share": pytest.approx(2 / 6)}


def test_rankings_by_frequency_and_by_confidence():
    rows = hand_built().rows()
    pair = lambda r: (r["state_from"], r["state_to"])  # noqa: E731
    assert [pair(r) for r in ranked(rows, "count")] == [(3, 4), (5, 5), (4, 3)]
    assert [pair(r) for r in ranked(rows, "count", n=1)] == [(3, 4)]
    assert [pair(r) for r in ranked(rows, "confidence")] == [(5, 5), (3, 4)]  # 4->3 seen once: left out
    assert [pair(r) for r in ranked(rows, "confidence", min_count=1)] == [(5, 5), (4, 3), (3, 4)]
    tie = [{"state_from": 9, "state_to": 1, "count": 2, "confidence": 0.5},
           {"state_from": 2, "state_to": 7, "count": 2, "confidence": 0.5}]
    assert [pair(r) for r in ranked(tie, "count")] == [(2, 7), (9, 1)]
    with pytest.raises(ValueError, match="count"):
        ranked(rows, "share")


def test_csv_round_trip(tmp_path):
    transitions = hand_built()
    transitions.add_text([unit("<e0>", 0, 7, 0.5, "s,5", 'A "quoted", title', "<e0> says \"hi\",\nthen | runs."),
                          unit("<e0>", 1, 8, 0.5, "s,5", 'A "quoted", title', "Ünïcode <e0>.")])
    rows = transitions.rows()
    path = write_transitions(rows, tmp_path / "a" / "state_transitions.csv")
    assert read_transitions(path) == rows
    assert path.read_text().splitlines()[0].startswith("state_from,state_to,count,share,confidence,ex1_entity")
    assert read_transitions(write_transitions([], tmp_path / "empty.csv")) == []


def test_report_shows_top_transitions_with_examples(tmp_path):
    rows = hand_built().rows()
    inputs = ReportInputs({"eric": {"states_used": 3, "num_states": 8}}, transitions={"eric": rows})
    paths = write_report(inputs, tmp_path)
    markdown = paths["markdown"].read_text()
    section = markdown[markdown.index("## State transitions"):]
    assert "### ERIC" in section and "6 transitions of 3 distinct state pairs; 33.3% stay" in section
    assert "| 3 → 4 | 3 | 50.0 | 0.460 | **&lt;e0&gt;** acts in unit 1. → **&lt;e0&gt;** acts in unit 3. " \
           "(Two 2→4, conf. 0.630)" in section
    assert "Highest transition confidence (pairs seen at least 2 times)" in section
    by_confidence = section[section.index("Highest"):]
    assert by_confidence.index("| 5 → 5 | 2 |") < by_confidence.index("| 3 → 4 |")
    assert "| 4 → 3 |" not in by_confidence  # seen once
    assert "| 4 → 3 | 1 |" in section and "(s4 3→6" not in section  # text D: 3->4's third example
    page = paths["html"].read_text()
    assert "<h2>State transitions (as the paper's Table 5)</h2>" in page
    assert "<mark>&lt;e0&gt;</mark><sub>3</sub> acts in unit 1." in page and "http" not in page
    plain = write_report(ReportInputs({"bart": {}}), tmp_path / "plain")
    assert "State transitions" not in plain["markdown"].read_text() + plain["html"].read_text()


def test_markdown_escapes_table_breakers_and_reports_no_transitions():
    transitions = Transitions()
    transitions.add_text([unit("<e0>", 0, 1, 0.5, text="a | b <i>"), unit("<e0>", 1, 1, 0.5)])
    table = transitions_markdown(transitions.rows())
    assert "**&lt;e0&gt;** acts" in table and "a \\| b &lt;i&gt;" in table and "<i>" not in table
    assert summary_line([]) == "No transitions: no entity has a state in two units of one text."
    assert transitions_markdown([]).count("none") == 2


def test_explorer_lists_transitions_linked_to_states():
    usage = StateUsage(8, [0, 0, 0, 4, 3, 2, 0, 0], transitions=hand_built())
    page = explorer_html(usage, "States")
    assert page.index("<h2>State transitions</h2>") < page.index("id='state-3'")
    assert "<a href='#state-5'>5</a> → <a href='#state-5'>5</a>" in page
    assert "<mark>&lt;e1&gt;</mark><sub>5</sub> acts in unit 0." in page  # text C's example, the most confident
    assert "6 transitions of 3 distinct state pairs" in page


@pytest.mark.usefixtures("one_thread")
def test_training_state_usage_counts_each_entitys_successive_states():
    rows = synthetic_rows(8, seed=3)
    tokenizer = tiny_tokenizer(synthetic_rows(20))
    model = tiny_stage_one(tokenizer, "eric")
    usage = training_state_usage(model, tokenizer, rows, batch_size=3, per_state=1, progress=False, seed=9)
    batch = StageOneCollator(tokenizer, max_entities=MAX_ENTITIES, seed=9)(rows)
    with torch.no_grad():
        state_ids = model(**batch).state_ids
    expected: dict[tuple[int, int], int] = {}
    for b in range(len(rows)):  # by hand: each entity's states in unit order, successive pairs
        for entity in batch["entity_ids"][b].unique().tolist():
            states = [int(s) for s, e in zip(state_ids[b], batch["entity_ids"][b]) if e == entity and s >= 0]
            for pair in zip(states, states[1:]):
                expected[pair] = expected.get(pair, 0) + 1
    rows_out = usage.transitions.rows()
    assert {(r["state_from"], r["state_to"]): r["count"] for r in rows_out} == expected
    assert sum(expected.values()) > 0
    for r in rows_out:
        for ex in r["examples"]:
            assert ex["unit_from"] < ex["unit_to"] and ex["entity"] in ex["text_from"] and ex["entity"] in ex["text_to"]
            assert -1.0001 <= ex["confidence"] <= 1.0001
