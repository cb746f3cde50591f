"""The EntityWorld checker: parse a text back into events, replay the world from its
scene sentence, and say exactly which units break which rule.

    check = check_story(scene, units)               # stage-one units (<ek> placeholders)
    check = check_story(scene, units, names=True)   # final text: names mapped back first

A unit that no phrasing matches exactly is unparsed (a fluency proxy) and changes
nothing; a parsed unit is checked against the world as it stands, then applied.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from eric.world.phrasings import names_to_placeholders, parse_scene, parse_unit
from eric.world.world import Event, World, apply, violations


@dataclass(frozen=True)
class UnitCheck:
    text: str
    event: Event | None  # None: unparsed
    violations: tuple[str, ...] = ()


@dataclass
class StoryCheck:
    units: list[UnitCheck] = field(default_factory=list)

    @property
    def parsed(self) -> int:
        return sum(u.event is not None for u in self.units)

    @property
    def unparsed(self) -> int:
        return len(self.units) - self.parsed

    @property
    def by_rule(self) -> Counter:
        return Counter(rule for u in self.units for rule in u.violations)

    @property
    def violations(self) -> int:
        return sum(len(u.violations) for u in self.units)


class Replay:
    """A world being replayed unit by unit; `peek` checks a unit without applying it."""

    def __init__(self, scene: str, names: bool = False):
        self.world: World = parse_scene(scene)
        self.cast = [c.name for c in self.world.characters]
        self.names = names

    def read(self, unit: str) -> Event | None:
        return parse_unit(names_to_placeholders(unit, self.cast) if self.names else unit)

    def peek(self, unit: str) -> UnitCheck:
        event = self.read(unit)
        return UnitCheck(unit, event, tuple(violations(self.world, event)) if event else ())

    def step(self, unit: str) -> UnitCheck:
        check = self.peek(unit)
        if check.event is not None:
            apply(self.world, check.event)
        return check


def check_story(scene: str, units: list[str], names: bool = False) -> StoryCheck:
    replay = Replay(scene, names)
    return StoryCheck([replay.step(unit) for unit in units])
