"""Tiny trained-looking models for the sample/evaluate/report tests: a BPE tokenizer
trained on a few synthetic stories, random-init ERIC variants and a mention BART with
hidden size 32, saved with save_pretrained into a folder like the training stages do.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from transformers import BartConfig, BartForConditionalGeneration

from eric.config import ModelParams
from eric.data.tokenizer import special_token_ids, train_bpe
from eric.model import EricConfig, EricForConditionalGeneration
from eric.model.variants import eric_options

MAX_ENTITIES = 6
NUM_STATES = 16
NAMES = ["Ash Williams", "Linda", "Mary Jones", "Tom Carter", "the Daily Planet", "Scotty"]
EVENTS = [
    "{a} drives to a cabin in the woods.",
    "{a} and {b} find a tape in the cellar.",
    "The tape releases an evil force.",
    "{a} fights the demons through the night.",
    "{b} leaves to find help but returns wounded.",
    "{a} attacks {b} near the cabin.",
    "At dawn the evil has gone.",
    "{b} meets {a} at the station.",
]
TINY_DIMS = dict(
    d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=256,
)


def synthetic_rows(n: int, seed: int = 0, units: tuple[int, int] = (4, 7)) -> list[dict]:
    """Stage-one rows (eric/data/schema.py STAGE_ONE) with placeholders numbered by first occurrence."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        cast = rng.sample(range(len(NAMES)), 3)
        texts, unit_entities, mentions, order = [], [], [], {}
        for _ in range(rng.randint(*units)):
            a, b = rng.sample(cast, 2)
            event = rng.choice(EVENTS)
            slots = [s for s in ("{a}", "{b}") if s in event]
            slots.sort(key=event.index)
            unit, present = event, []
            for slot in slots:
                who = a if slot == "{a}" else b
                tag = f"<e{order.setdefault(who, len(order))}>"
                unit = unit.replace(slot, tag, 1)
                present.append(tag)
                mentions.append({"placeholder": tag, "mention": NAMES[who]})
            texts.append(unit)
            unit_entities.append(present)
        rows.append({
            "id": f"story-{i}", "title": f"Story {i}", "source": f"Story {i} begins on a quiet evening.",
            "target": " ".join(f"<sent> {u}" for u in texts), "units": texts, "unit_entities": unit_entities,
            "n_entities": len(order), "mentions": mentions,
        })
    return rows


def tiny_tokenizer(rows: list[dict]):
    texts = [r["source"] for r in rows] + [r["target"] for r in rows] + NAMES
    return train_bpe(texts, vocab_size=300, max_entities=MAX_ENTITIES, min_frequency=1)


def tiny_stage_one(tokenizer, variant: str = "eric", seed: int = 0, entity_bias: float = 2.0,
                   sent_bias: float = 2.0, **options):
    """A random-init variant; the biases raise the logits of the placeholders and of <sent>
    so that random stories have several units that mention entities."""
    params = ModelParams(num_states=NUM_STATES, state_dim=8, max_entities=MAX_ENTITIES, dropout=0.0, **options)
    ids = special_token_ids(tokenizer, MAX_ENTITIES)
    torch.manual_seed(seed)
    config = EricConfig(vocab_size=len(tokenizer), **TINY_DIMS, **eric_options(params, variant, ids))
    model = EricForConditionalGeneration(config)
    with torch.no_grad():
        model.final_logits_bias[0, ids.entities] += entity_bias
        model.final_logits_bias[0, ids.sent] += sent_bias
    return model.eval()


def tiny_mentions(tokenizer, seed: int = 1) -> BartForConditionalGeneration:
    torch.manual_seed(seed)
    config = BartConfig(
        vocab_size=len(tokenizer), **TINY_DIMS, dropout=0.0, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id, forced_eos_token_id=tokenizer.eos_token_id,
    )
    model = BartForConditionalGeneration(config)
    ids = special_token_ids(tokenizer, MAX_ENTITIES)
    with torch.no_grad():  # mentions look like "<e0> word word <e1> ...": favour placeholders
        model.final_logits_bias[0, ids.entities] += 2.0
    return model.eval()


def save(model, tokenizer, folder: Path) -> Path:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def one_thread():
    """Tiny models run ~10x faster on one thread than on two busy cores (no spin-waits)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
