"""EntityWorld stories: deterministic per seed, and always accepted by the checker."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from eric.data.examples import stage_one_target
from eric.evaluate.io import deanonymize
from eric.world.checker import check_story
from eric.world.generate import WorldError, allowed_events, draw_world, generate_stories, generate_story
from eric.world.metrics import text_units
from eric.world.names import FIRST_NAMES, ITEMS, PLACES, SURNAMES
from eric.world.phrasings import PHRASINGS, parse_scene
from eric.world.world import EVENT_TYPES, Event, apply, violations


@pytest.fixture(scope="module")
def thousand():
    return list(generate_stories(seed=7, count=1000))


def test_the_same_seed_gives_the_same_stories_and_another_seed_others():
    first = [(s.scene, s.units, s.states) for s in generate_stories(3, 20)]
    again = [(s.scene, s.units, s.states) for s in generate_stories(3, 20)]
    other = [(s.scene, s.units) for s in generate_stories(4, 20)]
    assert first == again
    assert [(a, b) for a, b, _ in first] != other


def test_a_corpus_is_the_first_stories_of_a_larger_one_and_workers_change_nothing():
    small = [(s.id, s.units, s.states) for s in generate_stories(3, 12)]
    large = [(s.id, s.units, s.states) for s in generate_stories(3, 30, workers=2)]
    assert large[:12] == small and len({tuple(units) for _, units, _ in large}) == 30  # stories differ


def test_pruned_allowed_events_equal_judging_every_combination(thousand):
    """The generator prunes candidates before `violations`; the list must be the brute force one."""
    rng = random.Random(5)
    for _ in range(150):
        w = draw_world(rng, (3, 6))
        for _ in range(rng.randint(0, 12)):  # walk the world into varied states
            options = allowed_events(w, rng.randrange(len(w.characters)))
            if options:
                apply(w, rng.choice(options))
        actor = rng.randrange(len(w.characters))
        brute = [
            Event(kind, actor, b, place, item)
            for kind, spec in EVENT_TYPES.items()
            for b in ([k for k in range(len(w.characters)) if k != actor] if "b" in spec.roles else [None])
            for place in (w.places if "p" in spec.roles else [None])
            for item in (list(w.items) if "i" in spec.roles else [None])
            if not violations(w, Event(kind, actor, b, place, item))
        ]
        assert allowed_events(w, actor) == brute


def test_the_generator_does_not_touch_global_random_state():
    random.seed(0)
    expected = random.random()
    random.seed(0)
    list(generate_stories(5, 3))
    assert random.random() == expected


def test_the_checker_accepts_every_generated_story(thousand):
    for story in thousand:
        check = check_story(story.scene, story.units)
        assert check.unparsed == 0 and check.violations == 0, story.id
        assert [u.event for u in check.units] == story.events


def test_the_checker_accepts_the_stories_written_with_names(thousand):
    for story in thousand[:300]:
        mentions = [{"placeholder": p, "mention": m} for p, m in story.mentions()]
        text = deanonymize(stage_one_target(story.units), mentions)
        assert "<e" not in text
        check = check_story(story.scene, text_units(text), names=True)
        assert check.unparsed == 0 and check.violations == 0, text


def test_stories_follow_the_world_rules_on_cast_places_and_length(thousand):
    for story in thousand:
        world = parse_scene(story.scene)
        assert [c.name for c in world.characters] == story.cast
        assert 3 <= len(story.cast) <= 8 and len(story.units) == 15
        assert 2 <= len(world.places) <= 4
        firsts = [n.split()[0] for n in story.cast]
        assert len(set(firsts)) == len(firsts)
        assert len(story.states) == 15 and all(len(s) == len(story.cast) for s in story.states)
        assert story.focal == [f"<e{e.a}>" for e in story.events]
    kinds = Counter(e.kind for s in thousand for e in s.events)
    assert set(kinds) == set(EVENT_TYPES)  # every event type occurs
    assert any(len(set(s.split()[-1] for s in st.cast)) < len(st.cast) for st in thousand)  # shared surnames


def test_states_after_a_unit_are_the_replayed_world():
    story = generate_story(random.Random(11), "s", cast=(4, 4), events=6)
    assert len(story.cast) == 4
    from eric.world.checker import Replay

    replay = Replay(story.scene)
    for unit, state in zip(story.units, story.states):
        replay.step(unit)
        assert replay.world.snapshot() == state


def test_long_silences_are_broken_more_often_than_chance(thousand):
    """The staleness bias: an actor is usually someone not mentioned in the previous unit."""
    repeats = sum(a.a == b.a for s in thousand for a, b in zip(s.events, s.events[1:]))
    pairs = sum(len(s.events) - 1 for s in thousand)
    mean_cast = sum(len(s.cast) for s in thousand) / len(thousand)
    assert repeats / pairs < 1 / mean_cast


def test_bad_generator_arguments_fail_in_one_line():
    with pytest.raises(WorldError, match="cast"):
        generate_story(random.Random(0), "s", cast=(5, 3))


def test_name_lists_are_large_distinct_and_apart_from_places():
    assert len(FIRST_NAMES) >= 250 and len(SURNAMES) >= 250
    assert len(set(FIRST_NAMES)) == len(FIRST_NAMES) and len(set(SURNAMES)) == len(SURNAMES)
    assert not {n.lower() for n in FIRST_NAMES + SURNAMES} & set(PLACES)
    assert all(len(i.split()) == 2 for i in ITEMS)


def test_a_place_is_one_lowercase_noun_no_item_or_phrasing_uses():
    """A unit's place is a choice among the scene's, with nothing to spell: one word, and
    not a word the items or the phrasings use elsewhere (it could be read from two slots)."""
    assert len(set(PLACES)) == len(PLACES) >= 30 and all(p.isalpha() and p.islower() for p in PLACES)
    template_words = {w.strip(".,:").lower() for ts in PHRASINGS.values() for t in ts for w in t.split()}
    assert not set(PLACES) & ({w for i in ITEMS for w in i.split()} | template_words)
