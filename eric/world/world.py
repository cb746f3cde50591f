"""EntityWorld's rules: a character's state, the event types, their preconditions and effects.

One function decides what is allowed (`violations`) and one what happens (`apply`);
the generator draws only events with no violation and the checker reports the ones a
text breaks, so both read the same rules.

A character's state: location (one of the story's places), condition (well,
wounded, captive, dead), the item held (or none), whom they know, their spouse.
Characters who share a surname know each other from the start (family).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

CONDITIONS = ("well", "wounded", "captive", "dead")

# -- rules (the names the checker counts) ------------------------------------------------
UNKNOWN_CHARACTER = "unknown_character"  # a placeholder or name outside the cast
UNKNOWN_PLACE = "unknown_place"  # a place that is not in the story
UNKNOWN_ITEM = "unknown_item"
SAME_CHARACTER = "same_character"  # someone meets, fights, marries ... themselves
DEAD = "dead_character"  # a dead character acts or is treated as alive
CAPTIVE = "captive_acts"  # a captive travels, fights, gives ...
WOUNDED = "wounded_acts"  # a wounded character captures, heals, kills (needs to be well)
NOT_WOUNDED = "not_wounded"  # heal, recover, die of wounds without being wounded
NOT_CAPTIVE = "not_captive"  # escape, be rescued, be guarded without being captive
ALREADY_CAPTIVE = "already_captive"  # capture or betray a captive
NOT_DEAD = "not_dead"  # bury or mourn someone alive
APART = "not_together"  # two characters interact from different places
ALREADY_THERE = "already_there"  # travel or flee to where one already is
WRONG_PLACE = "wrong_place"  # act in a place one is not in
TARGET_HERE = "target_here"  # search a place for someone who is there
STRANGERS = "strangers"  # talk, marry, betray, mourn, search for someone unknown
MARRIED = "already_married"
NOT_HELD = "item_not_held"  # give, steal, hide an item the holder does not have
NOT_HERE = "item_not_here"  # find an item that does not lie where one is
HANDS_FULL = "hands_full"  # take an item while holding one

RULES = (
    UNKNOWN_CHARACTER, UNKNOWN_PLACE, UNKNOWN_ITEM, SAME_CHARACTER, DEAD, CAPTIVE, WOUNDED, NOT_WOUNDED,
    NOT_CAPTIVE, ALREADY_CAPTIVE, NOT_DEAD, APART, ALREADY_THERE, WRONG_PLACE, TARGET_HERE, STRANGERS,
    MARRIED, NOT_HELD, NOT_HERE, HANDS_FULL,
)
# The rules only the replayed state can answer (entity tracking); the other four need
# nothing but the scene's cast, places and items (grounding).
STATE_RULES = tuple(r for r in RULES if r not in (UNKNOWN_CHARACTER, UNKNOWN_PLACE, UNKNOWN_ITEM, SAME_CHARACTER))


@dataclass
class Character:
    name: str  # "Anna Berg"
    location: str
    condition: str = "well"
    holds: str | None = None
    knows: set[int] = field(default_factory=set)
    spouse: int | None = None

    @property
    def first(self) -> str:
        return self.name.split()[0]

    @property
    def surname(self) -> str:
        return self.name.split()[-1]


@dataclass(frozen=True)
class Event:
    kind: str
    a: int  # the actor: the unit's focal character
    b: int | None = None
    place: str | None = None
    item: str | None = None


@dataclass(frozen=True)
class EventType:
    roles: str  # which of a, b, p(lace), i(tem) it takes
    requires: tuple[str, ...]  # names of the checks below
    weight: float  # how often the generator picks it (state changes are favoured)


# Per-character checks are tried in order and only the first failure per character is
# reported (a dead captive who travels breaks one rule, not three).
EVENT_TYPES: dict[str, EventType] = {
    "travel": EventType("ap", ("a_alive", "a_free", "moves"), 3.0),
    "flee": EventType("abp", ("a_alive", "a_free", "b_alive", "together", "moves"), 1.0),
    "meet": EventType("ab", ("a_alive", "a_free", "b_alive", "b_free", "together"), 3.0),
    "talk": EventType("ab", ("a_alive", "b_alive", "together", "know"), 0.8),
    "fight": EventType("ab", ("a_alive", "a_free", "b_alive", "b_free", "together"), 2.0),
    "heal": EventType("ab", ("a_alive", "a_free", "a_well", "b_alive", "b_wounded", "together"), 2.5),
    "recover": EventType("a", ("a_alive", "a_wounded"), 1.5),
    "capture": EventType("ab", ("a_alive", "a_free", "a_well", "b_alive", "b_not_captive", "together"), 2.0),
    "escape": EventType("a", ("a_alive", "a_captive"), 2.5),
    "rescue": EventType("ab", ("a_alive", "a_free", "a_well", "b_alive", "b_captive", "together"), 2.5),
    "find": EventType("ai", ("a_alive", "a_free", "item_here", "a_hands_free"), 2.5),
    "give": EventType("abi", ("a_alive", "a_free", "b_alive", "b_free", "together", "a_holds", "b_hands_free"), 2.0),
    "steal": EventType("abi", ("a_alive", "a_free", "b_alive", "together", "b_holds", "a_hands_free"), 1.5),
    "hide": EventType("aip", ("a_alive", "a_free", "a_holds", "at_place"), 1.0),
    "marry": EventType("ab", ("a_alive", "a_free", "b_alive", "b_free", "together", "know", "unmarried"), 2.0),
    "die": EventType("a", ("a_alive", "a_wounded"), 1.0),
    "betray": EventType("ab", ("a_alive", "a_free", "a_well", "b_alive", "b_not_captive", "together", "know"), 1.0),
    "kill": EventType("ab", ("a_alive", "a_free", "a_well", "b_alive", "together"), 0.6),
    "bury": EventType("ab", ("a_alive", "a_free", "b_dead", "together"), 2.0),
    "mourn": EventType("ab", ("a_alive", "b_dead", "know"), 1.5),
    "search": EventType("abp", ("a_alive", "a_free", "at_place", "b_away", "know"), 0.7),
    "wait": EventType("ap", ("a_alive", "at_place"), 0.3),
    "guard": EventType("ab", ("a_alive", "a_free", "b_alive", "b_captive", "together"), 1.0),
}


@dataclass
class World:
    places: list[str]
    characters: list[Character]  # index k is placeholder <ek>
    items: dict[str, str | None]  # item -> the place it lies at, None while someone holds it

    def copy(self) -> "World":
        return copy.deepcopy(self)

    def holder(self, item: str) -> int | None:
        return next((k for k, c in enumerate(self.characters) if c.holds == item), None)

    def snapshot(self) -> list[dict]:
        """Every character's state (the ground truth kept after each unit)."""
        return [
            {"location": c.location, "condition": c.condition, "holds": c.holds,
             "knows": [f"<e{k}>" for k in sorted(c.knows)],
             "spouse": None if c.spouse is None else f"<e{c.spouse}>"}
            for c in self.characters
        ]


