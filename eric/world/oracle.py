"""The Bayes-optimal critic of ERIC's L_CL on EntityWorld: the oracle.

ERIC's contrastive loss asks the predictor, for unit n and its planned entity p_n, to pick
the joint representation of (unit n, p_n) among candidates (unit, entity) pairs
(eric/evaluate/critics.py: the candidate sets). On EntityWorld the next event of a
character is drawn from a known distribution given the world (eric/world/generate.py
`next_event_distribution`). The oracle knows that world (every character's true state,
who was seen when) and scores each candidate by how likely its true *event label*, (event
kind, the candidate entity's role: actor `a` or other `b`), is for the planned character,
against how common the label is:

    score(anchor i, candidate j) = log P(label_j | p_n involved, world before unit n) - log P(label_j)

the Bayes-optimal InfoNCE critic (log p(y|x)/p(y)) for candidates that differ only by label.
It cannot tell apart two candidates with the same label (what the text adds), nor does it
use which placeholder a candidate carries (critics.py `identity` does; `summed` adds them):
a reference line, not a bound.

    tables = event_tables(seed=42, wanted={"world-42-000123", ...})
    oracle = Oracle(tables, rows, marginal_rows)   # rows: the stage-one rows it will score
    scores = oracle(anchors, candidates)           # [A, C] float64 (critics.py Candidate)
"""

from __future__ import annotations

import math
from collections import Counter

import torch

from eric.world.generate import generate_story, next_event_distribution, story_index, story_rng
from eric.world.world import World

Label = tuple[str, str]  # (event kind, role of the entity: "a" actor, "b" other)
FLOOR = 1e-6  # probability of a label the world rules out (a model's candidate may still carry it)


def involvement(distribution: dict, characters: int) -> list[dict[Label, float]]:
    """Per character: P(next event has this label and involves the character)."""
    out: list[dict[Label, float]] = [{} for _ in range(characters)]
    for event, p in distribution.items():
        for who, role in ((event.a, "a"), (event.b, "b")):
            if who is not None:
                table = out[who]
                table[(event.kind, role)] = table.get((event.kind, role), 0.0) + p
    return out


def event_tables(seed: int, wanted: set[str], cast=(3, 8), events: int = 15) -> dict[str, list]:
    """Regenerate the `wanted` stories of the corpus (each from its own Random, as the
    preprocess stage drew it) and keep, per target unit, the label tables of every
    character before that unit."""
    tables: dict[str, list] = {}
    for sid in sorted(wanted):
        steps: list = []

        def observe(step: int, w: World, last_seen: list[int], steps=steps) -> None:
            if step == 1:
                steps.clear()  # a retried draw starts over
            steps.append(involvement(next_event_distribution(w, step, last_seen), len(w.characters)))

        generate_story(story_rng(seed, story_index(sid)), sid, cast, events, observe=observe)
        tables[sid] = list(steps)
    return tables


def unit_label(row: dict, unit: int, entity: int) -> Label:
    """What the oracle scores of a candidate: the unit's event kind and the entity's role in it."""
    actor = row["world_focal"][unit]
    return row["world_events"][unit], "a" if actor == f"<e{entity}>" else "b"


class Oracle:
    """The oracle critic over candidates with `story`, `unit`, `entity` (critics.py Candidate);
    `marginal_rows` (the training split) give the labels' marginal, its prior."""

    def __init__(self, tables: dict[str, list], rows: list[dict], marginal_rows: list[dict]):
        self.tables = tables
        self.rows = {r["id"]: r for r in rows}
        counts = Counter(unit_label(r, n, int(e[2:-1])) for r in marginal_rows
                         for n, ents in enumerate(r["unit_entities"]) for e in ents)
        total = sum(counts.values())
        self.log_marginal = {label: math.log(c / total) for label, c in counts.items()}

    def __call__(self, anchors: list, candidates: list) -> torch.Tensor:
        labels = [unit_label(self.rows[c.story], c.unit, c.entity) for c in candidates]
        kinds = sorted(set(labels))
        column = torch.tensor([kinds.index(label) for label in labels], dtype=torch.long)
        prior = torch.tensor([self.log_marginal.get(label, math.log(FLOOR)) for label in kinds], dtype=torch.float64)
        by_kind = torch.empty(len(anchors), len(kinds), dtype=torch.float64)
        for i, anchor in enumerate(anchors):
            table = self.tables[anchor.story][anchor.unit][anchor.entity]
            total = sum(table.values()) or 1.0
            by_kind[i] = torch.tensor([math.log(max(table.get(label, 0.0) / total, FLOOR)) for label in kinds],
                                      dtype=torch.float64)
        return (by_kind - prior)[:, column]
