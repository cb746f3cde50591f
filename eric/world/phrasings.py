"""How EntityWorld is written and read back: the scene sentence and the event phrasings.

Every event type has several phrasings (word order and verb vary), so a model has to
learn the event, not one string. Slots: {a} the actor, {b} the other character,
{p} a place ("the harbor"), {i} an item ("the silver key"). Characters are written as placeholders
`<ek>` (k = their position in the scene sentence); the checker maps names back to
placeholders before parsing a final text.

The scene (the input sentence, with names), e.g.:
  "Anna Berg and Tom Reed are at the harbor; Mia Berg is at the mill;
   Tom Reed carries the old map; the silver key lies at the mill."
"""

from __future__ import annotations

import random
import re

from eric.world.world import Character, Event, World, new_world

PHRASINGS: dict[str, tuple[str, ...]] = {
    "travel": ("{a} traveled to {p}.", "{a} set out for {p}.", "To {p} went {a}.",
               "{a} made the long journey to {p}.", "After a long road, {a} arrived at {p}."),
    "flee": ("{a} fled from {b} to {p}.", "Afraid of {b}, {a} ran off to {p}.",
             "{a} slipped away from {b} and hid in {p}.", "To get away from {b}, {a} hurried to {p}."),
    "meet": ("{a} met {b}.", "{a} was introduced to {b}.", "{a} and {b} met for the first time.",
             "By chance, {a} ran into {b}.", "{a} made the acquaintance of {b}."),
    "talk": ("{a} talked with {b}.", "{a} and {b} spoke for hours.", "{b} listened as {a} told old stories.",
             "{a} shared the news with {b}."),
    "fight": ("{a} fought {b} and won.", "{b} lost a fight against {a}.",
              "{a} attacked {b} and got the upper hand.", "In a fierce fight, {a} defeated {b}.",
              "{b} was beaten by {a} in a duel."),
    "heal": ("{a} healed {b}.", "{a} tended the wounds of {b}.", "{b} was nursed back to health by {a}.",
             "With herbs and care, {a} healed {b}."),
    "recover": ("{a} recovered from the wounds.", "{a} rested until the wounds had healed.",
                "Slowly, {a} got well again.", "The wounds of {a} healed."),
    "capture": ("{a} captured {b}.", "{b} was taken prisoner by {a}.", "{a} seized {b} and tied them up.",
                "{a} threw {b} into a cell."),
    "escape": ("{a} escaped.", "{a} broke free.", "In the night, {a} slipped out of captivity.",
               "{a} picked the lock and got away."),
    "rescue": ("{a} rescued {b}.", "{b} was set free by {a}.", "{a} broke {b} out of captivity.",
               "{a} cut the ropes that bound {b}."),
    "find": ("{a} found {i}.", "{i} was found by {a}.", "{a} picked up {i}.",
             "Searching the ground, {a} came upon {i}."),
    "give": ("{a} gave {i} to {b}.", "{a} handed {b} {i}.", "{b} received {i} from {a}.",
             "{i} passed from {a} to {b}."),
    "steal": ("{a} stole {i} from {b}.", "{b} was robbed of {i} by {a}.", "While {b} slept, {a} took {i}.",
              "{a} snatched {i} away from {b}."),
    "hide": ("{a} hid {i} in {p}.", "{a} left {i} behind in {p}.", "In {p}, {a} hid {i}.",
             "{i} was hidden by {a} in {p}."),
    "marry": ("{a} married {b}.", "{a} and {b} were married.", "{b} became the spouse of {a}.",
              "{a} wed {b} in a small ceremony."),
    "die": ("{a} died of the wounds.", "{a} did not survive the wounds.", "The wounds of {a} proved fatal.",
            "Weakened by the wounds, {a} passed away."),
    "betray": ("{a} betrayed {b} to the guards.", "{b} was betrayed by {a} and locked up.",
               "{a} turned on {b} and handed them over.", "Trusting {a} was a mistake: {b} ended up in chains."),
    "kill": ("{a} killed {b}.", "{b} was slain by {a}.", "{a} struck down {b} for good.",
             "{a} took the life of {b}."),
    "bury": ("{a} buried {b}.", "{b} was laid to rest by {a}.", "{a} dug a grave for {b}.",
             "With a heavy heart, {a} buried {b}."),
    "mourn": ("{a} mourned {b}.", "{a} wept for {b}.", "The death of {b} broke the heart of {a}.",
              "{a} grieved for {b} for many days."),
    "search": ("{a} searched {p} for {b}.", "In {p}, {a} looked for {b} in vain.",
               "{a} asked around {p} about {b}.", "{a} could not find {b} anywhere in {p}."),
    "wait": ("{a} waited in {p}.", "{a} stayed in {p} for a while.", "In {p}, {a} passed the days quietly.",
             "{a} remained in {p}."),
    "guard": ("{a} guarded {b}.", "{a} kept watch over {b}.", "{b} was watched closely by {a}.",
              "Day and night, {a} stood guard over {b}."),
}

PLACEHOLDER = re.compile(r"<e(\d+)>")
# A place as written: "the harbor"; or a two-word name ("Old Harbor"), the world's places
# before they were nouns, so that the kept samples of those runs still read.
_PLACE = r"the [a-z]+|[A-Z][a-z]+ [A-Z][a-z]+"
_SLOTS = {
    "a": r"(?P<a><e\d+>)",
    "b": r"(?P<b><e\d+>)",
    "p": rf"(?P<p>{_PLACE})",
    "i": r"the (?P<i>[a-z]+ [a-z]+)",
}


