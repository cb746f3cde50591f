"""The objectives: InfoNCE against a hand computation, the entity loss mask, the total."""

from __future__ import annotations

import math

import pytest
import torch

from eric.model import losses
from tests.model.conftest import make_batch, tiny_model


def test_info_nce_on_three_examples_equals_the_hand_computation():
    anchors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    positives = torch.tensor([[0.8, 0.6], [0.0, 1.0], [-1.0, 0.0]])
    tau = 0.5
    # dot products a_i . p_j, row by row:
    #   a1: 0.8, 0.0, -1.0    a2: 0.6, 1.0, 0.0    a3: 0.96, 0.8, -0.6
    # /tau, exp:   a1: 4.953, 1, 0.1353    a2: 3.320, 7.389, 1    a3: 6.821, 4.953, 0.3012
    # -log(pos/sum): 0.2064, 0.4603, 3.6913 -> mean 1.4527
    rows = [[0.8, 0.0, -1.0], [0.6, 1.0, 0.0], [0.96, 0.8, -0.6]]
    by_hand = 0.0
    for i, dots in enumerate(rows):
        by_hand -= math.log(math.exp(dots[i] / tau) / sum(math.exp(d / tau) for d in dots))
    by_hand /= 3
    assert by_hand == pytest.approx(1.4527, abs=1e-4)
    assert float(losses.info_nce(anchors, positives, tau)) == pytest.approx(by_hand, abs=1e-6)


def test_extra_negatives_join_every_denominator():
    anchors = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    positives = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    hard = torch.tensor([[0.6, 0.8]])
    tau = 1.0
    expected = -0.5 * (
        math.log(math.e / (math.e + 1 + math.exp(0.6))) + math.log(math.e / (1 + math.e + math.exp(0.8)))
    )
    assert float(losses.info_nce(anchors, positives, tau, hard)) == pytest.approx(expected, abs=1e-6)


def test_empty_contrastive_and_entity_losses_are_zero_and_differentiable():
    anchors = torch.zeros(0, 4, requires_grad=True)
    zero = losses.info_nce(anchors, torch.zeros(0, 4), 0.1)
    assert float(zero.detach()) == 0.0 and zero.requires_grad
    logits = torch.randn(2, 3, 6, requires_grad=True)
    none = torch.zeros(2, 3, dtype=torch.bool)
    assert float(losses.entity_loss(logits, torch.zeros(2, 3, dtype=torch.long), none).detach()) == 0


def test_joint_representation_is_normalized_sum():
    e, s = torch.tensor([[3.0, 0.0]]), torch.tensor([[0.0, 4.0]])
    assert torch.allclose(losses.joint_representation(e, s), torch.tensor([[0.6, 0.8]]))


def test_total_loss_weighs_the_separate_terms():
    batch = make_batch()
    model = tiny_model(lambda_entity=0.5, lambda_contrastive=2.0)
    out = model(**batch)
    total = out.lm_loss + 0.5 * out.entity_loss + 2.0 * out.contrastive_loss
    assert torch.allclose(out.loss, total)
    forward_terms = {"loss", "lm_loss", "entity_loss", "contrastive_loss", "codebook_usage", "contrastive_chance",
                     "event_cosine", "contrastive_entity_loss", "contrastive_entity_chance"}
    assert set(out.loss_terms()) == forward_terms
    model.finish_output(out, logged=True)  # a logged row adds the e_n's effective rank (an SVD: outside the forward)
    terms = out.loss_terms()
    assert set(terms) == forward_terms | {"event_rank"}
    # the entity-candidate terms are NaN where no entity comes back (tests/model/test_entity_candidates.py)
    assert all(math.isfinite(v) for k, v in terms.items() if not k.startswith("contrastive_entity"))


def test_entropy_penalty_joins_the_total_with_its_weight():
    batch = make_batch()
    model = tiny_model(entropy_weight=0.3)
    out = model(**batch)
    assert 0 < out.state_entropy_loss.item() <= math.log(model.config.num_states)  # log K - H, H < log K
    total = out.lm_loss + out.entity_loss + out.contrastive_loss + 0.3 * out.state_entropy_loss
    assert torch.allclose(out.loss, total)
    assert tiny_model()(**batch).state_entropy_loss is None  # off by default (the paper has none)


def test_contrastive_chance_counts_anchors_and_hard_negatives():
    batch = make_batch()
    out = tiny_model(hard_negatives=False)(**batch)
    anchors = int((out.state_ids >= 0).sum())
    assert math.isclose(float(out.contrastive_chance), math.log(anchors), rel_tol=1e-6)


def test_event_spread_of_identical_and_orthogonal_vectors():
    every = lambda m: torch.ones(m, dtype=torch.bool)  # noqa: E731
    same = torch.nn.functional.normalize(torch.ones(4, 3), dim=-1)
    cosine, rank = losses.event_cosine(same, every(4)), losses.effective_rank(same, every(4))
    assert math.isclose(float(cosine), 1.0, rel_tol=1e-5) and math.isclose(float(rank), 1.0, rel_tol=1e-4)
    cosine, rank = losses.event_cosine(torch.eye(3), every(3)), losses.effective_rank(torch.eye(3), every(3))
    assert abs(float(cosine)) < 1e-6 and math.isclose(float(rank), 3.0, rel_tol=1e-5)
    one = torch.eye(3)[:1]
    assert math.isnan(float(losses.event_cosine(one, every(1)))) and math.isnan(float(losses.effective_rank(one, every(1))))
    padded = torch.cat([torch.eye(3)[:2], torch.randn(2, 3), torch.eye(3)[2:]])  # masked rows change nothing
    valid = torch.tensor([True, True, False, False, True])
    assert abs(float(losses.event_cosine(padded, valid))) < 1e-6
    assert math.isclose(float(losses.effective_rank(padded, valid)), 3.0, rel_tol=1e-5)


def test_entity_loss_covers_planned_units_only():
    batch = make_batch()
    model = tiny_model()
    out = model(**batch)
    planned = batch["entity_ids"] >= 0
    expected = torch.nn.functional.cross_entropy(out.entity_logits[planned], batch["entity_ids"][planned])
    assert torch.allclose(out.entity_loss, expected)
    code = tiny_model(first_unit_state=False)(**batch)
    later = planned.clone()
    later[:, 0] = False
    expected = torch.nn.functional.cross_entropy(code.entity_logits[later], batch["entity_ids"][later])
    assert torch.allclose(code.entity_loss, expected)
