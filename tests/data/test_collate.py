"""Stage-one rows -> model tensors: sentence tokens, p_n per unit, truncation, seeded draws."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from eric.data.collate import StageOneCollator
from eric.data.schema import placeholder
from eric.data.tokenizer import special_token_ids, train_bpe

UNITS = [
    "<e0> drives to a cabin with <e1> and <e2>.",
    "The tape releases an evil force.",
    "<e1> attacks <e0>, who buries <e1> near the cabin.",
    "At dawn <e0> believes the evil has gone.",
]


def row(units=UNITS, rid="s0", source="Ash Williams drives to a cabin in the woods.") -> dict:
    entities = [[t for t in u.replace(",", " ").replace(".", " ").split() if t.startswith("<e")] for u in units]
    return {"id": rid, "title": "T", "source": source, "target": " ".join(f"<sent> {u}" for u in units),
            "units": units, "unit_entities": entities, "n_entities": 3, "mentions": []}


@pytest.fixture(scope="module")
def tokenizer():
    lines = [row()["source"], *UNITS, "<e0> Ash <e1> Linda <e2> Scotty"] * 5
    return train_bpe(lines, vocab_size=320, max_entities=5)


def collator(tokenizer, **kw) -> StageOneCollator:
    return StageOneCollator(tokenizer, max_entities=5, **kw)


def _check_consistency(tokenizer, batch):
    """Every unit's sentence token is in labels; p_n's position holds p_n's token inside unit n."""
    ids = special_token_ids(tokenizer, 5)
    for b in range(batch["labels"].shape[0]):
        labels = batch["labels"][b]
        starts = (labels == ids.sent).nonzero()[:, 0].tolist()
        units = batch["entity_ids"][b]
        assert len(starts) == int((units != -100).sum())
        ends = [*starts[1:], int((labels != -100).sum()) - 1]
        for n, (start, end) in enumerate(zip(starts, ends)):
            cls, pos = int(units[n]), int(batch["entity_positions"][b, n])
            if cls == 0:
                assert pos == -1
            else:
                assert start < pos < end and int(labels[pos]) == ids.entities[cls - 1]


def test_batch_layout(tokenizer):
    c = collator(tokenizer)
    batch = c([row(), row(UNITS[:2], rid="s1", source="Short.")])
    assert set(batch) == {"input_ids", "attention_mask", "labels", "entity_ids", "entity_positions"}
    labels = batch["labels"]
    assert labels[0, 0] == 0 and labels[0, -1] == 2  # <s> ... </s>
    assert (labels[1] == -100).any() and batch["attention_mask"][1].sum() < batch["attention_mask"][0].sum()
    assert batch["entity_ids"][0, 1] == 0 and batch["entity_positions"][0, 1] == -1  # unit 2: <none>
    assert batch["entity_ids"][1].tolist()[2:] == [-100, -100]
    _check_consistency(tokenizer, batch)


def test_draws_are_seeded_per_row_and_epoch_not_per_batch(tokenizer):
    c = collator(tokenizer, seed=7)
    alone = c([row()])
    together = c([row(UNITS[1:], rid="x"), row()])
    assert together["entity_ids"][1].tolist() == alone["entity_ids"][0].tolist()
    assert c([row()])["entity_ids"].tolist() == alone["entity_ids"].tolist()
    draws = set()
    for epoch in range(12):
        c.set_epoch(epoch)
        draws.add(int(c([row()])["entity_ids"][0, 0]))
    assert draws == {1, 2, 3}  # unit 1 mentions <e0>, <e1>, <e2>


def test_uniform_choice_dedupes_and_occurrence_choice_counts_repeats(tokenizer):
    # unit 3 mentions <e1> twice and <e0> once
    def shares(mode):
        c = collator(tokenizer, entity_choice=mode)
        counts = Counter()
        for epoch in range(300):
            c.set_epoch(epoch)
            counts[int(c([row()])["entity_ids"][0, 2])] += 1
        return counts[2] / 300  # class 2 = <e1>

    assert 0.40 < shares("uniform") < 0.60
    assert 0.57 < shares("occurrence") < 0.77


