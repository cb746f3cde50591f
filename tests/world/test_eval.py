"""EntityWorld in evaluate and report, on a tiny random model: checker-decided coherence,
learned vs true states, the checker over samples, the report's EntityWorld table."""

from __future__ import annotations

import pytest

from eric.data.examples import stage_one_target
from eric.evaluate.io import deanonymize
from eric.evaluate.report import ReportInputs, display_name, write_report
from eric.evaluate.world_metrics import (
    WORLD_HEADER,
    WorldCoherenceScorer,
    focal_rows,
    sample_checks,
    state_agreement,
    world_coherence,
    world_rows,
)
from eric.world.checker import Replay
from eric.world.corpus import stage_one_row
from eric.world.generate import generate_stories
from tests.generate.tiny import NUM_STATES, one_thread, tiny_stage_one, tiny_tokenizer  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def rows():
    return [stage_one_row(s) for s in generate_stories(seed=1, count=6, cast=(3, 5), events=6)]


@pytest.fixture(scope="module")
def tokenizer(rows):
    return tiny_tokenizer(rows)


def test_every_coherence_case_is_a_swap_the_checker_rejects(rows, tokenizer):
    scorer = WorldCoherenceScorer(tiny_stage_one(tokenizer, "eric"), tokenizer, rows, progress=False, batch_size=4)
    texts = [scorer.encode(r) for r in rows]
    cases = scorer.cases(texts)
    assert cases
    for case in cases:
        row = rows[case.text]
        token = tokenizer.convert_ids_to_tokens(case.replacement)
        assert token in {e for unit in row["unit_entities"][: case.unit] for e in unit}  # an earlier entity
        replay = Replay(row["source"])
        for unit in row["units"][: case.unit]:
            replay.step(unit)
        original = row["units"][case.unit]
        first = row["unit_entities"][case.unit][0]
        assert replay.peek(original).violations == ()
        assert replay.peek(original.replace(first, token, 1)).violations  # the swap breaks a rule


def test_world_coherence_scores_every_case_with_predicted_and_random_states(rows, tokenizer):
    model = tiny_stage_one(tokenizer, "eric")
    results = world_coherence(model, tokenizer, rows, "eric", progress=False, batch_size=4)
    cases = WorldCoherenceScorer(model, tokenizer, rows, progress=False).cases(
        [WorldCoherenceScorer(model, tokenizer, rows, progress=False).encode(r) for r in rows])
    assert [r.label for r in results] == ["eric", "eric (random states)"]
    assert all(sum(r.total.values()) == len(cases) for r in results)
    assert all(0 <= r.accuracy <= 1 for r in results)


def test_state_agreement_reads_one_state_per_focal_unit(rows, tokenizer):
    assert all(units == [[f] for f in r["world_focal"]] for units, r in
               zip((f["unit_entities"] for f in focal_rows(rows)), rows))
    out = state_agreement(tiny_stage_one(tokenizer, "eric"), tokenizer, rows, batch_size=4, progress=False)
    assert out["units"] == sum(len(r["units"]) for r in rows)
    assert 1 <= out["states_used"] <= NUM_STATES
    assert 0 <= out["nmi"] <= 1 and 0 < out["purity"] <= 1
    assert set(out["by_label"]) == {"event_condition", "event", "condition", "entity"}


def test_sample_checks_accept_gold_texts_and_count_a_broken_one(rows):
    samples = []
    for r in rows:
        named = deanonymize(r["target"], r["mentions"])
        samples.append({"input": r["source"], "stage_one": r["target"], "final_text": named, "reference": named})
    broken = dict(samples[0], stage_one=stage_one_target(["<e0> traveled to the lagoon."]))
    out = sample_checks([*samples, broken])
    assert out["reference"]["violations"] == 0 and out["reference"]["parse_rate"] == 1.0
    assert out["final"]["violation_rate"] == 0.0
    assert out["stage_one"]["by_rule"] == {"unknown_place": 1}
    assert out["stage_one"]["clean_stories"] == pytest.approx(len(rows) / (len(rows) + 1))


def test_the_report_has_an_entityworld_table_with_a_truth_row(tmp_path):
    checks = {"parse_rate": 0.5, "violation_rate": 0.25, "state_violation_rate": 0.125, "clean_stories": 0.1}
    truth = {"parse_rate": 1.0, "violation_rate": 0.0, "state_violation_rate": 0.0, "clean_stories": 1.0}
    metrics = {"eric": {"coherence": {"eric": {"accuracy": 0.7}},
                        "world": {"stage_one": checks, "final": checks, "reference": truth,
                                  "states": {"nmi": 0.123, "purity": 0.4, "states_used": 9}}},
               "bart": {"world": {"stage_one": checks, "final": checks, "reference": truth}}}
    rows = world_rows(metrics, display_name)
    assert rows[0] == ["ERIC", "50.0", "0.250", "0.125", "10.0", "50.0", "0.250", "0.125", "10.0", "70.0", "0.123",
                       "40.0", "9"]
    assert all(len(row) == len(WORLD_HEADER) for row in rows)
    assert rows[1][0] == "BART" and rows[1][-3:] == ["–", "–", "–"]
    assert rows[2][:9] == ["Truth", "–", "–", "–", "–", "100.0", "0.000", "0.000", "100.0"]
    paths = write_report(ReportInputs(metrics), tmp_path)
    text = paths["markdown"].read_text()
    assert "## EntityWorld" in text and "| ERIC | 50.0 | 0.250 | 0.125 |" in text
    assert "EntityWorld" in paths["html"].read_text()
    assert world_rows({"bart": {}}, display_name) == []
