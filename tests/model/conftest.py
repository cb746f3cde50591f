"""Tiny ERIC configs and synthetic stage-one batches (no tokenizer needed)."""

from __future__ import annotations

import pytest
import torch

from eric.model import EricConfig, EricForConditionalGeneration

VOCAB, PAD, BOS, EOS = 64, 1, 0, 2
SENT = 5
ENTITIES = [6, 7, 8, 9, 10]
WORDS = (20, VOCAB)


def tiny_config(**overrides) -> EricConfig:
    base = dict(
        vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
        num_states=16, state_dim=8, max_entities=len(ENTITIES), sent_token_id=SENT,
        entity_token_ids=ENTITIES, dropout=0.0, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
        decoder_start_token_id=EOS, forced_eos_token_id=None,
    )
    base.update(overrides)
    return EricConfig(**base)


def tiny_model(seed: int = 0, **overrides) -> EricForConditionalGeneration:
    torch.manual_seed(seed)
    return EricForConditionalGeneration(tiny_config(**overrides))


def make_batch(seed: int = 0, rows: int = 3, units: tuple[int, ...] = (3, 4, 2), unit_len: int = 5) -> dict:
    """Rows `<s> (<sent> w w [<ei>] w) ... </s>` with right padding; every other unit has an entity."""
    g = torch.Generator().manual_seed(seed)
    labels, entity_ids, positions = [], [], []
    for r in range(rows):
        row, ents, poss = [BOS], [], []
        for n in range(units[r % len(units)]):
            unit = [SENT, *torch.randint(*WORDS, (unit_len - 1,), generator=g).tolist()]
            if (n + r) % 2 == 0:
                k = int(torch.randint(0, len(ENTITIES), (1,), generator=g))
                unit[2] = ENTITIES[k]
                ents.append(k + 1)
                poss.append(len(row) + 2)
            else:
                ents.append(0)
                poss.append(-1)
            row += unit
        labels.append(row + [EOS])
        entity_ids.append(ents)
        positions.append(poss)
    source = [[BOS, *torch.randint(*WORDS, (4 + r,), generator=g).tolist(), EOS] for r in range(rows)]
    return {
        "input_ids": _pad(source, PAD),
        "attention_mask": (_pad(source, PAD) != PAD).long(),
        "labels": _pad(labels, -100),
        "entity_ids": _pad(entity_ids, -100),
        "entity_positions": _pad(positions, -1),
    }


def _pad(rows, value) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows])


@pytest.fixture
def model() -> EricForConditionalGeneration:
    return tiny_model()


@pytest.fixture
def batch() -> dict:
    return make_batch()
