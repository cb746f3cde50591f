"""The oracle's event distribution is the generator's, and its L_CL beats chance for the right reason."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
import torch

from eric.evaluate.critics import batch_pairs, candidate_mask, critic_loss
from eric.world.corpus import stage_one_row
from eric.world.generate import _next_event, draw_world, generate_stories, next_event_distribution
from eric.world.oracle import Oracle, event_tables, involvement


def test_next_event_distribution_is_what_the_generator_draws():
    world = draw_world(random.Random(5), (4, 6))
    last_seen = [0, 0, 1, 0, 0, 0][: len(world.characters)]
    exact = next_event_distribution(world, 2, last_seen)
    assert sum(exact.values()) == pytest.approx(1.0)
    draws = 1500
    counts = Counter()
    for i in range(draws):
        event = _next_event(world, random.Random(i), 2, last_seen)
        counts[(event.a, event.kind)] += 1
    expected = Counter()
    for event, p in exact.items():
        expected[(event.a, event.kind)] += p
    for key in set(counts) | set(expected):
        assert counts[key] / draws == pytest.approx(expected[key], abs=0.04), key


def test_every_drawn_event_was_possible_for_the_oracle():
    stories = list(generate_stories(seed=11, count=6, cast=(3, 6)))
    tables = event_tables(11, {s.id for s in stories[::2]}, cast=(3, 6))
    assert set(tables) == {s.id for s in stories[::2]}
    for story in stories[::2]:
        assert len(tables[story.id]) == len(story.events)
        for step, event in enumerate(story.events):
            assert tables[story.id][step][event.a][(event.kind, "a")] > 0
            if event.b is not None:
                assert tables[story.id][step][event.b][(event.kind, "b")] > 0


def test_involvement_splits_each_event_between_its_characters():
    world = draw_world(random.Random(2), (3, 5))
    tables = involvement(next_event_distribution(world, 1, [0] * len(world.characters)), len(world.characters))
    actor_mass = sum(p for table in tables for (kind, role), p in table.items() if role == "a")
    assert actor_mass == pytest.approx(1.0)  # every event has exactly one actor


def _batch(rows: list[dict]) -> dict:
    """Each unit plans its actor (the focal character), as a collated batch would mark it."""
    units = max(len(r["units"]) for r in rows)
    entity_ids = torch.full((len(rows), units), -100)
    for b, row in enumerate(rows):
        for n, focal in enumerate(row["world_focal"]):
            entity_ids[b, n] = int(focal[2:-1]) + 1
    return {"entity_ids": entity_ids, "entity_positions": torch.zeros_like(entity_ids),
            "labels": torch.zeros(len(rows), 4, dtype=torch.long)}


def test_the_oracle_beats_chance_and_a_blind_one_does_not():
    stories = list(generate_stories(seed=4, count=16, cast=(3, 5)))
    rows = [stage_one_row(s) for s in stories]
    tables = event_tables(4, {r["id"] for r in rows}, cast=(3, 5))
    pairs = batch_pairs(_batch(rows[:8]), [r["id"] for r in rows[:8]], {})
    allowed, counted = candidate_mask(pairs, "batch")
    loss, chance, _ = critic_loss(Oracle(tables, rows, rows)(pairs.anchors, pairs.candidates), allowed, counted)
    assert chance == pytest.approx(math.log(8 * 15))
    assert loss < 0.9 * chance
    # an oracle that knows the story's next event but not which character is planned does worse
    blind_tables = {sid: [[_merged(step)] * len(step) for step in steps] for sid, steps in tables.items()}
    blind, _, _ = critic_loss(Oracle(blind_tables, rows, rows)(pairs.anchors, pairs.candidates), allowed, counted)
    assert loss < blind


def _merged(per_character: list[dict]) -> dict:
    out = Counter()
    for table in per_character:
        out.update(table)
    return dict(out)
