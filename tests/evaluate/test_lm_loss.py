"""The validation LM loss with the model's own states (eric/evaluate/lm_loss.py): equal to the
gold-state one when the predictor returns the gold states, a fixed point of the model's
predictions otherwise, and a per-token mean whatever the batching."""

from __future__ import annotations

import pytest
import torch

from eric.data.collate import StageOneCollator
from eric.evaluate.coherence import CoherenceScorer
from eric.evaluate.lm_loss import validation_lm_loss
from eric.evaluate.state_analysis import gold_states
from tests.generate.tiny import MAX_ENTITIES, one_thread, synthetic_rows, tiny_stage_one, tiny_tokenizer  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")
BATCHES = [[0, 1, 2], [3, 4]]


@pytest.fixture(scope="module")
def setup():
    rows = synthetic_rows(5, seed=6)
    tokenizer = tiny_tokenizer(synthetic_rows(20))
    return rows, tokenizer, StageOneCollator(tokenizer, max_entities=MAX_ENTITIES, hard_negatives=True, seed=2)


class Stub:
    """The model with its predictor replaced: predicted ids from `ids(model, batch)`."""

    def __init__(self, model, ids):
        self.model, self.ids, self.config, self.device = model, ids, model.config, model.device

    def eval(self):
        return self

    def __call__(self, **batch):
        out = self.model(**batch)
        out.predicted_state_ids = self.ids(self.model, batch)
        return out


def test_a_predictor_that_returns_the_gold_states_gives_the_gold_state_loss(setup):
    rows, tokenizer, collator = setup
    model = tiny_stage_one(tokenizer, "eric")
    out = validation_lm_loss(Stub(model, lambda m, batch: gold_states(m, batch)[0]), collator, rows, BATCHES)
    assert out["lm_loss_predicted_states"] == pytest.approx(out["lm_loss_gold_states"], abs=1e-5)
    assert out["lm_loss_state_passes"] == 1 and out["lm_loss_unsettled_batches"] == 0
    # the real predictor's states are other states: another loss
    own = validation_lm_loss(model, collator, rows, BATCHES)
    assert own["lm_loss_gold_states"] == out["lm_loss_gold_states"]
    assert abs(own["lm_loss_predicted_states"] - own["lm_loss_gold_states"]) > 1e-3


def test_the_predicted_states_are_those_predicted_unit_by_unit(setup):
    rows, tokenizer, collator = setup
    rows = [{**r, "unit_entities": [found[:1] for found in r["unit_entities"]]} for r in rows]  # p_n: the first
    model = tiny_stage_one(tokenizer, "eric")
    with torch.no_grad():
        model.state_input.weight.mul_(10.0)  # states that move the predictions: more than one pass
    seen = []

    def record(m, batch):  # the model's own predictions; keeps the states each pass was given
        seen.append(batch.get("state_ids"))
        return m(**batch).predicted_state_ids

    out = validation_lm_loss(Stub(model, record), collator, rows, [list(range(5))])
    assert out["lm_loss_unsettled_batches"] == 0 and 1 < out["lm_loss_state_passes"] <= 8  # units + 1
    # the coherence scorer's states: unit n predicted reading the text only up to unit n
    scorer = CoherenceScorer(model, tokenizer, progress=False)
    one_by_one = scorer.predicted_states([scorer.encode(r) for r in rows])
    final = seen[-1]
    assert [final[b, : len(states)].tolist() for b, states in enumerate(one_by_one)] == one_by_one
    assert not torch.equal(final, seen[1])  # the first pass's predictions (from gold states) were not all kept


def test_states_that_never_settle_are_counted(setup):
    rows, tokenizer, collator = setup
    draws = torch.Generator().manual_seed(0)
    flip = lambda m, batch: torch.randint(0, 16, batch["entity_ids"].shape, generator=draws)  # noqa: E731
    out = validation_lm_loss(Stub(tiny_stage_one(tokenizer, "eric"), flip), collator, rows, BATCHES)
    assert out["lm_loss_unsettled_batches"] == 2


def test_a_model_without_states_gives_its_per_token_lm_loss_whatever_the_batching(setup):
    rows, tokenizer, collator = setup
    model = tiny_stage_one(tokenizer, "bart")
    out = validation_lm_loss(model, collator, rows, [[0], [1, 2, 3, 4]])
    assert set(out) == {"lm_loss", "lm_loss_texts", "lm_loss_tokens"} and out["lm_loss_texts"] == 5
    batch = collator(rows)
    with torch.no_grad():
        whole = model(**batch).lm_loss  # one batch: the mean over every target token
    assert out["lm_loss"] == pytest.approx(float(whole), abs=1e-4)
    assert out["lm_loss_tokens"] == int((batch["labels"] != -100).sum())
