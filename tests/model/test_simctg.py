"""SimCTG: the token-level contrastive loss by hand; the shared architecture suite
(tests/model/architecture_suite.py)."""

from __future__ import annotations

import math

import pytest
import torch

from eric.model.simctg import SimCTGConfig, SimCTGForConditionalGeneration, token_contrastive_loss
from tests.model.architecture_suite import BART_SWITCHES, ArchitectureTests
from tests.model.conftest import make_batch, tiny_config


def tiny_simctg(seed: int = 0, **overrides) -> SimCTGForConditionalGeneration:
    torch.manual_seed(seed)
    base = {k: v for k, v in tiny_config(**BART_SWITCHES).to_dict().items() if k in SimCTGConfig.__dataclass_fields__}
    return SimCTGForConditionalGeneration(SimCTGConfig(**{**base, **overrides}))


def test_contrastive_loss_matches_a_hand_computation():
    s = 1 / math.sqrt(2)
    hidden = torch.tensor([
        [[1.0, 0.0], [0.0, 1.0], [s, s]],  # cosines 0, s, s: hinge max(0, 0.5 - 1 + cos) = s - 0.5 on 4 pairs
        [[2.0, 0.0], [1.0, 0.0], [0.0, 5.0]],  # two valid tokens, cosine 1: hinge 0.5 on 2 pairs
        [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]],  # one token: no pair, left out of the mean
    ])
    valid = torch.tensor([[True, True, True], [True, True, False], [True, False, False]])
    expected = ((4 * (s - 0.5)) / 6 + 0.5) / 2
    assert token_contrastive_loss(hidden, valid, margin=0.5).item() == pytest.approx(expected, abs=1e-6)
    assert token_contrastive_loss(hidden, valid, margin=0.1).item() == pytest.approx((0 + 0.1) / 2, abs=1e-6)
    assert token_contrastive_loss(hidden[2:], valid[2:], margin=0.5) is None


def test_loss_is_lm_plus_the_weighted_contrastive_term():
    batch = make_batch()
    simctg = tiny_simctg(contrastive_weight=0.5)
    out = simctg(**batch)
    expected_cl = token_contrastive_loss(out.decoder_last_hidden_state, batch["labels"] != -100, 0.5)
    assert torch.allclose(out.token_contrastive_loss, expected_cl)
    assert torch.allclose(out.loss, out.lm_loss + 0.5 * expected_cl)
    assert "token_contrastive_loss" in out.loss_terms()
    off = tiny_simctg(contrastive_weight=0.0)(**batch)
    assert torch.allclose(off.loss, off.lm_loss)
    out.loss.backward()  # the contrastive term trains the decoder
    assert simctg.model.decoder.layers[0].fc1.weight.grad.abs().sum() > 0


class TestSimCTGArchitecture(ArchitectureTests):
    kind = "simctg"
    options = {"margin": 0.25}
    option_defaults = {"contrastive_weight": 1.0}
    invalid_options = ({"margin": -1},)
    added_parameters = ()  # a loss, no parameter

    def tiny(self, seed: int = 0, **overrides):
        return tiny_simctg(seed, **overrides)
