"""L_CL over entity candidates (the measure identity cannot pass) and the identity-free target.

Entity candidates of the anchor (text b, unit n, entity p_n): its own positive and those of
the same entity's later units in the same text. Every one carries the same placeholder, so a
critic that only knows which entity a candidate is scores exactly chance, ln(candidates)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from eric.model import losses
from eric.model.modeling_eric import EricOutput
from tests.model.conftest import ENTITIES, make_batch, tiny_model


def test_entity_candidates_are_the_same_entity_from_unit_n_on_in_the_same_text():
    entity_ids = torch.tensor([[1, 2, 1, 1], [1, 1, 0, 2]])
    target = torch.tensor([[True, True, True, False], [True, True, False, True]])
    later = losses.same_entity_later(entity_ids, target)
    assert later[0].tolist() == [True, False, True, False, False, False, False, False]  # (0,0): units 0, 2
    assert later[2].tolist() == [False, False, True, False, False, False, False, False]  # (0,2): itself only
    assert not later[3].any()  # no state: not an anchor
    assert later[4].tolist() == [False] * 4 + [True, True, False, False]  # text 1's entity 1, not text 0's
    assert later[5].tolist() == [False] * 5 + [True, False, False]  # unit 0 is earlier: left out


def _identity(entity_ids: torch.Tensor, dim: int = 8) -> torch.Tensor:
    """A vector per slot that says only which entity it is."""
    return F.one_hot(entity_ids.clamp(min=0), dim).float()


def test_an_identity_only_critic_scores_chance_on_entity_candidates_and_below_it_on_the_batch():
    entity_ids = torch.tensor([[1, 2, 1, 2, 1], [3, 3, 1, 3, 0]])
    target = entity_ids > 0
    vectors = _identity(entity_ids)
    out = EricOutput()
    tiny_model(tau=0.1)._entity_candidates(out, vectors, vectors, losses.same_entity_later(entity_ids, target))
    counts = losses.same_entity_later(entity_ids, target).sum(1)
    scored = counts >= 2
    expected = float(counts[scored].float().log().mean())
    assert float(out.contrastive_entity_chance) == pytest.approx(expected, abs=1e-6)
    assert float(out.contrastive_entity_loss) == pytest.approx(expected, abs=1e-5)  # exactly chance
    batch_wide = losses.info_nce(vectors.flatten(0, 1), vectors.flatten(0, 1), 0.1, valid=target.flatten())
    assert float(batch_wide) < 0.8 * math.log(int(target.sum()))  # identity passes the batch's L_CL


def test_a_critic_that_knows_the_unit_goes_below_chance_on_entity_candidates():
    entity_ids = torch.tensor([[1, 1, 1, 1, 2, 2]])
    target = entity_ids > 0
    torch.manual_seed(0)
    events = F.normalize(torch.randn(1, 6, 8), dim=-1)  # what happens in each unit
    out = EricOutput()
    tiny_model(tau=0.1)._entity_candidates(out, events, events, losses.same_entity_later(entity_ids, target))
    assert float(out.contrastive_entity_loss) < 0.5 * float(out.contrastive_entity_chance)


def test_no_later_unit_of_any_entity_gives_nan_which_the_loop_skips():
    entity_ids = torch.tensor([[1, 2, 3]])
    out = EricOutput()
    vectors = _identity(entity_ids)
    tiny_model()._entity_candidates(out, vectors, vectors, losses.same_entity_later(entity_ids, entity_ids > 0))
    assert math.isnan(float(out.contrastive_entity_loss)) and math.isnan(float(out.contrastive_entity_chance))


def _repeating_batch() -> dict:
    """make_batch with every entity slot set to one entity per row, so entities repeat."""
    batch = make_batch(rows=3, units=(6, 5, 7))
    has = batch["entity_ids"] > 0
    rows = torch.arange(3)[:, None].expand_as(has) + 1
    for b in range(3):
        for n in range(batch["entity_ids"].shape[1]):
            if has[b, n]:
                batch["labels"][b, batch["entity_positions"][b, n]] = ENTITIES[b]
    batch["entity_ids"] = torch.where(has, rows, batch["entity_ids"])
    return batch


def test_every_training_forward_logs_entity_candidate_l_cl():
    out = tiny_model().train()(**_repeating_batch())
    assert torch.isfinite(out.contrastive_entity_loss) and out.contrastive_entity_chance > 0
    assert "contrastive_entity_loss" in out.scalar_terms() and "contrastive_entity_chance" in out.scalar_terms()
    assert out.contrastive_entity_loss.grad_fn is None  # a measure: it trains nothing by itself


def test_entity_candidates_as_l_cl_train_the_predictor_on_the_same_number():
    model = tiny_model(contrastive_candidates="entity", hard_negatives=False).train()
    out = model(**_repeating_batch())
    assert float(out.contrastive_loss.detach()) == pytest.approx(float(out.contrastive_entity_loss), abs=1e-5)
    assert float(out.contrastive_chance) == pytest.approx(float(out.contrastive_entity_chance), abs=1e-5)
    out.contrastive_loss.backward()
    assert model.state_predictor.q_proj.weight.grad.abs().sum() > 0


def _events(model, labels: torch.Tensor, batch: dict) -> torch.Tensor:
    units = batch["entity_ids"] > 0
    positions = torch.where(units, batch["entity_positions"], -1)
    with torch.no_grad():
        return model.unit_events(labels, units, positions)


@pytest.mark.parametrize("target, identity_visible", [("text", True), ("anonymous", False)])
def test_the_anonymous_target_hides_which_placeholder_e_n_is_read_at(target, identity_visible):
    model = tiny_model(event_target=target, event_norm="none").eval()
    batch = make_batch(rows=3, units=(6, 5, 7))
    swapped = batch["labels"].clone()
    is_entity = torch.isin(swapped, torch.tensor(ENTITIES))
    swapped[is_entity] = ENTITIES[0] + (swapped[is_entity] - ENTITIES[0] + 1) % len(ENTITIES)  # every <ek> -> <ek+1>
    changed = (_events(model, swapped, batch) - _events(model, batch["labels"], batch)).abs().max()
    assert (float(changed) > 1e-4) == identity_visible
    words = batch["labels"].clone()
    words[(words >= 20) & (torch.rand(words.shape, generator=torch.Generator().manual_seed(1)) < 0.5)] = 21
    assert float((_events(model, words, batch) - _events(model, batch["labels"], batch)).abs().max()) > 1e-4
