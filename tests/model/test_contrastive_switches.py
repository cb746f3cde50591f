"""The switches that decide what L_CL can learn (docs/state-space.md, "Why L_CL stayed at chance"):
which losses train e_n (`event_gradient`) and whether the predictor reads its query directly
(`predictor_residual`)."""

from __future__ import annotations

import pytest
import torch
from huggingface_hub.errors import StrictDataclassError

from eric.config import StateSpaceParams
from eric.model.state_space import StateSpace
from tests.model.conftest import make_batch, tiny_model
from tests.model.test_state_space import _grads


def test_the_dense_codebook_path_sends_l_cl_into_e_n_amplified():
    """Why stopping L_CL at c_n's e_n is not enough: the dense state's gradient reaches e_n
    through the cosines, multiplied by the codebook's Gram matrix (about K/D for random codes)."""
    torch.manual_seed(0)
    space = StateSpace(num_states=64, state_dim=8, gradient="dense")
    e = torch.nn.functional.normalize(torch.randn(5, 8), dim=-1).requires_grad_()
    upstream = torch.randn(5, 8)
    (space(e).states * upstream).sum().backward()
    vectors = space.vectors().detach()
    assert torch.allclose(e.grad, upstream @ (vectors.t() @ vectors), atol=1e-5)
    assert float(e.grad.norm() / upstream.norm()) > 3  # ~ K / D = 8 times the upstream gradient


@pytest.mark.parametrize(
    "mode, lm_reaches, cl_reaches",
    [("all", True, True), ("lm", True, False), ("contrastive", False, True), ("none", False, False)],
)
def test_event_gradient_decides_which_losses_train_the_sentence_encoder(mode, lm_reaches, cl_reaches):
    model, batch = tiny_model(event_gradient=mode, detach_planner_inputs=True), make_batch()
    out = model(**batch)
    lm = _grads(model, out.lm_loss)
    assert (lm("sentence_encoder") > 0) == lm_reaches
    assert lm("state_input") > 0  # the decoder still reads the state
    cl = _grads(model, out.contrastive_loss)
    assert (cl("sentence_encoder") > 0) == cl_reaches
    assert cl("state_space.codebook") > 0 and cl("state_predictor") > 0  # L_CL always trains these


def test_event_gradient_changes_gradients_not_values():
    batch = make_batch()
    outs = [tiny_model(seed=3, event_gradient=mode).eval()(**batch) for mode in ("all", "lm", "none")]
    for out in outs[1:]:
        # e + (s - e).detach() equals s up to rounding
        assert torch.allclose(out.logits, outs[0].logits, atol=1e-5)
        assert torch.allclose(out.contrastive_loss, outs[0].contrastive_loss, atol=1e-5)
        assert torch.equal(out.state_ids, outs[0].state_ids)


def test_residual_predictor_carries_the_planned_entity_without_a_prefix():
    """With no prefix to attend to but one position, the paper's predictor gives every entity
    the same e^_n; the residual one tells them apart."""
    for residual, distinct in ((False, False), (True, True)):
        model = tiny_model(predictor_residual=residual)
        predictor = model.state_predictor
        assert (predictor.query_proj is not None) == residual
        keys, values = predictor.memory(torch.randn(1, 1, 32))
        entities = model.entity_embedding(torch.tensor([[1, 2, 3]]))
        context = torch.zeros(1, 3, 32)
        with torch.no_grad():
            out = predictor(context + entities, keys, values, None)
        spread = float((out[0, 0] - out[0, 1]).abs().max())
        assert (spread > 1e-4) == distinct


def test_the_switches_resolve_from_params_and_the_paper_keeps_its_behaviour():
    paper = StateSpaceParams(recipe="paper").resolved()
    assert paper["event_gradient"] == "all" and paper["predictor_residual"] is False
    over = StateSpaceParams(recipe="paper", event_gradient="lm", predictor_residual=True).resolved()
    assert over["event_gradient"] == "lm" and over["predictor_residual"] is True
    with pytest.raises(StrictDataclassError, match="event_gradient"):
        tiny_model(event_gradient="sometimes")


def test_info_nce_limited_to_a_group_equals_infonce_within_each_group():
    from eric.model import losses

    torch.manual_seed(0)
    anchors = torch.nn.functional.normalize(torch.randn(5, 4), dim=-1)
    positives = torch.nn.functional.normalize(torch.randn(5, 4), dim=-1)
    rows = torch.tensor([0, 0, 1, 1, 1])
    masked = losses.info_nce(anchors, positives, 0.1, allowed=losses.same_text_candidates(rows, rows))
    per_group = [losses.info_nce(anchors[rows == r], positives[rows == r], 0.1) * int((rows == r).sum()) for r in (0, 1)]
    assert float(masked) == pytest.approx(float(sum(per_group) / 5), abs=1e-5)


def test_text_candidates_count_chance_per_anchor_within_its_text():
    batch = make_batch(rows=3, units=(4, 5, 3))
    out = tiny_model(contrastive_candidates="text").train()(**batch)
    per_row = (out.state_ids >= 0).sum(1).float()
    anchors_row = per_row.repeat_interleave(per_row.long())
    assert float(out.contrastive_chance) == pytest.approx(float(anchors_row.log().mean()), abs=1e-5)
    batch_wide = tiny_model().train()(**batch)
    assert float(batch_wide.contrastive_chance) == pytest.approx(float(torch.log(per_row.sum())), abs=1e-5)
    assert torch.isfinite(out.contrastive_loss)


def test_a_blind_predictor_gives_every_unit_one_vector_and_keeps_every_weight_in_the_graph():
    """predictor_input: none is the anchor-blind control: e^_n ignores the prefix and the entity,
    so only the sentence encoder (the targets) can move L_CL; the predictor's other weights get
    a zero gradient, not none (an optimizer that expects a gradient for each still gets one)."""
    model, batch = tiny_model(predictor_input="none", predictor_residual=True), make_batch()
    out = model(**batch)
    found = out.predicted_events[out.state_ids >= 0]
    assert found.shape[0] >= 2 and torch.allclose(found, found[:1].expand_as(found))
    out.contrastive_loss.backward()
    predictor = model.state_predictor
    assert float(predictor.constant.grad.norm()) > 0
    assert predictor.q_proj.weight.grad is not None and float(predictor.q_proj.weight.grad.abs().max()) == 0
    assert StateSpaceParams(recipe="paper").resolved()["predictor_input"] == "prefix"
    sighted = tiny_model(predictor_residual=True)(**batch).predicted_events
    assert not torch.allclose(sighted[0, 0], sighted[0, 1])  # the control differs from the predictor