def _compile(template: str) -> re.Pattern:
    parts = re.split(r"\{([abpi])\}", template)
    pattern = "".join(_SLOTS[p] if i % 2 else re.escape(p) for i, p in enumerate(parts))
    return re.compile(pattern)


PATTERNS: list[tuple[str, re.Pattern]] = [(kind, _compile(t)) for kind, ts in PHRASINGS.items() for t in ts]


def tag(k: int) -> str:
    return f"<e{k}>"


def place_text(place: str) -> str:
    """How a place is written: "the harbor" (a two-word name as it is)."""
    return place if " " in place else f"the {place}"


def _place(written: str | None) -> str | None:
    return written.removeprefix("the ") if written else None


def render(event: Event, template: str) -> str:
    text = template.format(a=tag(event.a), b=tag(event.b) if event.b is not None else "",
                           p=place_text(event.place) if event.place else "", i=f"the {event.item}" if event.item else "")
    return text[0].upper() + text[1:]  # "{i} passed ..." starts a sentence


def render_event(event: Event, rng: random.Random) -> str:
    return render(event, rng.choice(PHRASINGS[event.kind]))


def parse_unit(text: str) -> Event | None:
    """The event a unit (with placeholders) states, or None when no phrasing matches
    it exactly (or two phrasings read it differently)."""
    text = " ".join(text.split())
    if not text:
        return None
    candidates = {text, text[0].lower() + text[1:]}  # "The silver key was found ..." = "{i} was found ..."
    found = set()
    for kind, pattern in PATTERNS:
        for candidate in candidates:
            m = pattern.fullmatch(candidate)
            if m:
                slots = m.groupdict()
                found.add(Event(kind, _index(slots["a"]), _index(slots.get("b")), _place(slots.get("p")), slots.get("i")))
    return found.pop() if len(found) == 1 else None


def _index(placeholder: str | None) -> int | None:
    return None if placeholder is None else int(PLACEHOLDER.fullmatch(placeholder).group(1))


# -- the scene sentence ------------------------------------------------------------------
class SceneError(ValueError):
    """A scene sentence EntityWorld cannot read."""


def _join_names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def render_scene(w: World) -> str:
    """Who is where, who carries what, what lies where; characters in cast order,
    grouped by place (so the cast order is the order of the scene)."""
    clauses = []
    for place in w.places:
        here = [c.name for c in w.characters if c.location == place]
        if here:
            clauses.append(f"{_join_names(here)} {'is' if len(here) == 1 else 'are'} at {place_text(place)}")
    clauses += [f"{c.name} carries the {c.holds}" for c in w.characters if c.holds]
    clauses += [f"the {item} lies at {place_text(place)}" for item, place in w.items.items() if place is not None]
    return "; ".join(clauses) + "."


_AT = re.compile(rf"(?P<names>.+) (?:is|are) at (?P<place>{_PLACE})")
_CARRIES = re.compile(r"(?P<name>[A-Z][a-z]+ [A-Z][a-z]+) carries the (?P<item>[a-z]+ [a-z]+)")
_LIES = re.compile(rf"the (?P<item>[a-z]+ [a-z]+) lies at (?P<place>{_PLACE})")
_NAME = re.compile(r"[A-Z][a-z]+ [A-Z][a-z]+")


def parse_scene(scene: str) -> World:
    """The world at the start of a story, read from its scene sentence."""
    text = " ".join(scene.split())
    if not text.endswith("."):
        raise SceneError(f"not an EntityWorld scene (no final period): {scene[:60]!r}")
    places: list[str] = []
    characters: list[Character] = []
    items: dict[str, str | None] = {}
    carries: list[tuple[str, str]] = []
    for clause in text[:-1].split("; "):
        if m := _AT.fullmatch(clause):
            names = re.split(r", | and ", m["names"])
            if not all(_NAME.fullmatch(n) for n in names):
                raise SceneError(f"not an EntityWorld scene clause: {clause[:60]!r}")
            places.append(_place(m["place"]))
            characters += [Character(n, places[-1]) for n in names]
        elif m := _CARRIES.fullmatch(clause):
            carries.append((m["name"], m["item"]))
        elif m := _LIES.fullmatch(clause):
            items[m["item"]] = place = _place(m["place"])
            if place not in places:
                places.append(place)
        else:
            raise SceneError(f"not an EntityWorld scene clause: {clause[:60]!r}")
    by_name = {c.name: c for c in characters}
    for name, item in carries:
        if name not in by_name:
            raise SceneError(f"scene: {name!r} carries an item but is nowhere")
        by_name[name].holds = item
        items[item] = None
    if not characters:
        raise SceneError("scene: no characters")
    return new_world(places, characters, items)


# -- names <-> placeholders ----------------------------------------------------------------
def names_to_placeholders(text: str, cast: list[str]) -> str:
    """A unit with names (full, or first name only) written as the cast's placeholders;
    names outside the cast stay as they are (the unit then does not parse)."""
    forms = {name: k for k, name in enumerate(cast)}
    firsts = [name.split()[0] for name in cast]
    forms.update({first: k for k, first in enumerate(firsts) if firsts.count(first) == 1})
    pattern = re.compile(r"\b(" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + r")\b")
    return pattern.sub(lambda m: tag(forms[m.group(1)]), text)
