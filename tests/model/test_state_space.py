"""The state space and what each loss trains.

Documented gradient routes (eric/model/state_space.py):
- L_LM reaches the sentence encoder through the straight-through s_n, never the codebook;
- the codebook learns only through L_CL (c_n = normalize(e_n + s_n));
- L_Ent trains the planner (and, paper default, the decoder and through it the sentence
  encoder; not with detach_planner_inputs).
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from eric.model.state_space import StateSpace
from tests.model.conftest import make_batch, tiny_model


def test_nearest_state_is_the_highest_cosine_and_values_pass_straight_through():
    torch.manual_seed(0)
    space = StateSpace(num_states=6, state_dim=4)
    e = F.normalize(torch.randn(5, 4), dim=-1).requires_grad_()
    q = space(e)
    cosines = e.detach() @ F.normalize(space.codebook.detach(), dim=-1).t()
    assert torch.equal(q.indices, cosines.argmax(-1))
    assert torch.allclose(q.straight_through, q.states)
    upstream = torch.randn(5, 4)
    (q.straight_through * upstream).sum().backward()
    assert torch.allclose(e.grad, upstream)  # gradient copied to e
    assert space.codebook.grad is None  # the straight-through path does not train the codebook
    q.states.sum().backward()
    assert space.codebook.grad is not None and space.codebook.grad.abs().sum() > 0


@pytest.mark.parametrize("gradient", ["dense", "selected"])
def test_generation_lookup_gives_the_quantizer_ids_and_states(gradient):
    """Generation quantizes by nearest + lookup (no training arithmetic): same ids, same values."""
    torch.manual_seed(0)
    space = StateSpace(num_states=16, state_dim=8, gradient=gradient).eval()
    e = F.normalize(torch.randn(40, 8), dim=-1)
    q = space(e, counted=False)
    ids = space.nearest(e)
    assert torch.equal(ids, q.indices)
    torch.testing.assert_close(space.lookup(ids), q.states, rtol=0, atol=1e-6)


def test_usage_counts_accumulate_only_in_training():
    space = StateSpace(num_states=4, state_dim=3)
    e = F.normalize(torch.randn(7, 3), dim=-1)
    q = space(e)
    assert int(space.usage_counts.sum()) == 7
    assert torch.equal(space.usage_counts, torch.bincount(q.indices, minlength=4))
    space.eval()
    space(e)
    assert int(space.usage_counts.sum()) == 7
    space.reset_usage()
    assert int(space.usage_counts.sum()) == 0


def _grads(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)
    def total(prefix):
        grads = [p.grad for n, p in model.named_parameters() if n.startswith(prefix) and p.grad is not None]
        return sum(float(g.abs().sum()) for g in grads)
    return total


def test_each_loss_trains_what_is_documented():
    model, batch = tiny_model(), make_batch()
    out = model(**batch)
    lm = _grads(model, out.lm_loss)
    assert lm("sentence_encoder.layers") > 0  # through s_n (straight-through)
    assert lm("state_input") > 0
    assert lm("state_space.codebook") == 0
    assert lm("state_predictor") == 0 and lm("entity_planner") == 0

    cl = _grads(model, out.contrastive_loss)
    assert cl("state_space.codebook") > 0
    assert cl("sentence_encoder.layers") > 0 and cl("state_predictor") > 0
    assert cl("model.decoder.layers") > 0  # paper: all parts train jointly

    ent = _grads(model, out.entity_loss)
    assert ent("entity_planner") > 0 and ent("model.decoder.layers") > 0
    assert ent("state_space.codebook") == 0
    assert ent("sentence_encoder.layers") > 0  # the planner reads decoder states that read earlier s_n


def test_detached_planner_inputs_keep_unit_losses_out_of_the_decoder():
    model, batch = tiny_model(detach_planner_inputs=True), make_batch()
    out = model(**batch)
    ent = _grads(model, out.entity_loss)
    assert ent("entity_planner") > 0 and ent("model.decoder.layers") == 0 and ent("sentence_encoder") == 0
    cl = _grads(model, out.contrastive_loss)
    assert cl("state_predictor") > 0 and cl("model.decoder.layers") == 0


def test_codebook_usage_and_state_ids_describe_the_gold_units():
    model, batch = tiny_model(), make_batch()
    out = model(**batch)
    has_entity = batch["entity_ids"] > 0
    assert torch.equal(out.state_ids >= 0, has_entity)
    assert torch.equal(out.predicted_state_ids >= 0, has_entity)
    used = out.state_ids[has_entity].unique().numel()
    assert float(out.codebook_usage) == pytest.approx(used / model.config.num_states)
    assert int(model.state_space.usage_counts.sum()) == int(has_entity.sum())
