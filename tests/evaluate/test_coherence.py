"""Entity coherence on tiny random models: the perturbation, the scores, accuracy by position."""

from __future__ import annotations

import pytest
import torch

from eric.data.collate import StageOneCollator
from eric.evaluate.coherence import (
    GOLD,
    NO_STATES,
    PREDICTED,
    RANDOM,
    CoherenceResult,
    CoherenceScorer,
    entity_coherence,
    plot_coherence,
    read_rows,
    write_rows,
)
from tests.generate.tiny import MAX_ENTITIES, NUM_STATES, one_thread, synthetic_rows, tiny_stage_one, tiny_tokenizer  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")

CRAFTED = {  # unit 1: no earlier entity; unit 2: <e1> -> <e0>; unit 3: <e0> -> <e1>; unit 4: none
    "id": "crafted", "source": "A quiet evening.",
    "target": "<sent> <e0> drives to a cabin. <sent> <e1> meets <e0> at the station. "
              "<sent> <e0> fights <e1>. <sent> At dawn the evil has gone.",
    "unit_entities": [["<e0>"], ["<e1>", "<e0>"], ["<e0>", "<e1>"], []],
}


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer(synthetic_rows(20))


@pytest.fixture(scope="module")
def rows():
    return synthetic_rows(8, seed=4)


def scorer(tokenizer, variant="eric", **options):
    return CoherenceScorer(tiny_stage_one(tokenizer, variant), tokenizer, progress=False, batch_size=4, **options)


def test_the_first_placeholder_of_a_unit_is_replaced_by_an_earlier_entity(tokenizer):
    s = scorer(tokenizer)
    text = s.encode(CRAFTED)
    e0, e1 = tokenizer.convert_tokens_to_ids(["<e0>", "<e1>"])
    assert text.entities == [1, 2, 1, 0]
    cases = s.cases([text])
    assert [(c.unit, c.replacement) for c in cases] == [(1, e0), (2, e1)]
    for case in cases:
        start, end = text.spans[case.unit]
        assert start < case.position < end
        assert text.labels[case.position] in (e0, e1) and text.labels[case.position] != case.replacement
        perturbed = s.perturb(text, case)
        changed = [i for i, (a, b) in enumerate(zip(text.labels, perturbed.labels)) if a != b]
        assert changed == [case.position]  # prefix and rest untouched
        assert perturbed.entities[case.unit] == s.entity_class[case.replacement]
        assert text.entities[case.unit] != perturbed.entities[case.unit]


def test_unit_scores_do_not_depend_on_batching_or_padding(tokenizer, rows):
    s = scorer(tokenizer)
    texts = [s.encode(r) for r in rows[:4]]
    s.predicted_states(texts)
    together = s.unit_logprobs(texts)
    for text, scores in zip(texts, together):
        alone = s.unit_logprobs([text])[0]
        assert alone == pytest.approx(scores, abs=1e-3)
        assert all(v < 0 for v in alone)


def test_a_unit_score_is_the_sum_of_its_token_log_probs(tokenizer):
    s = scorer(tokenizer, variant="bart")
    text = s.encode(CRAFTED)
    scores = s.unit_logprobs([text])[0]
    labels = torch.tensor([text.labels])
    with torch.no_grad():
        logits = s.model(input_ids=torch.tensor([text.source]), labels=labels).logits
    token_lp = torch.log_softmax(logits.float(), -1)[0, torch.arange(labels.shape[1]), labels[0]]
    start, end = text.spans[2]
    assert scores[2] == pytest.approx(float(token_lp[start + 1 : end + 1].sum()), abs=1e-4)
    assert sum(scores) == pytest.approx(float(token_lp[text.spans[0][0] + 1 :].sum()), abs=1e-3)
    assert s.unit_logprobs([text], [2])[0] == pytest.approx([scores[2]], abs=1e-4)  # read only up to unit 2


def test_predicted_states_are_the_models_own_fixed_point(tokenizer, rows):
    s = scorer(tokenizer)
    texts = [s.encode(r) for r in rows[:4]]
    states = s.predicted_states(texts)
    out, _ = s._forward(texts)  # with every unit's state injected, each unit predicts its own again
    for b, unit_states in enumerate(states):
        assert out.predicted_state_ids[b, : len(unit_states)].tolist() == unit_states
        for cls, state in zip(texts[b].entities, unit_states):
            assert (state >= 0) == (cls > 0) and state < NUM_STATES


def test_gold_states_are_the_sentence_encoders_states_of_the_true_text(tokenizer, rows):
    s = scorer(tokenizer)
    first = [{**r, "unit_entities": [found[:1] for found in r["unit_entities"]]} for r in rows[:4]]
    texts = [s.encode(r) for r in first]
    s.gold_states(texts)
    # the training forward with each unit's first placeholder as p_n: the same states
    collator = StageOneCollator(tokenizer, max_entities=MAX_ENTITIES)
    with torch.no_grad():
        gold = s.model(**collator(first)).state_ids
    assert [t.states for t in texts] == [gold[b, : len(t.states)].tolist() for b, t in enumerate(texts)]
    assert len({st for t in texts for st in t.states if st >= 0}) > 1  # not one state for all
    assert [t.states for t in texts] != s.predicted_states(texts)  # another mode, other states


def test_random_states_are_seeded_per_text(tokenizer, rows):
    s = scorer(tokenizer, seed=3)
    text = s.encode(rows[0])
    assert s.random_states(text) == s.random_states(text)
    assert sum(text.entities) > 0  # the text has units with entities, so the seeds can differ
    assert s.random_states(text) != scorer(tokenizer, seed=4).random_states(text)
    assert [st >= 0 for st in s.random_states(text)] == [c > 0 for c in text.entities]


