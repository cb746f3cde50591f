"""HINT: both losses by hand, where r_n is read, the shuffled copy, first-phase heads; the shared
architecture suite (tests/model/architecture_suite.py)."""

from __future__ import annotations

import math

import pytest
import torch

from eric.config import ModelParams
from eric.data.tokenizer import build_tokenizer
from eric.model.hint import (
    IGNORE, HintConfig, HintForConditionalGeneration, closing_positions, order_loss, order_pairs, shuffle_units,
    similarity_loss, similarity_scores, similarity_targets,
)
from eric.model.variants import build_model
from tests.model.architecture_suite import BART_SWITCHES, ArchitectureTests
from tests.model.conftest import BOS, EOS, SENT, make_batch, tiny_config, tiny_model


def tiny_hint(seed: int = 0, **overrides) -> HintForConditionalGeneration:
    torch.manual_seed(seed)
    base = {k: v for k, v in tiny_config(**BART_SWITCHES).to_dict().items() if k in HintConfig.__dataclass_fields__}
    return HintForConditionalGeneration(HintConfig(**{**base, **overrides}))


def extras(model, batch, units=None, seed=0):
    """The collator's extras; `units` rows of cached similarity matrices (None: no L_Sen)."""
    rows = [{} for _ in range(batch["labels"].shape[0])] if units is None else units
    torch.manual_seed(seed)
    return HintForConditionalGeneration.batch_extras(model.config, None, rows, batch)


def identity_targets(batch) -> list[dict]:
    """Rows whose cached cosines are 0.25 everywhere off the diagonal (1 on it)."""
    rows = []
    for labels in batch["labels"]:
        n = int((labels == SENT).sum())
        matrix = torch.full((n, n), 0.25).fill_diagonal_(1.0)
        rows.append({"id": "x", "hint_units": n, "hint_similarity": matrix.flatten().tolist()})
    return rows


def test_similarity_score_is_symmetric_and_reaches_negative_cosines():
    """HINT (finetune.py:246): s_ij = -1 + 2 sigmoid(u_ij + u_ji)."""
    ln3 = math.log(3)
    u = torch.tensor([[[0.0, ln3], [-2 * ln3, 1.0]]])
    s = similarity_scores(u)
    # (0,1), (1,0): -1 + 2 sigmoid(-ln 3) = -1 + 2 * 0.25 = -0.5; (0,0): -1 + 2 * 0.5 = 0
    torch.testing.assert_close(s, torch.tensor([[[0.0, -0.5], [-0.5, 2 * torch.sigmoid(torch.tensor(2.0)).item() - 1]]]))
    assert torch.equal(s, s.transpose(-1, -2)) and s.min() < 0
    # this project's first scorer: sigmoid(u_ij), in [0, 1], not symmetric
    b = similarity_scores(u, "bilinear")
    assert b[0, 0, 1].item() == pytest.approx(0.75) and b[0, 1, 0].item() == pytest.approx(0.1)
    assert b.min() >= 0
    with pytest.raises(ValueError, match="similarity_score"):
        similarity_scores(u, "cosine")


def test_similarity_loss_matches_a_hand_computation():
    # one text of 3 units (the 3rd missing) and one of 2 whose (1,0) has no target
    scores = torch.tensor([[[0.9, -0.5, 5.0], [-0.5, 1.0, 5.0], [5.0, 5.0, 5.0]],
                           [[0.6, 0.75, 5.0], [0.75, 1.0, 5.0], [5.0, 5.0, 5.0]]])
    targets = torch.tensor([[[1.0, -0.45, 0.0], [-0.45, 1.0, 0.0], [0.0, 0.0, 1.0]],
                            [[1.0, 0.45, IGNORE], [IGNORE, 1.0, IGNORE], [IGNORE, IGNORE, IGNORE]]])
    exists = torch.tensor([[True, True, False], [True, True, False]])
    # |s - t|: text 1 (0,0) 0.1, (0,1) 0.05, (1,0) 0.05, (1,1) 0; text 2 (0,0) 0.4, (0,1) 0.3, (1,1) 0
    # HINT (finetune.py:252): max(|s - t| - 0.1, 0), mean over every pair, the diagonal too
    assert similarity_loss(scores, targets, exists, margin=0.1).item() == pytest.approx((0.3 + 0.2) / 7)
    assert similarity_loss(scores, targets, exists, margin=0.0).item() == pytest.approx(
        (0.1 + 0.05 + 0.05 + 0.4 + 0.3) / 7)
    # without the diagonal (this project's first choice): the pairs i != j only
    assert similarity_loss(scores, targets, exists, margin=0.1, diagonal=False).item() == pytest.approx(0.2 / 3)
    assert similarity_loss(scores, targets, exists & False, margin=0.1).item() == 0.0