def new_world(places: list[str], characters: list[Character], items: dict[str, str | None]) -> World:
    """A world at the scene: family (a shared surname) know each other."""
    for i, c in enumerate(characters):
        c.knows |= {j for j, d in enumerate(characters) if j != i and d.surname == c.surname}
    return World(list(places), characters, dict(items))


# -- what is allowed ---------------------------------------------------------------------
# Each check: the rule it reports when it fails, and a test of (world, event, a, b).
# Checks named a_* or b_* read one character's condition; the others relate the event's
# arguments. A check that reads b is only asked of events with a partner.
Check = Callable[[World, Event, Character, "Character | None"], bool]
CHECKS: dict[str, tuple[str, Check]] = {
    "a_alive": (DEAD, lambda w, e, a, b: a.condition != "dead"),
    "a_free": (CAPTIVE, lambda w, e, a, b: a.condition != "captive"),
    "a_well": (WOUNDED, lambda w, e, a, b: a.condition != "wounded"),
    "a_wounded": (NOT_WOUNDED, lambda w, e, a, b: a.condition == "wounded"),
    "a_captive": (NOT_CAPTIVE, lambda w, e, a, b: a.condition == "captive"),
    "b_alive": (DEAD, lambda w, e, a, b: b.condition != "dead"),
    "b_free": (CAPTIVE, lambda w, e, a, b: b.condition != "captive"),
    "b_wounded": (NOT_WOUNDED, lambda w, e, a, b: b.condition == "wounded"),
    "b_captive": (NOT_CAPTIVE, lambda w, e, a, b: b.condition == "captive"),
    "b_not_captive": (ALREADY_CAPTIVE, lambda w, e, a, b: b.condition != "captive"),
    "b_dead": (NOT_DEAD, lambda w, e, a, b: b.condition == "dead"),
    "moves": (ALREADY_THERE, lambda w, e, a, b: e.place != a.location),
    "at_place": (WRONG_PLACE, lambda w, e, a, b: e.place == a.location),
    "a_hands_free": (HANDS_FULL, lambda w, e, a, b: a.holds is None),
    "a_holds": (NOT_HELD, lambda w, e, a, b: e.item is not None and a.holds == e.item),
    "item_here": (NOT_HERE, lambda w, e, a, b: e.item is not None and w.items.get(e.item) == a.location),
    "together": (APART, lambda w, e, a, b: a.location == b.location),
    "b_away": (TARGET_HERE, lambda w, e, a, b: a.location != b.location),
    "know": (STRANGERS, lambda w, e, a, b: e.b in a.knows),
    "unmarried": (MARRIED, lambda w, e, a, b: a.spouse is None and b.spouse is None),
    "b_hands_free": (HANDS_FULL, lambda w, e, a, b: b.holds is None),
    "b_holds": (NOT_HELD, lambda w, e, a, b: e.item is not None and b.holds == e.item),
}
_PERSON = {name for name in CHECKS if name[:2] in ("a_", "b_") and name not in ("a_hands_free", "a_holds", "b_hands_free", "b_holds")}
_READS_B = {"together", "b_away", "know", "unmarried"} | {name for name in CHECKS if name.startswith("b_")}


