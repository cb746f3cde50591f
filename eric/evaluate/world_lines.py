"""Reference lines from the world's generator and from placeholders alone.

- `oracle_event_probe`: before each test unit, the generator's exact distribution over the
  next event (eric/world/oracle.py) gives P(event kind | the focal character acts); its most
  likely kind is the best guess any model can make from the prefix, the ceiling of the
  `event` probes (eric/evaluate/world_probes.py). Beside it the training units' majority
  kind, the probes' floor.
- `critic_lines`: the lines no learned model needs, on exactly the validation batches the
  training loop scores (same rows, length order, batch size, entity draws, hard negatives),
  weighted per target token as the loop weighs its validation means, for each candidate set
  (batch, text, entity: eric/evaluate/critics.py): chance (mean ln candidates), the
  identity critic (matches the placeholder only), the anchor-blind prior (`LabelPrior`: one
  score per candidate label, whatever the anchor), prior + identity, the oracle
  (eric/world/oracle.py) and oracle + identity, each as `loss` and `vs_chance`. A learned
  L_CL counts as learning what happens next only below the identity line and below the
  prior's (on entity candidates identity is chance, the prior is not: the anchor's own unit
  and its entity's later ones differ in kind, whoever reads the prefix).
- `contrastive_ratios`: the model's own L_CL / chance at the end of training, train and
  validation (the training stage's plots), over its training candidates and over entity
  candidates, to read against those lines.
- `scene_blind_rates`: the checker's rates of the world's own stories, each read against the
  next story's scene: a writer as fluent and as consistent as the generator that ignores its
  input. The line the grounding rates and the state violations per grounded unit of a model
  stand beside (a model under it there reads its scene).
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from pathlib import Path

import torch

from eric.evaluate.critics import CANDIDATE_SETS, batch_pairs, candidate_mask, critic_loss, identity
from eric.world.oracle import FLOOR, Oracle, event_tables, unit_label
from eric.world.phrasings import PLACEHOLDER


def _k(placeholder: str) -> int:
    return int(PLACEHOLDER.fullmatch(placeholder).group(1))


def oracle_event_probe(train_rows: list[dict], test_rows: list[dict], seed: int, cast: tuple[int, int],
                       events: int) -> dict:
    """Accuracy of the oracle's most likely kind for the focal character, and of the
    training units' majority kind, over the test units."""
    majority = Counter(e for r in train_rows for e in r["world_events"]).most_common(1)[0][0]
    tables = event_tables(seed, {r["id"] for r in test_rows}, tuple(cast), events)
    right = base = units = 0
    for row in test_rows:
        for n, (kind, focal) in enumerate(zip(row["world_events"], row["world_focal"])):
            acts = {k: p for (k, role), p in tables[row["id"]][n][_k(focal)].items() if role == "a"}
            right += max(acts, key=acts.get) == kind
            base += majority == kind
            units += 1
    return {"accuracy": round(right / units, 4) if units else None,
            "majority": round(base / units, 4) if units else None, "units": units}


LINES = ("identity", "prior", "prior_identity", "oracle", "oracle_identity")
PRIOR_FIT_TEXTS = 2000  # training texts the prior's label counts come from


class LabelPrior:
    """The anchor-blind critic: a score per candidate label (eric/world/oracle.py `unit_label`),
    the same for every anchor, log p_own(label) - p_later(label): how much likelier the label is
    as an anchor's own unit than as a later unit of its entity, over the entity candidates of
    training batches (each anchor's later units weigh 1 in all). That ratio is what InfoNCE's
    optimal critic is when the critic cannot read the anchor: what a state predictor that reads
    nothing of the prefix can reach through the targets alone."""

    def __init__(self, own: Counter, later: Counter, rows: list[dict]):
        self.anchors, self.later_weight = sum(own.values()), sum(later.values())  # equal: 1 per anchor
        share = lambda counts, total, label: math.log(max(counts[label] / (total or 1.0), FLOOR))  # noqa: E731
        self.scores = {label: share(own, self.anchors, label) - share(later, self.later_weight, label)
                       for label in set(own) | set(later)}
        self.rows = {r["id"]: r for r in rows}

    @classmethod
    def fit(cls, collator, train_rows: list[dict], rows: list[dict], batch_size: int = 16) -> LabelPrior:
        """Counted on `train_rows` (the loop's collator and draws), to score candidates of `rows`."""
        own, later = Counter(), Counter()
        by_id = {r["id"]: r for r in train_rows}
        label = lambda c: unit_label(by_id[c.story], c.unit, c.entity)  # noqa: E731
        for start in range(0, len(train_rows), batch_size):
            chunk = train_rows[start:start + batch_size]
            pairs = batch_pairs(collator(chunk), [r["id"] for r in chunk], collator.entity_class)
            allowed, counted = candidate_mask(pairs, "entity")
            for i in counted.nonzero().flatten().tolist():
                own[label(pairs.anchors[i])] += 1
                others = [j for j in allowed[i].nonzero().flatten().tolist() if j != i]
                for j in others:
                    later[label(pairs.candidates[j])] += 1 / len(others)
        return cls(own, later, rows)

    def __call__(self, anchors: list, candidates: list) -> torch.Tensor:
        column = torch.tensor([self.scores.get(unit_label(self.rows[c.story], c.unit, c.entity), math.log(FLOOR))
                               for c in candidates], dtype=torch.float64)
        return column.expand(len(anchors), -1)