def test_truncation_drops_whole_trailing_units(tokenizer):
    full = collator(tokenizer)([row()])
    limit = int((full["labels"][0] != -100).sum()) - 4
    batch = collator(tokenizer, max_target_length=limit)([row()])
    labels = batch["labels"][0]
    assert int((labels != -100).sum()) <= limit and labels[labels != -100][-1] == 2
    kept = int((batch["entity_ids"][0] != -100).sum())
    assert 1 <= kept < 4
    assert torch.equal(labels[: int((labels != -100).sum()) - 1], full["labels"][0, : int((labels != -100).sum()) - 1])
    _check_consistency(tokenizer, batch)


def test_an_overlong_first_unit_keeps_its_head_and_only_surviving_placeholders(tokenizer):
    long_unit = "<e0> walks " + "far " * 40 + "with <e1>."
    batch = collator(tokenizer, max_target_length=12)([row([long_unit, "<e1> sleeps."])])
    assert int((batch["labels"][0] != -100).sum()) == 12
    assert batch["entity_ids"][0].tolist() == [1]  # <e1> was cut off, <e0> survives
    _check_consistency(tokenizer, batch)


def test_hard_negatives_point_to_another_placeholder_of_the_unit(tokenizer):
    ids = special_token_ids(tokenizer, 5)
    batch = collator(tokenizer, hard_negatives=True)([row()])
    negatives, labels = batch["hard_negative_positions"][0], batch["labels"][0]
    assert negatives[1] == -1 and negatives[3] == -1  # no entity / a single entity
    for n in (0, 2):
        token = int(labels[negatives[n]])
        assert token in ids.entities and token != int(labels[batch["entity_positions"][0, n]])


def test_units_that_disagree_with_the_target_are_a_clear_error(tokenizer):
    bad = row()
    bad["unit_entities"] = bad["unit_entities"][:2]
    with pytest.raises(ValueError, match="row 's0'.*4 sentence tokens.*2 units"):
        collator(tokenizer)([bad])
    with pytest.raises(ValueError, match="entity_choice"):
        collator(tokenizer, entity_choice="random")


def test_placeholders_beyond_the_vocabulary_are_ignored(tokenizer):
    units = ["<e7> meets <e0>.", "<e9> leaves."]  # only <e0>..<e4> exist
    batch = collator(tokenizer)([row(units)])
    assert batch["entity_ids"][0].tolist() == [1, 0]
    assert placeholder(0) == "<e0>"


def _tiny_model(tokenizer):
    from eric.model import EricConfig, EricForConditionalGeneration

    ids = special_token_ids(tokenizer, 5)
    torch.manual_seed(0)
    return EricForConditionalGeneration(EricConfig(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=256,
        num_states=8, state_dim=8, max_entities=5, sent_token_id=ids.sent, entity_token_ids=ids.entities,
        hard_negatives=True))


def test_collated_batch_trains_the_model(tokenizer):
    model = _tiny_model(tokenizer)
    batch = collator(tokenizer, hard_negatives=True)([row(), row(UNITS[1:], rid="s1")])
    out = model(**batch)
    out.loss.backward()
    assert torch.isfinite(out.loss) and out.contrastive_loss is not None
    assert torch.equal(out.state_ids >= 0, batch["entity_ids"] > 0)


def test_widths_padded_to_a_multiple_change_no_loss(tokenizer):
    """Compiled training pads source, target and unit counts to a multiple of 8 (one graph
    on CUDA): the padding is the ordinary kind, so every loss term is the unpadded one."""
    model = _tiny_model(tokenizer).eval()
    rows = [row(), row(UNITS[1:], rid="s1", source="Short.")]
    plain = collator(tokenizer, hard_negatives=True)(rows)
    padded = collator(tokenizer, hard_negatives=True, pad_multiple=8)(rows)
    assert all(v.shape[1] % 8 == 0 for v in padded.values())
    assert any(v.shape[1] != plain[k].shape[1] for k, v in padded.items())  # something was padded
    for key, value in plain.items():  # the same rows, widened
        assert torch.equal(padded[key][:, :value.shape[1]], value)
    with torch.no_grad():
        a, b = model(**plain), model(**padded)
    for term in ("loss", "lm_loss", "entity_loss", "contrastive_loss"):
        assert torch.allclose(getattr(a, term), getattr(b, term), rtol=1e-5, atol=1e-6), term
    assert torch.equal(a.state_ids, b.state_ids[:, :a.state_ids.shape[1]])
    with pytest.raises(ValueError, match="pad_multiple"):
        collator(tokenizer, pad_multiple=0)
