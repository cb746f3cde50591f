"""Ablation switches remove exactly their modules; variants build from params; +3% at bart-base;
ERIC and its plain-BART variant run the shared architecture suite (tests/model/architecture_suite.py)."""

from __future__ import annotations

import math

import pytest
import torch
from huggingface_hub.errors import StrictDataclassError
from transformers import BartConfig, BartForConditionalGeneration

from eric.config import ModelParams
from eric.data.tokenizer import SpecialTokenIds
from eric.model import EricForConditionalGeneration
from eric.model.variants import build_config
from tests.model.architecture_suite import BART_SWITCHES, ArchitectureTests
from tests.model.conftest import ENTITIES, SENT, make_batch, tiny_config, tiny_model

STATE_ATTENTION = ("model.decoder.layers.{}.state_attn.", "model.decoder.layers.{}.state_attn_layer_norm.")
STATE = ("state_input.", "state_space.", "state_predictor.", "sentence_encoder.")
ENTITY = ("entity_planner.",)

SWITCHES = {
    "eric_no_state_attention": (dict(use_state_attention=False), STATE_ATTENTION),
    "eric_no_state": (dict(use_state=False), STATE),
    "eric_no_state_no_entity": (dict(use_state=False, use_entity=False), STATE + ENTITY),
    "bart": (dict(use_state=False, use_entity=False, use_state_attention=False), STATE + ENTITY + STATE_ATTENTION),
}


def _names(model) -> set[str]:
    return {n for n, _ in model.named_parameters()}


def _removed_by(prefixes, layers=2) -> callable:
    expanded = [p.format(i) for p in prefixes for i in range(layers)] if prefixes else []
    return lambda name: any(name.startswith(p) for p in expanded)


@pytest.mark.parametrize("variant", sorted(SWITCHES))
def test_each_switch_removes_exactly_its_modules_and_still_trains(variant):
    switches, prefixes = SWITCHES[variant]
    full, ablated = tiny_model(), tiny_model(**switches)
    removed = _names(full) - _names(ablated)
    is_removed = _removed_by(prefixes)
    assert removed == {n for n in _names(full) if is_removed(n)}
    assert removed and _names(ablated) <= _names(full)
    expected_count = sum(p.numel() for n, p in full.named_parameters() if n not in removed)
    assert sum(p.numel() for p in ablated.parameters()) == expected_count

    out = ablated(**make_batch())
    out.loss.backward()
    assert math.isfinite(float(out.loss.detach()))
    assert (out.contrastive_loss is None) == (not ablated.config.use_state)
    assert (out.entity_loss is None) == (not ablated.config.use_entity)


def test_all_switches_off_is_plain_bart():
    config = tiny_config(use_state=False, use_entity=False, use_state_attention=False)
    eric = EricForConditionalGeneration(config)
    bart = BartForConditionalGeneration(BartConfig(**{k: getattr(config, k) for k in (
        "vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
        "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings")}))
    assert _names(eric) == _names(bart)
    assert sum(p.numel() for p in eric.parameters()) == sum(p.numel() for p in bart.parameters())
    # same weights, same logits: the decoder is BART's
    eric.load_state_dict(bart.state_dict(), strict=False)
    eric.eval(), bart.eval()
    batch = make_batch()
    ours = eric(**batch).logits
    theirs = bart(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).logits
    torch.testing.assert_close(ours, theirs)


def test_use_state_without_entities_is_refused():
    with pytest.raises(StrictDataclassError, match="use_state needs use_entity"):
        tiny_config(use_entity=False)


IDS = SpecialTokenIds(bos=0, eos=2, pad=1, sent=SENT, entities=ENTITIES)


@pytest.mark.parametrize("variant", ["eric", "eric_no_state_attention", "eric_no_state",
                                     "eric_no_state_no_entity", "bart", "seq2seq"])
