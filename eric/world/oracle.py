"""The best L_CL a state predictor can reach on EntityWorld: an oracle with the same candidates.

ERIC's contrastive loss asks the predictor, for unit n and its planned entity p_n, to pick
the joint representation of (unit n, p_n) among every (unit, entity) pair of the batch.
On EntityWorld the next event of a character is drawn from a known distribution given the
world (eric/world/generate.py `next_event_distribution`). The oracle knows that world (every
character's true state, who was seen when) and scores each candidate by how likely its
true *event label*, (event kind, the candidate entity's role: actor `a` or other `b`), is
for the planned character, against how common the label is:

    score(anchor i, candidate j) = log P(label_j | p_n involved, world before unit n) - log P(label_j)

the Bayes-optimal InfoNCE critic (log p(y|x)/p(y)) for candidates that differ only by label.
Its loss on the batch is the target line for a predictor that tracks entities; ln(candidates)
is chance. It cannot tell apart two candidates with the same label (what the text adds), so a
model may beat it; it is a reference, not a bound.

    tables = event_tables(seed=42, wanted={"world-42-000123", ...})
    oracle = OracleLoss(tables, rows, entity_class)   # rows: the stage-one rows of the batches
    loss, chance = oracle(batch, rows_of_batch)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

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


@dataclass
class Candidate:
    story: str
    unit: int  # 0-based target unit
    entity: int  # cast index k of <ek>


def _label(row: dict, unit: int, entity: int) -> Label:
    actor = row["world_focal"][unit]
    return row["world_events"][unit], "a" if actor == f"<e{entity}>" else "b"


class OracleLoss:
    """The oracle's InfoNCE on collated batches (the model's anchors, positives and hard negatives)."""

    def __init__(self, tables: dict[str, list], entity_class: dict[int, int], marginal_rows: list[dict]):
        self.tables = tables
        self.entity_of_token = {token: cls - 1 for token, cls in entity_class.items()}  # token id -> k
        counts = Counter(_label(r, n, int(e[2:-1])) for r in marginal_rows
                         for n, ents in enumerate(r["unit_entities"]) for e in ents)
        total = sum(counts.values())
        self.marginal = {label: c / total for label, c in counts.items()}

    def pairs(self, batch: dict, rows: list[dict]) -> tuple[list[Candidate], list[Candidate]]:
        """(anchors = positives, hard negatives) in the model's order (eric/model/modeling_eric.py)."""
        entity_ids, positions = batch["entity_ids"], batch["entity_positions"]
        anchors, negatives = [], []
        for b, row in enumerate(rows):
            for n in range(entity_ids.shape[1]):
                if int(entity_ids[b, n]) > 0 and int(positions[b, n]) >= 0:
                    anchors.append(Candidate(row["id"], n, int(entity_ids[b, n]) - 1))
        hard = batch.get("hard_negative_positions")
        if hard is not None:
            for b, row in enumerate(rows):
                for n in range(hard.shape[1]):
                    if int(entity_ids[b, n]) > 0 and int(hard[b, n]) >= 0:
                        token = int(batch["labels"][b, int(hard[b, n])])
                        negatives.append(Candidate(row["id"], n, self.entity_of_token[token]))
        return anchors, negatives

    def __call__(self, batch: dict, rows: list[dict]) -> tuple[float, float]:
        """(oracle L_CL, ln(candidates)) for one batch; rows in batch order."""
        by_id = {r["id"]: r for r in rows}
        anchors, negatives = self.pairs(batch, rows)
        if not anchors:
            return 0.0, 0.0
        labels = [_label(by_id[c.story], c.unit, c.entity) for c in anchors + negatives]
        prior = torch.tensor([math.log(self.marginal.get(lab, FLOOR)) for lab in labels])
        scores = torch.empty(len(anchors), len(labels))
        for i, anchor in enumerate(anchors):
            table = self.tables[anchor.story][anchor.unit][anchor.entity]
            total = sum(table.values()) or 1.0
            scores[i] = torch.tensor([math.log(max(table.get(lab, 0.0) / total, FLOOR)) for lab in labels])
        scores -= prior
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(anchors)))
        return float(loss), math.log(len(labels))