def test_order_pairs_are_within_distance_two_and_positive_when_following_within_two():
    """HINT (finetune.py:216-225): positions i < j <= i + 2; label 1 iff 0 < o_j - o_i <= 2."""
    orders = torch.tensor([[2, 0, 1, 3, IGNORE]])
    pairs, labels = order_pairs(orders, 2)
    scored = {(i, j): int(labels[0, i, j]) for i, j in pairs[0].nonzero().tolist()}
    # (1,3): 0 then 3 is in order but 3 units apart: label 0; the padded 5th unit has no pair
    assert scored == {(0, 1): 0, (0, 2): 0, (1, 2): 1, (1, 3): 0, (2, 3): 1}
    pairs, labels = order_pairs(orders, 1)
    assert {(i, j): int(labels[0, i, j]) for i, j in pairs[0].nonzero().tolist()} == {(0, 1): 0, (1, 2): 1, (2, 3): 0}


def test_order_loss_matches_a_hand_computation():
    ln3 = math.log(3)
    logits = torch.zeros(2, 3, 3)
    logits[0, 0, 1], logits[0, 0, 2], logits[0, 1, 2] = ln3, -ln3, 0.0  # p = 0.75, 0.25, 0.5
    logits[1, 0, 1] = ln3
    orders = torch.tensor([[1, 0, 2], [0, 1, IGNORE]])
    # text 1: (0,1) 0 - 1 < 0: label 0 -> -ln 0.25; (0,2) 2 - 1 = 1: label 1 -> -ln 0.25; (1,2) 2 - 0 = 2: label 1
    # -> -ln 0.5. Text 2: (0,1) label 1 -> -ln 0.75. The mean per text, then over the texts.
    text1 = (math.log(4) + math.log(4) + math.log(2)) / 3
    expected = (text1 + math.log(4 / 3)) / 2
    assert order_loss(logits, orders).item() == pytest.approx(expected, abs=1e-6)
    assert order_loss(logits, torch.full_like(orders, IGNORE)).item() == 0.0


def test_unit_representation_has_read_its_whole_unit_and_nothing_after():
    batch = make_batch(rows=1, units=(3,))
    labels = batch["labels"]  # <s> <sent> w w w w <sent> w w w w <sent> w w w w </s>
    positions, exists = closing_positions(labels, SENT, EOS)
    assert positions.tolist() == [[6, 11, 16]] and exists.all()
    assert labels[0, 6] == SENT and labels[0, 16] == EOS and labels[0, 0] == BOS
    model = tiny_hint().eval()

    def reps(lab):
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     labels=lab).decoder_last_hidden_state[0, positions[0]]

    base = reps(labels)
    changed_last_token = labels.clone()
    changed_last_token[0, 5] = 21 if labels[0, 5] != 21 else 22  # the last token of unit 1
    after = reps(changed_last_token)
    assert not torch.allclose(after[0], base[0])  # r_1 read the unit's last token
    changed_next_unit = labels.clone()
    changed_next_unit[0, 7] = 21 if labels[0, 7] != 21 else 22  # the first word of unit 2
    after = reps(changed_next_unit)
    torch.testing.assert_close(after[0], base[0])  # r_1 has not read unit 2
    assert not torch.allclose(after[1], base[1])


def test_shuffled_copy_moves_whole_units_and_records_the_original_order():
    batch = make_batch(rows=3, units=(4, 5, 1))
    labels = batch["labels"]
    shuffled, orders = shuffle_units(labels, SENT, EOS, ratio=1.0, generator=torch.Generator().manual_seed(1))
    for b in range(3):
        row, new = labels[b].tolist(), shuffled[b].tolist()
        units = _units(row)
        moved = _units(new)
        assert sorted(map(tuple, moved)) == sorted(map(tuple, units)) and new[-1:] == row[-1:]
        order = [units.index(u) for u in moved]
        assert orders[b, :len(order)].tolist() == order
        assert (orders[b, len(order):] == IGNORE).all()
        if len(units) > 1:
            assert order != sorted(order)  # never the identity
    assert torch.equal(shuffled[2], labels[2])  # one unit: nothing to shuffle, no pair
    again, _ = shuffle_units(labels, SENT, EOS, ratio=1.0, generator=torch.Generator().manual_seed(1))
    assert torch.equal(again, shuffled)
    part, _ = shuffle_units(labels, SENT, EOS, ratio=0.5, generator=torch.Generator().manual_seed(1))
    assert sum(a != b for a, b in zip(_units(part[1].tolist()), _units(labels[1].tolist()))) in (2, 3)


def _units(row: list[int]) -> list[list[int]]:
    row = [t for t in row if t != IGNORE]
    starts = [i for i, t in enumerate(row) if t == SENT]
    return [row[s:e] for s, e in zip(starts, [*starts[1:], row.index(EOS)])]