def critic_lines(collator, val_rows: list[dict], train_rows: list[dict], batches: list[list[int]], seed: int,
                 cast: tuple[int, int], events: int) -> dict:
    """Chance and each critic's L_CL (identity, oracle, oracle + identity: LINES) per candidate
    set (critics.py), over `batches` (indices into `val_rows`: the loop's eval_batches), as
    the loop weighs its validation means (per target token; a batch where no anchor is
    scored counts for nothing); `train_rows` give the labels' marginal, the oracle's prior."""
    from eric.train.meters import target_tokens

    oracle = Oracle(event_tables(seed, {r["id"] for r in val_rows}, tuple(cast), events), val_rows, train_rows)
    prior = LabelPrior.fit(collator, train_rows[:PRIOR_FIT_TEXTS], val_rows)
    sums = {which: {"chance": 0.0, "weight": 0.0, "anchors": 0, **dict.fromkeys(LINES, 0.0)}
            for which in CANDIDATE_SETS}
    for indices in batches:
        rows = [val_rows[i] for i in indices]
        batch = collator(rows)
        pairs = batch_pairs(batch, [r["id"] for r in rows], collator.entity_class)
        scores = {name: critic(pairs.anchors, pairs.candidates) for name, critic in
                  (("identity", identity), ("prior", prior), ("oracle", oracle))}
        scores["prior_identity"] = scores["prior"] + scores["identity"]  # critics add as scores
        scores["oracle_identity"] = scores["oracle"] + scores["identity"]
        w = target_tokens(batch)
        for which, total in sums.items():
            allowed, counted = candidate_mask(pairs, which)
            for name in LINES:
                loss, chance, anchors = critic_loss(scores[name], allowed, counted)
                total[name] += w * loss
            if anchors:
                total["chance"], total["weight"] = total["chance"] + w * chance, total["weight"] + w
                total["anchors"] += anchors
    return {"val_texts": len(val_rows), "batches": len(batches),
            **{which: _lines(total) for which, total in sums.items()}}


def _lines(total: dict) -> dict:
    """Means of one candidate set's sums: chance, and each line's loss and loss / chance."""
    weight, chance = total["weight"], total["chance"]
    ratio = lambda loss: round(loss / chance, 4) if chance else None  # noqa: E731
    return {"anchors": total["anchors"], "chance": round(chance / weight, 4) if weight else None,
            **{name: {"loss": round(total[name] / weight, 4) if weight else None, "vs_chance": ratio(total[name])}
               for name in LINES}}


def cl_ratio(row: dict, prefix: str = "val_", term: str = "contrastive") -> float | None:
    """L_CL / chance of one row of the training plots (None where the row has no L_CL);
    `term` contrastive_entity: over entity candidates."""
    loss, chance = row.get(f"{prefix}{term}_loss"), row.get(f"{prefix}{term}_chance")
    if loss in (None, "") or chance in (None, "") or not float(chance):
        return None
    return round(float(loss) / float(chance), 5)


def read_plot(path: Path) -> list[dict]:
    """A training plot (plots/train/<variant>.csv, <variant>_val.csv); [] when absent."""
    if not path.is_file():
        return []
    with path.open() as handle:
        return list(csv.DictReader(handle))


def contrastive_ratios(plots_dir: Path, variant: str) -> dict:
    """The last train and validation rows' L_CL / chance over the candidates the model trained
    with (`train`, `val`) and over entity candidates (`entity_train`, `entity_val`: None for
    runs that predate the columns)."""
    train, val = read_plot(plots_dir / f"{variant}.csv"), read_plot(plots_dir / f"{variant}_val.csv")
    last = lambda rows, prefix, term: cl_ratio(rows[-1], prefix, term) if rows else None  # noqa: E731
    return {"train": last(train, "", "contrastive"), "val": last(val, "val_", "contrastive"),
            "entity_train": last(train, "", "contrastive_entity"),
            "entity_val": last(val, "val_", "contrastive_entity")}


def scene_blind_rates(seed: int, stories: int, cast: tuple[int, int] = (3, 8), events: int = 15,
                      mix: dict[str, float] | None = None) -> dict:
    """Rates (eric/evaluate/world_checks.py) of `stories` generator stories checked against
    their own scene (`own`: the generator's legality, no violation) and against the scene of
    the next story (`next`; the last against the first); with `mix` (world_mix.py
    `world_mix`), each reading's state violations at that event mix as well (`standardized`:
    the grid's arms are read at the evaluate stage's mix)."""
    from eric.evaluate.world_checks import columns, rates, story_counts
    from eric.evaluate.world_mix import kind_columns, standardized
    from eric.world.checker import check_story
    from eric.world.generate import generate_stories

    drawn = list(generate_stories(seed, stories, tuple(cast), events))
    found = {}
    for name, read in (("own", drawn), ("next", drawn[1:] + drawn[:1])):
        checks = [check_story(other.scene, story.units) for story, other in zip(drawn, read)]
        found[name] = rates(columns([story_counts(check) for check in checks]))
        if mix is not None:
            found[name] |= standardized(kind_columns(checks), mix)
    return found
