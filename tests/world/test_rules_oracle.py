"""EntityWorld's rules against a second, test-only statement of them.

The generator draws only the events the world's `violations()` allows, and the checker
reports what `violations()` says: tests that compare the two cannot catch a wrong rule.
Here each event's preconditions and effects are written down again as data, and
(1) for every event type and every precondition, `violations()` must allow the event in a
hand-built world where all preconditions hold and refuse it, with the named rule, when only
that one is broken; (2) generated stories are replayed with the test's own preconditions
and effects: every event must be allowed and every recorded state must match.
"""

from __future__ import annotations

import pytest

from eric.world.generate import generate_stories
from eric.world.phrasings import parse_scene
from eric.world.world import EVENT_TYPES, Character, Event, new_world, violations

# kind -> preconditions, in the words of docs/entityworld.md's event table
PRECONDITIONS = {
    "travel": ["a alive", "a free", "moves"],
    "flee": ["a alive", "a free", "b alive", "together", "moves"],
    "meet": ["a alive", "a free", "b alive", "b free", "together"],
    "talk": ["a alive", "b alive", "together", "know"],
    "fight": ["a alive", "a free", "b alive", "b free", "together"],
    "heal": ["a alive", "a free", "a well", "b alive", "b wounded", "together"],
    "recover": ["a alive", "a wounded"],
    "capture": ["a alive", "a free", "a well", "b alive", "b not captive", "together"],
    "escape": ["a alive", "a captive"],
    "rescue": ["a alive", "a free", "a well", "b alive", "b captive", "together"],
    "find": ["a alive", "a free", "item here", "a hands free"],
    "give": ["a alive", "a free", "b alive", "b free", "together", "a holds", "b hands free"],
    "steal": ["a alive", "a free", "b alive", "together", "b holds", "a hands free"],
    "hide": ["a alive", "a free", "a holds", "at place"],
    "marry": ["a alive", "a free", "b alive", "b free", "together", "know", "unmarried"],
    "die": ["a alive", "a wounded"],
    "betray": ["a alive", "a free", "a well", "b alive", "b not captive", "together", "know"],
    "kill": ["a alive", "a free", "a well", "b alive", "together"],
    "bury": ["a alive", "a free", "b dead", "together"],
    "mourn": ["a alive", "b dead", "know"],
    "search": ["a alive", "a free", "at place", "b away", "know"],
    "wait": ["a alive", "at place"],
    "guard": ["a alive", "a free", "b alive", "b captive", "together"],
}
# precondition -> the rule the checker names when only it is broken
BROKEN_RULE = {
    "a alive": "dead_character", "b alive": "dead_character", "a free": "captive_acts", "b free": "captive_acts",
    "a well": "wounded_acts", "a wounded": "not_wounded", "b wounded": "not_wounded", "a captive": "not_captive",
    "b captive": "not_captive", "b not captive": "already_captive", "b dead": "not_dead", "together": "not_together",
    "b away": "target_here", "moves": "already_there", "at place": "wrong_place", "know": "strangers",
    "unmarried": "already_married", "a holds": "item_not_held", "b holds": "item_not_held",
    "item here": "item_not_here", "a hands free": "hands_full", "b hands free": "hands_full",
}
HERE, THERE = "harbor", "mill"
KEY, MAP = "silver key", "old map"


def _condition(person: str, needs: list[str]) -> str:
    for state in ("dead", "captive", "wounded"):
        if f"{person} {state}" in needs:
            return state
    return "well"


def _scenario(kind: str, broken: str | None = None):
    """(world, event): <e0> acts on <e1> at HERE, every precondition of `kind` holding except `broken`."""
    needs = [n for n in PRECONDITIONS[kind] if n != broken]
    spec = EVENT_TYPES[kind].roles
    a, b = Character("Anna Berg", HERE, _condition("a", needs)), Character("Tom Reed", HERE, _condition("b", needs))
    third = Character("Mia Lund", THERE)
    items = {KEY: None, MAP: THERE}
    if "b away" in needs:
        b.location = THERE
    if "know" in needs:
        a.knows, b.knows = {1}, {0}
    if "a holds" in needs:
        a.holds = KEY
    if "b holds" in needs:
        b.holds = KEY
    if a.holds is None and b.holds is None:
        items[KEY] = HERE if "item here" in needs else THERE
    place = THERE if "moves" in needs else HERE
    breaks = {  # what makes `broken` false beyond leaving it out of `needs` (where that is not enough)
        "a alive": lambda: setattr(a, "condition", "dead"), "b alive": lambda: setattr(b, "condition", "dead"),
        "a free": lambda: setattr(a, "condition", "captive"), "b free": lambda: setattr(b, "condition", "captive"),
        "a well": lambda: setattr(a, "condition", "wounded"),
        "b not captive": lambda: setattr(b, "condition", "captive"), "together": lambda: setattr(b, "location", THERE),
        "unmarried": lambda: (setattr(a, "spouse", 2), setattr(third, "spouse", 0)),
        "a hands free": lambda: setattr(a, "holds", MAP), "b hands free": lambda: setattr(b, "holds", MAP),
    }
    if broken is not None:
        breaks.get(broken, lambda: None)()
        if broken in ("a hands free", "b hands free"):
            items[MAP] = None
        if broken == "at place":
            place = THERE
        if broken == "moves":
            place = HERE
    world = new_world([HERE, THERE], [a, b, third], items)
    event = Event(kind, 0, 1 if "b" in spec else None, place if "p" in spec else None, KEY if "i" in spec else None)
    return world, event


