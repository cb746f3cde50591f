"""Unit layout of a decoder input: sentence positions, per-unit means, visibility."""

from __future__ import annotations

import torch

from eric.model.units import UnitLayout
from tests.model.conftest import PAD, SENT


def _layout():
    ids = torch.tensor([[2, 0, SENT, 30, 31, SENT, 32, PAD], [2, 0, SENT, 33, 34, 35, 36, 37]])
    return ids, UnitLayout.from_ids(ids, SENT, PAD, num_units=2)


def test_sentence_positions_and_unit_numbers():
    _, layout = _layout()
    assert layout.sent_positions.tolist() == [[2, 5], [2, 0]]
    assert layout.unit_exists.tolist() == [[True, True], [True, False]]
    assert layout.unit_of_position[0].tolist() == [0, 0, 1, 1, 1, 2, 2, 2]


def test_previous_unit_means_pool_the_unit_before_each_sentence_token():
    _, layout = _layout()
    hidden = torch.arange(16, dtype=torch.float).view(2, 8, 1)
    means = layout.previous_unit_means(hidden)
    assert means[0, 0].item() == (0 + 1) / 2  # prefix (</s> <s>) plans unit 1
    assert means[0, 1].item() == (2 + 3 + 4) / 3  # unit 1 plans unit 2 (padding excluded)
    assert means[1, 0].item() == (8 + 9) / 2


def test_keys_before_units_stop_at_the_sentence_token():
    _, layout = _layout()
    visible = layout.keys_before_units()
    assert visible[0, 1].tolist() == [True] * 5 + [False] * 3
    assert visible[0, 0].tolist() == [True, True] + [False] * 6


def test_too_many_sentence_tokens_for_the_given_units_is_an_error():
    """Checked on the device (an async assert: no host sync), so it raises as a RuntimeError."""
    ids, _ = _layout()
    try:
        UnitLayout.from_ids(ids, SENT, PAD, num_units=1)
    except RuntimeError as err:
        assert "sentence tokens" in str(err)
    else:
        raise AssertionError("expected a RuntimeError")
