"""The state space's options: the five faithful fixes (docs/state-space.md) and the remedies
that live in the module (EMA, entropy penalty, k-means, the event ring buffer)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from eric.config import ModelParams, StateSpaceParams
from eric.model.state_space import StateSpace, kmeans, usage_entropy_penalty, usage_perplexity
from eric.train.engine import parameter_groups
from tests.model.conftest import make_batch, tiny_model


def test_codebook_starts_at_barts_init_std_unless_told_otherwise():
    model = tiny_model()  # init_std 0.02 (BartConfig's default), D = 8
    rows = model.state_space.codebook.detach().norm(dim=-1)
    assert float(rows.mean()) == pytest.approx(0.02 * math.sqrt(8), rel=0.35)
    legacy = tiny_model(codebook_init_std=1.0).state_space.codebook.detach().norm(dim=-1)
    assert float(legacy.mean()) == pytest.approx(math.sqrt(8), rel=0.35)


def _codebook_grad(gradient: str) -> torch.Tensor:
    torch.manual_seed(0)
    space = StateSpace(num_states=12, state_dim=4, gradient=gradient)
    e = F.normalize(torch.randn(3, 4), dim=-1)
    q = space(e)
    (q.states * torch.randn(3, 4)).sum().backward()
    return space.codebook.grad


def test_dense_gradient_reaches_every_code_and_selected_only_the_chosen():
    dense = _codebook_grad("dense")
    assert int((dense.abs().sum(-1) > 0).sum()) == 12  # dead codes move too (the authors' code)
    selected = _codebook_grad("selected")
    assert int((selected.abs().sum(-1) > 0).sum()) <= 3


def test_dense_states_have_the_nearest_codes_value():
    torch.manual_seed(1)
    space = StateSpace(num_states=7, state_dim=5, gradient="dense")
    e = F.normalize(torch.randn(4, 5), dim=-1)
    q = space(e)
    assert torch.allclose(q.states, space.vectors()[q.indices], atol=1e-6)


def test_sentence_encoder_has_its_own_copy_of_the_embeddings():
    model, batch = tiny_model(), make_batch()
    own = model.sentence_encoder.embed_tokens
    assert own is not None and own.weight.data_ptr() != model.model.shared.weight.data_ptr()
    assert torch.equal(own.weight, model.model.shared.weight)  # a copy at the start
    out = model(**batch)
    model.zero_grad()
    out.contrastive_loss.backward()
    assert own.weight.grad is not None and own.weight.grad.abs().sum() > 0
    shared = tiny_model(sentence_encoder_embeddings="shared")
    assert shared.sentence_encoder.embed_tokens is None


def test_resizing_the_vocabulary_resizes_the_sentence_encoders_copy():
    model = tiny_model()
    before = model.sentence_encoder.embed_tokens.weight.detach().clone()
    model.resize_token_embeddings(before.shape[0] + 3)
    after = model.sentence_encoder.embed_tokens.weight
    assert after.shape[0] == before.shape[0] + 3 and torch.equal(after[: before.shape[0]], before)


def test_codebook_and_embeddings_are_not_weight_decayed_unless_asked():
    def decayed(model):
        groups = parameter_groups(model, 0.01)
        names = {id(p): n for n, p in model.named_parameters()}
        return {names[id(p)] for g in groups if g["weight_decay"] > 0 for p in g["params"]}

    names = decayed(tiny_model(decay_weights=True))  # a measured remedy's optimizer (the paper decays nothing)
    assert not any("codebook" in n or "shared" in n or "embed_tokens" in n for n in names)
    assert any("fc1" in n for n in names)  # the rest still decays
    legacy = decayed(tiny_model(decay_weights=True, decay_codebook_and_embeddings=True))
    assert "state_space.codebook" in legacy and "model.shared.weight" in legacy
    assert decayed(tiny_model(decay_weights=False)) == set()  # the authors' optimizer: no decay at all


def test_the_paper_recipe_decays_no_weight_and_the_measured_remedies_keep_their_decay():
    from eric.config import RECIPES

    assert StateSpaceParams(recipe="paper").resolved()["decay_weights"] is False
    assert all(StateSpaceParams(recipe=r).resolved()["decay_weights"] is True for r in RECIPES if r != "paper")
    assert StateSpaceParams(recipe="paper", decay_weights=True).resolved()["decay_weights"] is True  # an override
    assert StateSpaceParams(recipe="auto").resolved("some/bart")["decay_weights"] is False  # auto from a checkpoint


def test_hard_negatives_are_the_default_as_in_the_paper():
    assert ModelParams().hard_negatives is True
    assert tiny_model().config.hard_negatives is True


def test_recipes_resolve_with_overrides_and_paper_is_faithful():
    paper = StateSpaceParams(recipe="paper").resolved()
    assert paper["codebook_gradient"] == "dense" and paper["sentence_encoder_embeddings"] == "own"
    assert paper["codebook_init_std"] is None and paper["decay_codebook_and_embeddings"] is False
    assert paper["state_init"] == "random" and paper["dead_code_steps"] == 0 and paper["entropy_weight"] == 0
    legacy = StateSpaceParams(recipe="legacy").resolved()
    assert legacy["codebook_init_std"] == 1.0 and legacy["codebook_gradient"] == "selected"
    auto = StateSpaceParams()
    assert auto.effective_recipe(None) == "decoupled" and auto.effective_recipe("/models/bart-base") == "paper"
    assert auto.resolved("/models/bart-base") == StateSpaceParams(recipe="paper").resolved()
    mixed = StateSpaceParams(recipe="remedied", entropy_weight=0.0).resolved()
    assert mixed["state_init"] == "kmeans" and mixed["dead_code_steps"] > 0 and mixed["entropy_weight"] == 0


def test_ema_codebook_moves_to_the_mean_of_its_events_without_gradient():
    space = StateSpace(num_states=2, state_dim=2, ema_decay=0.5)
    assert not space.codebook.requires_grad
    with torch.no_grad():
        space.codebook.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    events = F.normalize(torch.tensor([[1.0, 0.2], [1.0, -0.2], [0.1, 1.0]]), dim=-1)
    for _ in range(30):
        space(events)
    expected = F.normalize(events[:2].mean(0), dim=-1)
    assert torch.allclose(space.vectors()[0], expected, atol=1e-4)
    space.eval()
    before = space.codebook.clone()
    space(-events)
    assert torch.equal(space.codebook, before)  # evaluation never updates it


def test_entropy_penalty_is_zero_for_even_use_and_positive_for_collapse():
    even = torch.eye(4) * 10
    assert float(usage_entropy_penalty(even, tau=0.1)) == pytest.approx(0.0, abs=1e-4)
    collapsed = torch.zeros(6, 4)
    collapsed[:, 0] = 1.0
    assert float(usage_entropy_penalty(collapsed, tau=0.1)) == pytest.approx(math.log(4), abs=1e-2)


def test_usage_perplexity_counts_equally_used_states():
    assert usage_perplexity(torch.tensor([5, 5, 5, 5, 0])) == pytest.approx(4.0)
    assert usage_perplexity(torch.tensor([10, 0, 0])) == pytest.approx(1.0)
    assert usage_perplexity(torch.zeros(3)) == 0.0


def test_kmeans_finds_separated_clusters():
    g = torch.Generator().manual_seed(0)
    centers = torch.eye(3)
    points = torch.cat([c + 0.05 * torch.randn(20, 3, generator=g) for c in centers])
    found = kmeans(points, 3, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(found.norm(dim=-1), torch.ones(3), atol=1e-5)
    assert sorted((found @ centers.t()).argmax(-1).tolist()) == [0, 1, 2]
    more = kmeans(points[:2], 5, generator=torch.Generator().manual_seed(1))
    assert more.shape == (5, 3)  # fewer vectors than codes: noisy copies fill the rest


def test_recent_events_keep_the_newest_and_ages_reset_on_use():
    space = StateSpace(num_states=3, state_dim=2, recent_events=4)
    first = F.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), dim=-1)
    space(first)
    assert space.recent_events().shape == (3, 2)
    second = F.normalize(torch.tensor([[-1.0, 0.0], [0.0, -1.0]]), dim=-1)
    space(second)
    assert torch.allclose(space.recent_events(), torch.cat([first[1:], second]))
    used = space.pop_used()
    space.age(used)
    space.age(torch.zeros(3, dtype=torch.bool))
    assert space.steps_since_used.tolist() == [1 if u else 2 for u in used.tolist()]


def test_batch_event_norm_removes_the_direction_all_units_share():
    model, batch = tiny_model(event_norm="batch"), make_batch(rows=6, units=(4, 5, 3))
    model.train()
    shared = torch.zeros(32)
    shared[0] = 50.0  # a large bias every unit's projection carries
    with torch.no_grad():
        model.sentence_encoder.event_proj.bias.copy_(model.sentence_encoder.event_proj.bias + shared[:8])
        plain = tiny_model(event_norm="none")
        plain.load_state_dict(model.state_dict(), strict=False)
    out, base = model(**batch), plain.train()(**batch)
    assert float(out.event_cosine) < 0.5 < float(base.event_cosine)  # without centring: one direction
    assert "sentence_encoder.event_norm.running_mean" in model.state_dict()


def test_the_contrastive_objective_is_learnable_end_to_end():
    """A path check: on one fixed batch, the predictor, sentence encoder and codebook together
    drive L_CL far below chance (a broken gradient path leaves it at chance)."""
    torch.manual_seed(0)
    model = tiny_model(num_states=32)
    batch = make_batch(rows=6, units=(5, 6, 4), unit_len=6)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    for _ in range(80):
        out = model(**batch)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    assert float(out.contrastive_loss.detach()) < 0.6 * float(out.contrastive_chance)


def test_every_state_space_option_reaches_the_config_under_its_own_name():
    """One declaration (issue 26): model.state_space's options are EricConfig's fields, with no
    renaming between them, and EricConfig's defaults are the paper recipe's values."""
    from eric.config import RECIPES
    from eric.model.config import EricConfig
    from eric.model.variants import build_config
    from tests.model.architecture_suite import IDS

    assert set(StateSpaceParams.model_fields) - {"recipe"} == set(RECIPES["paper"])
    assert {k: getattr(EricConfig(), k) for k in RECIPES["paper"]} == RECIPES["paper"]
    for recipe in RECIPES:
        resolved = StateSpaceParams(recipe=recipe).resolved()
        config = build_config(ModelParams(max_entities=5, state_space={"recipe": recipe}), "eric", 200, IDS)
        assert {k: getattr(config, k) for k in resolved} == resolved, recipe


def test_the_predictor_attends_unscaled_as_the_authors_code_or_over_sqrt_d():
    """predictor_scale: none (the paper recipe, the authors' code) weighs the prefix by softmax(q.k);
    sqrt_d (the remedies, as measured) by softmax(q.k / sqrt(D)). By hand on one query."""
    from torch.nn import functional as F

    from eric.model.planner import StatePredictor

    torch.manual_seed(0)
    query, hidden = torch.randn(1, 1, 6), torch.randn(1, 3, 6)
    for scaled, divisor in ((False, 1.0), (True, 2.0)):  # D = 4
        predictor = StatePredictor(d_model=6, state_dim=4, scaled=scaled)
        keys, values = predictor.memory(hidden)
        q = predictor.q_proj(query)[0, 0]
        weights = torch.softmax(keys[0] @ q / divisor, dim=0)
        expected = F.normalize(predictor.out_proj(weights @ values[0]), dim=-1)
        assert torch.allclose(predictor(query, keys, values, None)[0, 0], expected, atol=1e-6)
    paper, decoupled = (StateSpaceParams(recipe=r).resolved()["predictor_scale"] for r in ("paper", "decoupled"))
    assert (paper, decoupled) == ("none", "sqrt_d")
