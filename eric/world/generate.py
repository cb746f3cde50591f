"""EntityWorld stories: a scene, then events whose preconditions all hold.

    story = generate_story(random.Random(seed), "world-0", cast=(3, 8), events=15)

Sentence 1 (the input) sets the scene: who is where, who carries what. Sentences
2..16 are events. Each step picks the actor first, favouring characters not
mentioned for a while (long-range tracking), then an event type among those allowed
for them, weighted towards events that change states (EVENT_TYPES weights), then the
other arguments uniformly. Deterministic given the Random it is handed.
"""

from __future__ import annotations

import random
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from dataclasses import dataclass
from typing import Callable, Iterator

from eric.world.names import FIRST_NAMES, ITEMS, PLACES, SURNAMES
from eric.world.phrasings import PLACEHOLDER, render_event, render_scene, tag
from eric.world.world import EVENT_TYPES, Character, Event, World, apply, new_world, violations

FAMILY_SHARE = 0.3  # chance that a character takes the surname of an earlier one
STALENESS_POWER = 1.5  # actor weight = (1 + units since last mentioned) ** power
MAX_TRIES = 100  # a story in which everyone dies early is drawn again


class WorldError(ValueError):
    """EntityWorld was asked for something it cannot generate."""


@dataclass(frozen=True)
class Story:
    id: str
    scene: str  # the input sentence, with names
    cast: list[str]  # full names; index k is <ek>
    units: list[str]  # the target units, with placeholders
    events: list[Event]
    states: list[list[dict]]  # after each unit: every character's state (World.snapshot)

    @property
    def focal(self) -> list[str]:
        return [tag(e.a) for e in self.events]

    def mentions(self) -> list[tuple[str, str]]:
        """(placeholder, mention) in text order: the full name first, then the first name."""
        seen: set[str] = set()
        out = []
        for unit in self.units:
            for m in PLACEHOLDER.finditer(unit):
                name = self.cast[int(m.group(1))]
                out.append((m.group(0), name.split()[0] if m.group(0) in seen else name))
                seen.add(m.group(0))
        return out


def draw_world(rng: random.Random, cast: tuple[int, int]) -> World:
    n = rng.randint(*cast)
    firsts = rng.sample(FIRST_NAMES, n)
    surnames: list[str] = []
    for _ in range(n):
        family = surnames and rng.random() < FAMILY_SHARE
        surnames.append(rng.choice(surnames) if family else rng.choice(SURNAMES))
    places = rng.sample(PLACES, rng.randint(2, min(4, n)))
    # every place has someone, so that the scene names it
    spots = places + [rng.choice(places) for _ in range(n - len(places))]
    rng.shuffle(spots)
    people = [Character(f"{f} {s}", p) for f, s, p in zip(firsts, surnames, spots)]
    people.sort(key=lambda c: places.index(c.location))  # cast order = scene order
    items: dict[str, str | None] = {}
    for item in rng.sample(ITEMS, rng.randint(1, 3)):
        free = [c for c in people if c.holds is None]
        if free and rng.random() < 0.4:
            rng.choice(free).holds = item
            items[item] = None
        else:
            items[item] = rng.choice(places)
    return new_world(places, people, items)


def allowed_events(w: World, actor: int) -> list[Event]:
    """Every event with `actor` as its actor that breaks no rule (in EVENT_TYPES order)."""
    return [e for kind in EVENT_TYPES for e in kind_events(w, actor, kind)]


def kind_events(w: World, actor: int, kind: str) -> Iterator[Event]:
    """The allowed events of one kind with `actor` as its actor.

    Candidates are pruned by what the actor alone decides (a kind whose actor check fails
    has no allowed event; a partner must share or not share the actor's place, an item
    must be held or lie here) before `violations` judges each survivor, so the events are
    the same as judging every combination, many times faster."""
    spec, a = EVENT_TYPES[kind], w.characters[actor]
    if not all(_actor_checks(a).get(name, True) for name in spec.requires):
        return
    for b in _partners(w, actor, spec):
        for place in _places(w, a.location, spec):
            for item in _items(w, a, spec):
                event = Event(kind, actor, b, place, item)
                if not violations(w, event):
                    yield event


def _actor_checks(a) -> dict[str, bool]:
    """The checks that read only the actor (no partner, place or item)."""
    return {"a_alive": a.condition != "dead", "a_free": a.condition != "captive", "a_well": a.condition != "wounded",
            "a_wounded": a.condition == "wounded", "a_captive": a.condition == "captive", "a_hands_free": a.holds is None}


def _partners(w: World, actor: int, spec) -> list[int | None]:
    if "b" not in spec.roles:
        return [None]
    here = w.characters[actor].location
    together, away = "together" in spec.requires, "b_away" in spec.requires
    return [b for b, c in enumerate(w.characters)
            if b != actor and (not together or c.location == here) and (not away or c.location != here)]