def test_the_table_covers_every_event_type_and_names_a_rule_for_every_precondition():
    assert set(PRECONDITIONS) == set(EVENT_TYPES)
    assert {n for needs in PRECONDITIONS.values() for n in needs} == set(BROKEN_RULE)


@pytest.mark.parametrize("kind", sorted(PRECONDITIONS))
def test_an_event_is_allowed_when_its_preconditions_hold_and_refused_for_each_one_broken(kind):
    assert violations(*_scenario(kind)) == []
    for need in PRECONDITIONS[kind]:
        assert violations(*_scenario(kind, need)) == [BROKEN_RULE[need]], (kind, need)


# -- replaying generated stories with the test's own rules ----------------------------------------
def _holds(state: dict, need: str, e: Event) -> bool:
    people, items = state["people"], state["items"]
    a = people[e.a]
    b = people[e.b] if e.b is not None else None
    whose = {"a": a, "b": b}
    person, _, what = need.partition(" ")
    if person in whose and what in ("alive", "free", "well", "wounded", "captive", "dead", "not captive"):
        condition = whose[person]["condition"]
        return {"alive": condition != "dead", "free": condition != "captive", "well": condition != "wounded",
                "not captive": condition != "captive"}.get(what, condition == what)
    return {
        "together": lambda: a["location"] == b["location"], "b away": lambda: a["location"] != b["location"],
        "moves": lambda: e.place != a["location"], "at place": lambda: e.place == a["location"],
        "know": lambda: e.b in a["knows"], "unmarried": lambda: a["spouse"] is None and b["spouse"] is None,
        "a holds": lambda: a["holds"] == e.item, "b holds": lambda: b["holds"] == e.item,
        "item here": lambda: items.get(e.item) == a["location"], "a hands free": lambda: a["holds"] is None,
        "b hands free": lambda: b["holds"] is None,
    }[need]()


def _set(state: dict, k: int, condition: str) -> None:
    person = state["people"][k]
    person["condition"] = condition
    if condition == "dead" and person["holds"]:  # what the dead held lies where they fell
        state["items"][person["holds"]], person["holds"] = person["location"], None


def _take(state: dict, k: int, item: str) -> None:
    for person in state["people"]:
        if person["holds"] == item:
            person["holds"] = None
    state["items"][item] = None
    state["people"][k]["holds"] = item


def _happen(state: dict, e: Event) -> None:
    """The effects, in the words of docs/entityworld.md."""
    people = state["people"]
    a = people[e.a]
    if e.kind in ("travel", "flee"):
        a["location"] = e.place
    if e.kind in ("meet", "rescue", "marry"):
        a["knows"].add(e.b)
        people[e.b]["knows"].add(e.a)
    if e.kind == "marry":
        a["spouse"], people[e.b]["spouse"] = e.b, e.a
    if e.kind == "fight":
        _set(state, e.b, "dead" if people[e.b]["condition"] == "wounded" else "wounded")
    if e.kind in ("heal", "rescue"):
        _set(state, e.b, "well")
    if e.kind in ("recover", "escape"):
        _set(state, e.a, "well")
    if e.kind in ("capture", "betray"):
        _set(state, e.b, "captive")
    if e.kind == "die":
        _set(state, e.a, "dead")
    if e.kind == "kill":
        _set(state, e.b, "dead")
    if e.kind in ("find", "steal"):
        _take(state, e.a, e.item)
    if e.kind == "give":
        _take(state, e.b, e.item)
    if e.kind == "hide":
        a["holds"], state["items"][e.item] = None, a["location"]


def _start(scene: str) -> dict:
    world = parse_scene(scene)
    people = [{"location": c.location, "condition": "well", "holds": c.holds, "spouse": None,
               "knows": {j for j, d in enumerate(world.characters) if j != k and d.surname == c.surname}}
              for k, c in enumerate(world.characters)]
    return {"people": people, "items": dict(world.items)}


def _snapshot(state: dict) -> list[dict]:
    return [{"location": p["location"], "condition": p["condition"], "holds": p["holds"],
             "knows": [f"<e{k}>" for k in sorted(p["knows"])],
             "spouse": None if p["spouse"] is None else f"<e{p['spouse']}>"} for p in state["people"]]


def test_generated_stories_keep_the_tests_own_rules_and_effects():
    kinds = set()
    for story in generate_stories(seed=11, count=150, cast=(3, 6), events=15):
        state = _start(story.scene)
        for n, event in enumerate(story.events):
            broken = [need for need in PRECONDITIONS[event.kind] if not _holds(state, need, event)]
            assert not broken, (story.id, n, event, broken)
            _happen(state, event)
            assert _snapshot(state) == story.states[n], (story.id, n, event)
            kinds.add(event.kind)
    assert kinds == set(PRECONDITIONS)  # every event type was drawn and replayed
