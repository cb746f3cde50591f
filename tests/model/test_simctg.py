"""SimCTG: the token-level contrastive loss by hand, the variant's parameters, save/load, sampling."""

from __future__ import annotations

import math

import pytest
import torch

from eric.config import ModelParams
from eric.data.tokenizer import SpecialTokenIds
from eric.model.registry import architecture, architecture_of
from eric.model.simctg import SimCTGConfig, SimCTGForConditionalGeneration, token_contrastive_loss
from eric.model.variants import build_config
from tests.model.baselines import sample_with_and_without_cache
from tests.model.conftest import ENTITIES, SENT, make_batch, tiny_config, tiny_model

BART_SWITCHES = dict(use_state=False, use_entity=False, use_state_attention=False)


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


def test_loss_is_lm_plus_the_weighted_contrastive_term_and_adds_no_parameters():
    batch = make_batch()
    simctg, bart = tiny_simctg(contrastive_weight=0.5), tiny_model(**BART_SWITCHES)
    assert {n for n, _ in simctg.named_parameters()} == {n for n, _ in bart.named_parameters()}
    out = simctg(**batch)
    expected_cl = token_contrastive_loss(out.decoder_last_hidden_state, batch["labels"] != -100, 0.5)
    assert torch.allclose(out.token_contrastive_loss, expected_cl)
    assert torch.allclose(out.loss, out.lm_loss + 0.5 * expected_cl)
    assert "token_contrastive_loss" in out.loss_terms()
    off = tiny_simctg(contrastive_weight=0.0)(**batch)
    assert torch.allclose(off.loss, off.lm_loss)
    out.loss.backward()  # the contrastive term trains the decoder
    assert simctg.model.decoder.layers[0].fc1.weight.grad.abs().sum() > 0


def test_forward_without_labels_gives_logits_only():
    batch = make_batch()
    out = tiny_simctg()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        decoder_input_ids=batch["labels"].clamp(min=1))
    assert out.loss is None and out.token_contrastive_loss is None and out.logits is not None


def test_save_load_round_trip_through_the_registry(tmp_path):
    model = tiny_simctg(margin=0.3).eval()
    model.save_pretrained(tmp_path)
    cls = architecture_of(tmp_path)
    assert cls is SimCTGForConditionalGeneration is architecture("simctg")
    loaded = cls.from_pretrained(tmp_path).eval()
    assert loaded.config.margin == 0.3
    batch = make_batch()
    a, b = model(**batch), loaded(**batch)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.loss, b.loss)


def test_sampling_with_and_without_the_kv_cache_gives_the_same_tokens():
    cached, full = sample_with_and_without_cache(tiny_simctg().eval(), make_batch(rows=2), max_new_tokens=20,
                                                 do_sample=True, top_p=0.9)
    assert torch.equal(cached.sequences, full.sequences)


def test_variant_builds_from_params_with_its_options():
    params = ModelParams(variants={"simctg": {"kind": "simctg", "options": {"margin": 0.25}}})
    ids = SpecialTokenIds(bos=0, eos=2, pad=1, sent=SENT, entities=ENTITIES + list(range(11, 106)))
    config = build_config(params, "simctg", 200, ids)
    assert isinstance(config, SimCTGConfig) and config.margin == 0.25 and config.contrastive_weight == 1.0
    assert not (config.use_state or config.use_entity or config.use_state_attention)
    with pytest.raises(ValueError, match="margin"):
        build_config(ModelParams(variants={"s": {"kind": "simctg", "options": {"margin": -1}}}), "s", 200, ids)
    with pytest.raises(ValueError, match="takes no options|options are for"):
        ModelParams(variants={"e": {"options": {"margin": 0.5}}})
