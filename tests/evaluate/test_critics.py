"""L_CL of fixed critics (eric/evaluate/critics.py) on a hand-built batch, worked by hand:
the identity critic scores exactly chance on entity candidates and below chance on batch
and text candidates; the candidate sets are the model's own (its chance levels)."""

from __future__ import annotations

import math

import pytest
import torch

from eric.data.collate import StageOneCollator
from eric.evaluate.critics import batch_pairs, candidate_mask, critic_loss, identity
from tests.generate.tiny import MAX_ENTITIES, one_thread, synthetic_rows, tiny_stage_one, tiny_tokenizer  # noqa: F401

E0, E1, E2 = 100, 101, 102  # token ids of <e0> <e1> <e2>
ENTITY_CLASS = {E0: 1, E1: 2, E2: 3}


def _batch() -> dict:
    """Text 0 plans <e0> <e1> <e0> <e0>, unit 1's hard negative is an <e2>; text 1 plans
    <e1> <e1> <e2> and a unit without entity."""
    labels = torch.zeros(2, 12, dtype=torch.long)
    labels[0, 5] = E2
    return {"entity_ids": torch.tensor([[1, 2, 1, 1], [2, 2, 3, 0]]),
            "entity_positions": torch.tensor([[1, 4, 7, 9], [1, 3, 6, -1]]),
            "hard_negative_positions": torch.tensor([[-1, 5, -1, -1], [-1, -1, -1, -1]]),
            "labels": labels}


def _line(which: str) -> tuple[float, float, int]:
    pairs = batch_pairs(_batch(), ["a", "b"], ENTITY_CLASS)
    allowed, counted = candidate_mask(pairs, which)
    return critic_loss(identity(pairs.anchors, pairs.candidates), allowed, counted)


def test_the_pairs_are_the_models_anchors_then_its_hard_negatives():
    pairs = batch_pairs(_batch(), ["a", "b"], ENTITY_CLASS)
    assert [(c.row, c.unit, c.entity) for c in pairs.anchors] == [
        (0, 0, 0), (0, 1, 1), (0, 2, 0), (0, 3, 0), (1, 0, 1), (1, 1, 1), (1, 2, 2)]
    assert [(c.row, c.story, c.unit, c.entity) for c in pairs.negatives] == [(0, "a", 1, 2)]


def test_identity_scores_exactly_chance_on_entity_candidates():
    loss, chance, anchors = _line("entity")
    # text 0: unit 0 against units 0, 2, 3; unit 2 against 2, 3; text 1: unit 0 against 0, 1;
    # the others have no later unit of their entity
    assert anchors == 3 and chance == pytest.approx((math.log(3) + 2 * math.log(2)) / 3, abs=1e-12)
    assert loss == pytest.approx(chance, abs=1e-12)


def test_identity_goes_below_chance_on_batch_and_text_candidates():
    loss, chance, anchors = _line("batch")  # 7 anchors + 1 hard negative
    assert anchors == 7 and chance == pytest.approx(math.log(8))
    # three <e0> and three <e1> candidates for the <e0> and <e1> anchors; <e2>: itself and the negative
    assert loss == pytest.approx((6 * math.log(3) + math.log(2)) / 7, abs=1e-9) and loss < 0.7 * chance
    loss, chance, anchors = _line("text")  # text 0: 4 anchors + its negative; text 1: 3 anchors
    assert chance == pytest.approx((4 * math.log(5) + 3 * math.log(3)) / 7)
    assert loss == pytest.approx((3 * math.log(3) + 2 * math.log(2)) / 7, abs=1e-9) and loss < 0.5 * chance


def test_a_critic_that_ranks_the_positive_first_beats_chance_and_a_reversed_one_does_not():
    pairs = batch_pairs(_batch(), ["a", "b"], ENTITY_CLASS)
    allowed, counted = candidate_mask(pairs, "entity")
    m = len(pairs.anchors)
    right = torch.zeros(m, m + 1, dtype=torch.float64)
    right[:, :m] = 5.0 * torch.eye(m)
    good, chance, _ = critic_loss(right, allowed, counted)
    bad, _, _ = critic_loss(-right, allowed, counted)
    assert good < 0.1 * chance < chance < bad
    with pytest.raises(ValueError, match="unknown candidate set"):
        candidate_mask(pairs, "story")


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("which", ["batch", "text"])
def test_the_candidate_sets_are_the_models(which):
    rows = synthetic_rows(6, seed=2)
    tokenizer = tiny_tokenizer(rows)
    model = tiny_stage_one(tokenizer, "eric", hard_negatives=True,
                           state_space={"contrastive_candidates": which})
    collator = StageOneCollator(tokenizer, 128, 128, max_entities=MAX_ENTITIES, hard_negatives=True, seed=3)
    batch = collator(rows)
    pairs = batch_pairs(batch, [r["id"] for r in rows], collator.entity_class)
    assert pairs.negatives  # the case where the order of the negatives matters
    allowed, counted = candidate_mask(pairs, which)
    with torch.no_grad():
        out = model(**batch)
    # the model's chance is its mean ln(candidates): the same candidates
    chance = allowed[counted].sum(1).double().log().mean()
    assert float(out.contrastive_chance) == pytest.approx(float(chance), abs=1e-5)
    assert int((out.state_ids >= 0).sum()) == len(pairs.anchors)
    # the model's L_CL over entity candidates, logged whatever it trains on: the same candidates
    allowed, counted = candidate_mask(pairs, "entity")
    assert 0 < int(counted.sum()) < len(pairs.anchors)
    chance = allowed[counted].sum(1).double().log().mean()
    assert float(out.contrastive_entity_chance) == pytest.approx(float(chance), abs=1e-5)