def test_params_variants_build_configs(variant):
    params = ModelParams(size="tiny", max_entities=len(ENTITIES), hard_negatives=True, entity_temperature=1.2)
    config = build_config(params, variant, vocab_size=64, ids=IDS)
    switches = params.variants[variant]
    assert (config.use_state_attention, config.use_state, config.use_entity) == (
        switches.state_attention, switches.state, switches.entity)
    assert config.d_model == 256 and config.decoder_layers == 3 and config.decoder_ffn_dim == 1024
    assert config.hard_negatives and config.entity_temperature == 1.2 and config.sent_token_id == SENT


def test_unknown_variant_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown variant"):
        build_config(ModelParams(max_entities=5), "eric_v2", 64, IDS)


def test_bart_base_size_overhead_is_about_three_percent():
    ids = SpecialTokenIds(bos=0, eos=2, pad=1, sent=50265, entities=list(range(50266, 50366)))
    config = build_config(ModelParams(size="base"), "eric", vocab_size=50366, ids=ids)
    with torch.device("meta"):
        eric = EricForConditionalGeneration(config)
        bart = BartForConditionalGeneration(BartConfig(vocab_size=50366, d_model=768, encoder_layers=6,
                                                       decoder_layers=6, encoder_attention_heads=12,
                                                       decoder_attention_heads=12, encoder_ffn_dim=3072,
                                                       decoder_ffn_dim=3072))
    inference = sum(p.numel() for n, p in eric.named_parameters() if not n.startswith("sentence_encoder."))
    ratio = inference / sum(p.numel() for p in bart.parameters())
    assert 1.01 < ratio <= 1.05


def test_parameter_counts_of_the_baselines_at_a_preset_size():
    from eric.model.variants import parameter_counts

    counts = parameter_counts({"bart": {"state_attention": False, "state": False, "entity": False},
                               "simctg": {"kind": "simctg"}, "hint": {"kind": "hint"},
                               "tied": {"kind": "plan_ahead", "options": {"tie_plan_head": True}},
                               "own": {"kind": "plan_ahead"}}, size="tiny", vocab_size=1000)
    assert counts["simctg"] == counts["bart"]  # SimCTG adds a loss, no parameter
    assert counts["hint"] == counts["bart"] + 2 * (256 * 256 + 1)  # two bilinear heads at d_model 256
    assert counts["bart"] < counts["tied"] < counts["own"]
    assert counts["own"] - counts["tied"] >= 256 * 1000  # its own d x V plan projection


@pytest.mark.parametrize("size, d_model, layers", [("mini", 128, 2), ("tiny", 256, 3), ("base", 768, 6)])
def test_size_presets_set_the_bart_dimensions(size, d_model, layers):
    config = build_config(ModelParams(size=size, max_entities=5), "eric", vocab_size=64, ids=IDS)
    assert (config.d_model, config.encoder_layers, config.decoder_layers) == (d_model, layers, layers)
    assert config.encoder_ffn_dim == 4 * d_model


class TestEricArchitecture(ArchitectureTests):
    kind = "eric"
    added_parameters = (*STATE, *ENTITY, *(p.format(i) for p in STATE_ATTENTION for i in range(2)))
    round_trip_overrides = ({}, dict(use_state=False), dict(hard_negatives=True, first_unit_state=False))
    unlabeled_losses = ("entity_loss",)  # the given p_n are the planner's targets too

    def tiny(self, seed: int = 0, **overrides):
        return tiny_model(seed, **overrides)

    def unlabeled_inputs(self, batch):
        """Each unit's p_n and, for a unit with an entity, its state s_n (generation samples both)."""
        entity_ids = batch["entity_ids"]
        return {"entity_ids": entity_ids, "state_ids": torch.where(entity_ids > 0, entity_ids % 16, -1)}


class TestBartArchitecture(ArchitectureTests):
    """The `bart` variant: ERIC's class with every switch off (exactly BART: see above)."""

    kind = "eric"
    variant = {"state_attention": False, "state": False, "entity": False}

    def tiny(self, seed: int = 0, **overrides):
        return tiny_model(seed, **{**BART_SWITCHES, **overrides})