def test_accuracy_by_position_with_counts(tokenizer, rows):
    model = tiny_stage_one(tokenizer, "eric")
    results = entity_coherence(model, tokenizer, rows, "eric", batch_size=4, progress=False)
    assert [r.label for r in results] == ["eric", "eric (random states)"]
    n_cases = len(CoherenceScorer(model, tokenizer, progress=False).cases(
        [CoherenceScorer(model, tokenizer, progress=False).encode(r) for r in rows]))
    for result in results:
        positions = result.by_position()
        assert sum(v["count"] for v in positions.values()) == n_cases > 0
        assert all(0.0 <= v["accuracy"] <= 1.0 for v in positions.values())
        assert min(positions) >= 2  # the first target unit has no earlier entity
        assert 0.0 <= result.accuracy <= 1.0
    again = entity_coherence(model, tokenizer, rows, "eric", batch_size=3, progress=False)
    assert [r.correct for r in again] == [r.correct for r in results]  # seeded, batch-independent


def test_state_modes_follow_the_variant(tokenizer, rows):
    assert [r.label for r in entity_coherence(tiny_stage_one(tokenizer, "eric_no_state"), tokenizer, rows[:3],
                                              "eric_no_state", progress=False)] == ["eric_no_state"]
    from eric.evaluate.coherence import state_modes

    assert state_modes(tiny_stage_one(tokenizer, "eric").config) == [PREDICTED, RANDOM]
    assert state_modes(tiny_stage_one(tokenizer, "eric").config, gold=True) == [PREDICTED, GOLD, RANDOM]
    assert state_modes(tiny_stage_one(tokenizer, "bart").config, gold=True) == [NO_STATES]
    assert state_modes(tiny_stage_one(tokenizer, "bart").config) == [NO_STATES]


def test_rows_round_trip_and_plot(tmp_path):
    result = CoherenceResult("eric")
    for position, right in [(2, True), (2, False), (3, True)]:
        result.add(position, right)
    assert result.by_position() == {2: {"accuracy": 0.5, "count": 2}, 3: {"accuracy": 1.0, "count": 1}}
    assert result.accuracy == pytest.approx(2 / 3)
    rows = read_rows(write_rows([result], tmp_path / "c.csv"))
    assert rows == [{"model": "eric", "position": 2, "accuracy": 0.5, "count": 2},
                    {"model": "eric", "position": 3, "accuracy": 1.0, "count": 1}]
    png = plot_coherence(rows, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _token_logprobs(s, text) -> torch.Tensor:
    labels = torch.tensor([text.labels])
    with torch.no_grad():
        logits = s.model(input_ids=torch.tensor([text.source]), labels=labels).logits
    return torch.log_softmax(logits.float(), -1)[0, torch.arange(labels.shape[1]), labels[0]]


def test_the_event_scoring_leaves_the_swapped_placeholder_out_of_both_versions(tokenizer):
    s, lm = scorer(tokenizer, variant="bart", scoring="event"), scorer(tokenizer, variant="bart")
    s.model = lm.model  # the same weights under both scorings
    text = s.encode(CRAFTED)
    case = s.cases([text])[0]  # unit 2: <e1> -> <e0>
    start, end = text.spans[case.unit]
    for version in (text, s.perturb(text, case)):
        token_lp = _token_logprobs(s, version)
        without = float(token_lp[start + 1 : end + 1].sum() - token_lp[case.position])
        assert s.unit_logprobs([version], [case.unit])[0][0] == pytest.approx(without, abs=1e-4)
        assert lm.unit_logprobs([version], [case.unit])[0][0] == pytest.approx(
            float(token_lp[start + 1 : end + 1].sum()), abs=1e-4)


def test_the_joint_scoring_adds_what_the_planner_pays_for_the_entity(tokenizer):
    model = tiny_stage_one(tokenizer, "eric_no_state")  # a planner, no states: scores need no state passes
    joint = CoherenceScorer(model, tokenizer, progress=False, scoring="joint")
    lm = CoherenceScorer(model, tokenizer, progress=False)
    text = joint.encode(CRAFTED)
    case = joint.cases([text])[0]
    for version in (text, joint.perturb(text, case)):
        out, _ = joint._forward([version])
        planner = torch.log_softmax(out.entity_logits[0, case.unit].float(), -1)[version.entities[case.unit]]
        assert joint.unit_logprobs([version], [case.unit])[0][0] == pytest.approx(
            lm.unit_logprobs([version], [case.unit])[0][0] + float(planner), abs=1e-4)
    bart = tiny_stage_one(tokenizer, "bart")  # no planner: joint is the LM score
    plain = CoherenceScorer(bart, tokenizer, progress=False).unit_logprobs([text])[0]
    assert CoherenceScorer(bart, tokenizer, progress=False, scoring="joint").unit_logprobs([text])[0] == pytest.approx(
        plain, abs=1e-5)


def test_each_case_outcome_is_kept_for_paired_tests(tokenizer, rows):
    model = tiny_stage_one(tokenizer, "bart")
    result = CoherenceScorer(model, tokenizer, progress=False).run(rows, NO_STATES, "bart")
    assert len(result.outcomes) == sum(result.total.values()) > 0
    assert sum(right for _, _, right in result.outcomes) == sum(result.correct.values())
    assert {text for text, _, _ in result.outcomes} <= {str(r["id"]) for r in rows}
    with pytest.raises(ValueError, match="unknown coherence scoring"):
        CoherenceScorer(model, tokenizer, scoring="both")
