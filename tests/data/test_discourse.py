"""Discourse markers opening a unit, and their relation classes (eric/data/discourse.py)."""

import pytest

from eric.data.discourse import MARKERS, RELATION_CLASS, opening_marker, opening_relation


@pytest.mark.parametrize("text, marker", [
    ("but he stays.", "but"),
    ("But he stays.", "but"),
    (", and the king flees.", "and"),
    ("When the war ends,", "when"),
    ("because her mother is ill.", "because"),
    ("Even though she loves him,", "though"),
    ("Soon after the wedding, she leaves.", "after"),
    ("although it rains.", "although"),
    ("while the guards sleep.", "while"),
    ("Then he leaves.", "then"),
    ("“So what?” he asks.", "so"),
    ("He stays.", None),
    ("Andrew stays.", None),  # a marker's letters, not the word
    ("so-called friends arrive.", None),
    ("Whenever he calls, she hangs up.", None),
    ("Even Tom leaves.", None),
    ("12 even though", None),
    ("", None),
    (" , ", None),
])
def test_opening_marker(text, marker):
    assert opening_marker(text) == marker


def test_every_marker_has_one_of_four_classes():
    assert len(MARKERS) == 15 and set(MARKERS) == set(RELATION_CLASS)
    assert set(RELATION_CLASS.values()) == {"temporal", "contingency", "comparison", "expansion"}
    assert {m for m, c in RELATION_CLASS.items() if c == "contingency"} == {"because", "so", "if"}


def test_opening_relation():
    assert opening_relation("but he stays.") == "comparison"
    assert opening_relation("After the war, he returns.") == "temporal"
    assert opening_relation("He returns.") is None