def test_similarity_targets_are_cropped_to_the_units_the_collator_kept():
    rows = [{"id": "a", "hint_units": 3, "hint_similarity": list(range(9))},
            {"id": "b", "hint_units": 2, "hint_similarity": [1.0, 0.5, 0.5, 1.0]}]
    exists = torch.tensor([[True, True], [True, False]])
    out = similarity_targets(rows, exists)
    assert out[0].tolist() == [[0.0, 1.0], [3.0, 4.0]]
    assert out[1].tolist() == [[1.0, IGNORE], [IGNORE, IGNORE]]
    with pytest.raises(ValueError, match="row 'b': 2 units but hint targets for 1"):
        similarity_targets([rows[0], {"id": "b", "hint_units": 1, "hint_similarity": [1.0]}],
                           torch.tensor([[True, True], [True, True]]))


def test_loss_is_lm_plus_the_weighted_terms_and_plain_bart_without_extras():
    batch = make_batch()
    model = tiny_hint(similarity_weight=0.5, order_weight=0.25, order_normal_weight=0.125)
    out = model(**batch, **extras(model, batch, identity_targets(batch)))
    assert out.similarity_loss > 0 and out.order_loss > 0 and out.order_normal_loss > 0
    torch.testing.assert_close(out.loss, out.lm_loss + 0.5 * out.similarity_loss + 0.25 * out.order_loss
                               + 0.125 * out.order_normal_loss)
    assert {"similarity_loss", "order_loss", "order_normal_loss", "lm_loss"} <= set(out.loss_terms())
    out.loss.backward()
    assert model.hint_similarity_head.proj.weight.grad.abs().sum() > 0
    assert model.hint_order_head.proj.weight.grad.abs().sum() > 0
    # evaluation's plain collator: no extras, the LM loss only, and BART's logits with the same init
    plain, bart = tiny_hint().eval(), tiny_model(**BART_SWITCHES).eval()
    bart.load_state_dict(plain.state_dict(), strict=False)
    a, b = plain(**batch), bart(**batch)
    assert a.similarity_loss is None and a.order_loss is None and torch.equal(a.loss, a.lm_loss)
    torch.testing.assert_close(a.logits, b.logits)
    off = tiny_hint(similarity_weight=0, order_weight=0, order_normal_weight=0)
    assert extras(off, batch, identity_targets(batch)) == {}
    normal_only = tiny_hint(similarity_weight=0, order_weight=0)
    out = normal_only(**batch, **extras(normal_only, batch))
    assert set(extras(normal_only, batch)) == {"hint_orders"} and out.order_loss is None
    torch.testing.assert_close(out.loss, out.lm_loss + 0.01 * out.order_normal_loss)


def test_defaults_are_hints_released_settings():
    config = tiny_hint().config
    assert (config.similarity_weight, config.similarity_margin, config.similarity_score, config.similarity_diagonal) \
        == (0.1, 0.1, "symmetric", True)
    assert (config.order_weight, config.order_normal_weight, config.order_max_distance) == (1.0, 0.01, 2)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["<e0> meets <e1> at night.", "The town sleeps."] * 20, vocab_size=300, max_entities=100)


def test_a_first_phase_checkpoint_passes_its_heads_to_the_next_run(tmp_path, tokenizer):
    """HINT's separate first phase: `model.init` = an eric_hint output keeps the trained heads;
    a plain BART checkpoint gives fresh ones."""
    bart_switches = {"state": False, "entity": False, "state_attention": False}
    params = ModelParams(size="tiny", variants={"hint": {"kind": "hint"}, "bart": bart_switches})
    first = build_model(params, "hint", tokenizer)
    with torch.no_grad():
        first.hint_order_head.bias.fill_(0.7)
    first.save_pretrained(tmp_path / "phase1")
    second = build_model(params.model_copy(update={"init": str(tmp_path / "phase1")}), "hint", tokenizer)
    assert torch.equal(second.hint_order_head.proj.weight, first.hint_order_head.proj.weight)
    assert second.hint_order_head.bias.item() == pytest.approx(0.7)
    assert torch.equal(second.model.shared.weight, first.model.shared.weight)
    build_model(params, "bart", tokenizer).save_pretrained(tmp_path / "bart")
    fresh = build_model(params.model_copy(update={"init": str(tmp_path / "bart")}), "hint", tokenizer)
    assert fresh.hint_order_head.bias.item() == 0.0


class TestHintArchitecture(ArchitectureTests):
    kind = "hint"
    options = {"order_weight": 0.3}
    option_defaults = {"similarity_weight": 0.1, "similarity_margin": 0.1, "similarity_score": "symmetric",
                       "similarity_diagonal": True, "order_normal_weight": 0.01, "order_max_distance": 2,
                       "shuffle_ratio": 0.5}
    invalid_options = ({"shuffle_ratio": 0}, {"similarity_score": "cosine"}, {"order_max_distance": 0})
    added_parameters = tuple(f"hint_{h}_head.{p}" for h in ("similarity", "order") for p in ("proj.weight", "bias"))

    def tiny(self, seed: int = 0, **overrides):
        return tiny_hint(seed, **overrides)

    def extras(self, model, batch):
        return extras(model, batch, identity_targets(batch))
