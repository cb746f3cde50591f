"""EntityWorld's checker: every rule caught on a hand-made story, every phrasing read back."""

from __future__ import annotations

import pytest

from eric.world.checker import check_story
from eric.world.phrasings import (PHRASINGS, SceneError, names_to_placeholders, parse_scene, parse_unit, render,
                                  render_scene)
from eric.world.world import EVENT_TYPES, RULES, Event

# <e0> Anna Berg and <e1> Tom Reed at the harbor (Tom holds the old map), <e2> Mia Berg at
# the mill with the silver key; Anna and Mia know each other (same surname).
SCENE = ("Anna Berg and Tom Reed are at the harbor; Mia Berg is at the mill; "
         "Tom Reed carries the old map; the silver key lies at the mill.")

# rule -> a story whose last unit breaks exactly that rule (the units before it break none)
VIOLATING = {
    "unknown_character": ["<e7> traveled to the mill."],
    "unknown_place": ["<e0> traveled to the lagoon."],
    "unknown_item": ["<e2> found the golden crown."],
    "same_character": ["<e0> met <e0>."],
    "dead_character": ["<e0> fought <e1> and won.", "<e0> fought <e1> and won.", "<e1> traveled to the mill."],
    "captive_acts": ["<e0> captured <e1>.", "<e1> traveled to the mill."],
    "wounded_acts": ["<e1> fought <e0> and won.", "<e0> captured <e1>."],
    "not_wounded": ["<e0> healed <e1>."],
    "not_captive": ["<e0> escaped."],
    "already_captive": ["<e0> captured <e1>.", "<e0> captured <e1>."],
    "not_dead": ["<e0> buried <e1>."],
    "not_together": ["<e0> met <e2>."],
    "already_there": ["<e0> traveled to the harbor."],
    "wrong_place": ["<e0> waited in the mill."],
    "target_here": ["<e0> met <e1>.", "<e0> searched the harbor for <e1>."],
    "strangers": ["<e0> talked with <e1>."],
    "already_married": ["<e0> met <e1>.", "<e0> married <e1>.", "<e0> married <e1>."],
    "item_not_held": ["<e1> gave the silver key to <e0>."],
    "item_not_here": ["<e0> found the silver key."],
    "hands_full": ["<e1> traveled to the mill.", "<e1> found the silver key."],
}


def test_every_rule_has_a_hand_made_story():
    assert set(VIOLATING) == set(RULES)


@pytest.mark.parametrize("rule", sorted(VIOLATING))
def test_each_rule_is_caught(rule):
    check = check_story(SCENE, VIOLATING[rule])
    assert check.unparsed == 0
    assert [u.violations for u in check.units[:-1]] == [()] * (len(check.units) - 1)
    assert check.units[-1].violations == (rule,)
    assert check.by_rule == {rule: 1}


def test_the_scene_is_read_with_cast_order_places_items_and_families():
    w = parse_scene(SCENE)
    assert [c.name for c in w.characters] == ["Anna Berg", "Tom Reed", "Mia Berg"]
    assert [c.location for c in w.characters] == ["harbor", "harbor", "mill"]
    assert w.places == ["harbor", "mill"]
    assert w.characters[1].holds == "old map" and w.items == {"old map": None, "silver key": "mill"}
    assert w.characters[0].knows == {2} and w.characters[1].knows == set()


def test_scenes_and_units_of_the_two_word_places_still_read():
    """The retired runs' kept samples name places as "Old Harbor": they read as before, and a
    scene renders back as it was written in either form."""
    old = "Anna Berg and Tom Reed are at Old Harbor; Mia Berg is at Red Mill; the silver key lies at Red Mill."
    assert parse_scene(old).places == ["Old Harbor", "Red Mill"]
    assert render_scene(parse_scene(old)) == old and render_scene(parse_scene(SCENE)) == SCENE
    assert check_story(old, ["<e0> traveled to Red Mill.", "<e0> waited in Old Harbor."]).by_rule == {"wrong_place": 1}
    assert parse_unit("<e0> hid the silver key in the mill.") == Event("hide", 0, None, "mill", "silver key")


@pytest.mark.parametrize("scene", ["", "Anna Berg is at the harbor", "Anna is at the harbor.",
                                   "Anna Berg sleeps at the harbor.", "Tom Reed carries the old map."])
def test_a_scene_that_is_not_entityworld_fails_in_one_line(scene):
    with pytest.raises(SceneError) as err:
        parse_scene(scene)
    assert "\n" not in str(err.value)


def test_a_legal_story_replays_state_changes_across_units():
    units = ["<e1> traveled to the mill.", "<e1> met <e2>.", "<e2> fought <e1> and won.",
             "<e2> healed <e1>.", "<e1> gave the old map to <e2>.", "<e1> found the silver key.",
             "<e2> wept for <e0>."]  # last: Anna is alive -> not_dead
    check = check_story(SCENE, units)
    assert [u.violations for u in check.units] == [()] * 6 + [("not_dead",)]


def test_unparsed_units_are_counted_and_change_nothing():
    check = check_story(SCENE, ["<e0> flew to the moon.", "", "<e0> traveled to the mill.", "<e0> met <e2>."])
    assert check.parsed == 2 and check.unparsed == 2 and check.violations == 0


def _example(kind: str) -> Event:
    roles = EVENT_TYPES[kind].roles
    return Event(kind, 0, 1 if "b" in roles else None, "harbor" if "p" in roles else None,
                 "silver key" if "i" in roles else None)


@pytest.mark.parametrize("kind", sorted(PHRASINGS))
def test_every_phrasing_is_read_back_as_its_event(kind):
    assert len(PHRASINGS[kind]) >= 4
    event = _example(kind)
    for template in PHRASINGS[kind]:
        text = render(event, template)
        assert parse_unit(text) == event, text
        named = text.replace("<e0>", "Anna Berg").replace("<e1>", "Tom")
        assert parse_unit(names_to_placeholders(named, ["Anna Berg", "Tom Reed", "Mia Berg"])) == event, named


def test_there_are_at_least_twenty_event_types_with_distinct_phrasings():
    assert len(EVENT_TYPES) >= 20 and set(PHRASINGS) == set(EVENT_TYPES)
    every = [t for ts in PHRASINGS.values() for t in ts]
    assert len(every) == len(set(every))


def test_names_outside_the_cast_do_not_parse():
    unit = names_to_placeholders("Zora Vance traveled to the mill.", ["Anna Berg", "Tom Reed"])
    assert parse_unit(unit) is None
    assert check_story(SCENE, ["Anna traveled to the mill.", "Mia met Anna Berg."], names=True).violations == 0
