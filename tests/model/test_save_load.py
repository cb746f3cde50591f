"""Initialization from a plain BART directory (ERIC's save/load round trip is in the shared
architecture suite: tests/model/architecture_suite.py, run by test_variants.py)."""

from __future__ import annotations

import pytest
import torch
from transformers import BartConfig, BartForConditionalGeneration

from eric.model import EricForConditionalGeneration
from tests.model.conftest import ENTITIES, SENT, VOCAB, make_batch, tiny_model


def _plain_bart(tmp_path, vocab=VOCAB - 6):
    torch.manual_seed(1)
    bart = BartForConditionalGeneration(BartConfig(
        vocab_size=vocab, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128))
    bart.save_pretrained(tmp_path)
    return bart


def test_init_from_a_plain_bart_directory(tmp_path):
    bart = _plain_bart(tmp_path)
    model = EricForConditionalGeneration.from_bart(
        tmp_path, vocab_size=VOCAB, num_states=16, state_dim=8, max_entities=len(ENTITIES),
        sent_token_id=SENT, entity_token_ids=ENTITIES)
    theirs = bart.state_dict()
    ours = model.state_dict()
    for name, value in theirs.items():
        if name in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                    "lm_head.weight", "final_logits_bias"):
            continue
        assert torch.equal(ours[name], value), name
    # the vocabulary grew for <sent> and the placeholders; BART's rows are kept
    assert model.config.vocab_size == VOCAB and model.model.shared.weight.shape[0] == VOCAB
    assert torch.equal(model.model.shared.weight[: VOCAB - 6], theirs["model.shared.weight"])
    assert model.lm_head.weight.data_ptr() == model.model.shared.weight.data_ptr()
    assert model.final_logits_bias.shape == (1, VOCAB)
    # the sentence encoder starts as a copy of the encoder (not shared)
    for name, value in model.model.encoder.state_dict().items():
        if not name.startswith("embed_tokens"):
            assert torch.equal(model.sentence_encoder.state_dict()[name], value), name
    assert model.sentence_encoder.layers[0].fc1.weight.data_ptr() != model.model.encoder.layers[0].fc1.weight.data_ptr()
    out = model(**make_batch())
    assert torch.isfinite(out.loss)


def test_init_from_a_bare_bart_model_checkpoint(tmp_path):
    """facebook/bart-base is saved as a BartModel: weights without the `model.` prefix."""
    bart = _plain_bart(tmp_path / "full")
    bart.model.save_pretrained(tmp_path / "bare")
    model = EricForConditionalGeneration.from_bart(
        tmp_path / "bare", num_states=16, state_dim=8, max_entities=len(ENTITIES), sent_token_id=SENT,
        entity_token_ids=ENTITIES, vocab_size=VOCAB)
    layer = "model.decoder.layers.1.encoder_attn.k_proj.weight"
    assert torch.equal(model.state_dict()[layer], bart.state_dict()[layer])


def test_unknown_inputs_are_refused(tmp_path):
    with pytest.raises(TypeError, match="entity_position"):
        tiny_model()(**make_batch(), entity_position=None)


def test_init_from_a_missing_directory_says_what_to_provide(tmp_path):
    with pytest.raises(FileNotFoundError, match="no BART checkpoint"):
        EricForConditionalGeneration.from_bart(tmp_path / "bart-base")