def _places(w: World, here: str, spec) -> list[str | None]:
    if "p" not in spec.roles:
        return [None]
    if "at_place" in spec.requires:
        return [here]
    return [p for p in w.places if p != here] if "moves" in spec.requires else list(w.places)


def _items(w: World, a, spec) -> list[str | None]:
    if "i" not in spec.roles:
        return [None]
    if "a_holds" in spec.requires:
        return [i for i in w.items if i == a.holds]
    return [i for i, at in w.items.items() if at == a.location] if "item_here" in spec.requires else list(w.items)


def _living(w: World) -> list[int]:
    return [k for k, c in enumerate(w.characters) if c.condition != "dead"]


def _staleness(step: int, last_seen: list[int], actor: int) -> float:
    return (1 + step - last_seen[actor]) ** STALENESS_POWER


def _kinds(options: list[Event]) -> list[str]:
    return sorted({e.kind for e in options}, key=list(EVENT_TYPES).index)


def _next_event(w: World, rng: random.Random, step: int, last_seen: list[int]) -> Event | None:
    actors = _living(w)
    while actors:
        weights = [_staleness(step, last_seen, k) for k in actors]
        actor = rng.choices(actors, weights)[0]
        options = allowed_events(w, actor)
        if options:
            kinds = _kinds(options)
            kind = rng.choices(kinds, [EVENT_TYPES[k].weight for k in kinds])[0]
            return rng.choice([e for e in options if e.kind == kind])
        actors.remove(actor)
    return None


def next_event_distribution(w: World, step: int, last_seen: list[int]) -> dict[Event, float]:
    """The exact probability of each event `_next_event` can draw at this point: an actor by
    staleness among those with an allowed event (a redraw skips the others), a kind by its
    weight, then one allowed event of that kind uniformly (the oracle of eric/world/oracle.py)."""
    options = {k: allowed_events(w, k) for k in _living(w)}
    actors = {k: _staleness(step, last_seen, k) for k, found in options.items() if found}
    total = sum(actors.values())
    out: dict[Event, float] = {}
    for actor, weight in actors.items():
        kinds = _kinds(options[actor])
        kind_total = sum(EVENT_TYPES[k].weight for k in kinds)
        for kind in kinds:
            events = [e for e in options[actor] if e.kind == kind]
            for e in events:
                out[e] = weight / total * EVENT_TYPES[kind].weight / kind_total / len(events)
    return out


Observer = Callable[[int, World, list[int]], None]


def generate_story(
    rng: random.Random, story_id: str, cast: tuple[int, int] = (3, 8), events: int = 15,
    observe: Observer | None = None,
) -> Story:
    """`observe(step, world, last_seen)`, if given, sees the world before each event is drawn
    (step 1 again when a draw is retried); it must not change them."""
    if not 2 <= cast[0] <= cast[1] or events < 1:
        raise WorldError(f"cannot generate a story with cast {cast} and {events} events")
    for _ in range(MAX_TRIES):
        w = draw_world(rng, cast)
        scene, names = render_scene(w), [c.name for c in w.characters]
        last_seen = [0] * len(names)
        units, drawn, states = [], [], []
        for step in range(1, events + 1):
            if observe is not None:
                observe(step, w, last_seen)
            event = _next_event(w, rng, step, last_seen)
            if event is None:
                break
            units.append(render_event(event, rng))
            apply(w, event)
            drawn.append(event)
            states.append(w.snapshot())
            for k in (event.a, event.b):
                if k is not None:
                    last_seen[k] = step
        if len(units) == events:
            return Story(story_id, scene, names, units, drawn, states)
    raise WorldError(f"{story_id}: no story of {events} events after {MAX_TRIES} draws")


def generate_stories(seed: int, count: int, cast: tuple[int, int] = (3, 8), events: int = 15, workers: int = 1):
    """`count` stories, story i drawn from its own Random (`story_rng`): the same seed gives
    the same corpus, a corpus is the first stories of any larger one (its test stories
    stay when the budget grows), and `workers` processes give the same stories, in order."""
    draw = partial(_story, seed, cast, events)
    if workers <= 1:
        yield from map(draw, range(count))
        return
    with ProcessPoolExecutor(workers) as pool:
        yield from pool.map(draw, range(count), chunksize=max(1, min(500, count // (4 * workers))))


def _story(seed: int, cast: tuple[int, int], events: int, index: int) -> Story:
    return generate_story(story_rng(seed, index), story_id(seed, index), cast, events)


def story_rng(seed: int, index: int) -> random.Random:
    return random.Random(f"world-{seed}-{index}")  # a str seed is hashed by SHA-512: stable across runs


def story_id(seed: int, index: int) -> str:
    return f"world-{seed}-{index:06d}"


def story_index(sid: str) -> int:
    """The index `story_id` wrote into an id."""
    return int(sid.rsplit("-", 1)[1])