def violations(w: World, e: Event) -> list[str]:
    """The rules `e` breaks in world `w` (empty: allowed). Unknown event types raise."""
    spec = EVENT_TYPES[e.kind]
    cast = range(len(w.characters))
    if e.a not in cast or (e.b is not None and e.b not in cast):
        return [UNKNOWN_CHARACTER]
    found: list[str] = []
    if e.b is not None and e.a == e.b:
        found.append(SAME_CHARACTER)
    unknown_place = e.place is not None and e.place not in w.places
    if unknown_place:
        found.append(UNKNOWN_PLACE)
    unknown_item = e.item is not None and e.item not in w.items
    if unknown_item:
        found.append(UNKNOWN_ITEM)
    a = w.characters[e.a]
    b = w.characters[e.b] if e.b is not None else None
    failed_for: set[str] = set()  # only the first failing condition check per character
    for name in spec.requires:
        if b is None and name in _READS_B:
            continue
        rule, holds = CHECKS[name]
        if name in _PERSON:
            if name[0] not in failed_for and not holds(w, e, a, b):
                failed_for.add(name[0])
                found.append(rule)
        elif not holds(w, e, a, b):
            skip = (unknown_item and rule in (NOT_HELD, NOT_HERE)) or (unknown_place and rule in (ALREADY_THERE, WRONG_PLACE))
            if not skip:
                found.append(rule)
    return list(dict.fromkeys(found))


# -- what happens ------------------------------------------------------------------------
def apply(w: World, e: Event) -> None:
    """Apply `e`'s effects (also to an event that broke a rule: the text says it happened).
    Events naming a character outside the cast change nothing."""
    n = len(w.characters)
    if not 0 <= e.a < n or (e.b is not None and not 0 <= e.b < n):
        return
    a = w.characters[e.a]
    b = w.characters[e.b] if e.b is not None else None
    kind = e.kind
    if kind in ("travel", "flee") and e.place in w.places:
        a.location = e.place
    elif kind in ("meet", "rescue", "marry") and b is not None and e.a != e.b:
        a.knows.add(e.b)
        b.knows.add(e.a)
    if kind == "fight" and b is not None:
        _set_condition(w, e.b, "dead" if b.condition == "wounded" else "wounded")
    elif kind in ("heal", "rescue") and b is not None:
        _set_condition(w, e.b, "well")
    elif kind in ("recover", "escape"):
        _set_condition(w, e.a, "well")
    elif kind in ("capture", "betray") and b is not None:
        _set_condition(w, e.b, "captive")
    elif kind == "die":
        _set_condition(w, e.a, "dead")
    elif kind == "kill" and b is not None:
        _set_condition(w, e.b, "dead")
    elif kind == "marry" and b is not None and e.a != e.b:
        a.spouse, b.spouse = e.b, e.a
    elif kind in ("find", "steal") and e.item in w.items:
        _hand(w, e.a, e.item)
    elif kind == "give" and e.item in w.items and e.b is not None:
        _hand(w, e.b, e.item)
    elif kind == "hide" and e.item in w.items:
        _take(w, e.item)
        w.items[e.item] = a.location


def _set_condition(w: World, k: int, condition: str) -> None:
    c = w.characters[k]
    c.condition = condition
    if condition == "dead" and c.holds is not None:  # the item falls where they lie
        w.items[c.holds] = c.location
        c.holds = None


def _take(w: World, item: str) -> None:
    holder = w.holder(item)
    if holder is not None:
        w.characters[holder].holds = None
    w.items[item] = None


def _hand(w: World, k: int, item: str) -> None:
    c = w.characters[k]
    if c.holds is not None and c.holds != item:  # hands full (a broken rule): drop the old item
        w.items[c.holds] = c.location
    _take(w, item)
    c.holds = item
