"""Generated blocks of docs/state-predictor.md from the state-predictor study's kept runs
(studies/state_predictor/outputs/<grid>-<arm>-seed<k>/metrics/): every figure is a mean over
the grid's seeds with its 95% Student-t interval (eric/evaluate/intervals.py `seed_interval`),
or one seed's value where an arm has one.

Where each number comes from:
- L_CL / chance, over the candidates the recipe trains with and over entity candidates: the
  training stage's last validation (metrics/train/eric.json `final_val_contrastive_*`);
- the lines no learned model needs (chance, identity, the anchor-blind prior, prior + identity,
  oracle, oracle + identity) per candidate set, the probes, coherence and the LM loss with gold and predicted states: the evaluate
  stage (metrics/evaluate/eric.json, eric/evaluate/world_lines.py, world_probes.py,
  world_metrics.py, lm_loss.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from eric.config import PROJECT_ROOT
from eric.evaluate.intervals import Interval, seed_interval
from eric.evaluate.report import markdown_table
from studies.bounded import share_interval
from studies.spec import StudySpec, load_study

CANDIDATES = {"batch": "the batch (paper)", "text": "the anchor's text", "entity": "the entity's later units"}
LINES = {"identity": "identity", "prior": "anchor-blind prior", "prior_identity": "prior + identity",
         "oracle": "oracle", "oracle_identity": "oracle + identity"}
PROBES = {"predicted_vector": "predicted ê_n", "predicted_state_vector": "its state",
          "linear": "the decoder at the unit's start", "gold_vector": "gold e_n",
          "identity": "which entity alone (no model)"}
LABELS = {"event": "next event kind", "condition_before": "condition before the unit",
          "location_before": "location before the unit"}
BLIND = "blind"  # the arm whose e^_n is one learned vector (predictor_input: none): the control


@lru_cache(maxsize=1)
def study() -> StudySpec:
    return load_study(PROJECT_ROOT / "studies" / "state_predictor")


def runs(grid: str, spec: StudySpec | None = None) -> dict[str, dict[int, dict]]:
    """arm -> seed -> {"train": metrics/train/<variant>.json, "evaluate": metrics/evaluate/<variant>.json}
    of the kept configurations of one grid (arms in study.yaml's order)."""
    spec, out = spec or study(), {}
    for arm, declared in spec.grids[grid].arms.items():
        for seed in declared.seeds or spec.grids[grid].seeds:
            name = f"{grid}-{arm}-seed{seed}"
            if spec.is_done(name):
                found, variant = spec.metrics(name), declared.variants[0]
                out.setdefault(arm, {})[seed] = {"train": found.get(f"metrics/train/{variant}.json", {}),
                                                 "evaluate": found.get(f"metrics/evaluate/{variant}.json", {})}
    return out


def get_in(values: dict, *path):
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return None
        values = values[key]
    return values


def _ratio(train: dict, term: str) -> float | None:
    loss, chance = train.get(f"final_val_{term}_loss"), train.get(f"final_val_{term}_chance")
    return loss / chance if loss is not None and chance else None


def over_seeds(seeds: dict[int, dict], value: Callable[[dict], float | None]) -> Interval:
    return seed_interval([value(m) for m in seeds.values()])


def lcl_over_seeds(seeds: dict[int, dict]) -> tuple[Interval, Interval]:
    """Val L_CL / chance over the recipe's own candidates and over entity candidates."""
    return (over_seeds(seeds, lambda m: _ratio(m["train"], "contrastive")),
            over_seeds(seeds, lambda m: _ratio(m["train"], "contrastive_entity")))


def _entity_ratio(m: dict) -> float | None:
    return _ratio(m["train"], "contrastive_entity")


def minus_blind(seeds: dict[int, dict], blind: dict[int, dict] | None) -> Interval:
    """Entity-candidate L_CL / chance minus the blind control's, paired by seed (seeds both ran)."""
    if not blind:
        return Interval(None, None, None)
    return seed_interval([minus(_entity_ratio(m), _entity_ratio(blind[seed]))
                          for seed, m in seeds.items() if seed in blind])


def _below(interval: Interval, line: float) -> bool:
    return interval.high is not None and interval.high < line


def lcl_table(grid: str = "world", spec: StudySpec | None = None) -> str:
    """Per arm: L_CL / chance on its training candidates and on entity candidates, and the
    entity figure minus the blind control's, paired by seed. The verdict rule of the page:
    learning what happens next is the entity-candidate interval below chance and the paired
    difference's below zero (the control reaches what the targets alone can rank)."""
    found = runs(grid, spec)
    rows = []
    for arm, seeds in found.items():
        own, entity = lcl_over_seeds(seeds)
        diff = minus_blind(seeds, found.get(BLIND))
        verdict = "control" if arm == BLIND else "yes" if _below(entity, 1.0) and _below(diff, 0.0) else "no"
        rows.append([arm, str(len(seeds)), own.format(3), entity.format(3),
                     "–" if arm == BLIND else diff.format(3), verdict])
    if not rows:
        return "_No configuration of this grid has run yet._"
    return markdown_table(["recipe", "seeds", "val L_CL / chance (its own candidates)",
                           "val L_CL / chance (entity candidates)", "entity minus the blind control",
                           "learns what happens next"], rows)


def lines_table(grid: str = "world", spec: StudySpec | None = None) -> str:
    """Per candidate set: chance (nats) and each critic's L_CL / chance, over every kept run's
    validation batches (the lines do not depend on the model: the spread is the batches')."""
    every = {f"{arm}-{seed}": m for arm, seeds in runs(grid, spec).items() for seed, m in seeds.items()}
    rows = []
    for which, label in CANDIDATES.items():
        chance = seed_interval([get_in(m["evaluate"], "world", "lines", which, "chance") for m in every.values()])
        cells = [seed_interval([get_in(m["evaluate"], "world", "lines", which, line, "vs_chance")
                                for m in every.values()]).format(3) for line in LINES]
        rows.append([label, chance.format(3), *cells])
    if not every:
        return "_No configuration of this grid has run yet._"
    return markdown_table(["candidates", "chance (nats)", *(f"{v} / chance" for v in LINES.values())], rows)


def probe_value(m: dict, name: str, field: str) -> float | None:
    if name.startswith("linear/") and get_in(m["evaluate"], "world", "probes", "linear/location_before") is None:
        return None  # a run before 761008f: its decoder read the unit's gold state (the same commit added the location)
    return get_in(m["evaluate"], "world", "probes", name, field)


def coherence_value(m: dict, scoring: str, mode: str) -> float | None:
    return get_in(m["evaluate"], "world", "coherence", "accuracy", f"{scoring}/{mode}")


def minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def probes_table(grid: str = "world", spec: StudySpec | None = None) -> str:
    """Per arm and label: each probe's accuracy gain over the training majority class."""
    rows = []
    for arm, seeds in runs(grid, spec).items():
        for label, name in LABELS.items():
            majority = share_interval([probe_value(m, f"gold_vector/{label}", "majority") for m in seeds.values()])
            cells = [seed_interval([probe_value(m, f"{p}/{label}", "gain") for m in seeds.values()]).format(3)
                     for p in PROBES]
            rows.append([arm, name, majority.format(3), *cells])
    if not rows:
        return "_No configuration of this grid has run yet._"
    return markdown_table(["recipe", "label", "majority class", *(f"gain: {v}" for v in PROBES.values())], rows)


def oracle_probe_line(grid: str = "world", spec: StudySpec | None = None) -> str:
    """The oracle's ceiling of the event probes (the generator's most likely kind for the focal
    character, knowing every state) beside the majority class, over every kept run's test units."""
    every = [m for seeds in runs(grid, spec).values() for m in seeds.values()]
    oracle = seed_interval([probe_value(m, "oracle_event", "accuracy") for m in every])
    majority = seed_interval([probe_value(m, "oracle_event", "majority") for m in every])
    if oracle.value is None:
        return "_No configuration of this grid has run yet._"
    return (f"{oracle.value:.3f} of the test units right, against {majority.value:.3f} for the majority class: "
            f"the best guess any model can make from the prefix gains {oracle.value - majority.value:.3f}.")


def coherence_table(grid: str = "world", scoring: str = "lm", spec: StudySpec | None = None) -> str:
    """Per arm: checker-decided coherence with predicted, gold and random states, and predicted
    minus random paired by seed."""
    rows = []
    for arm, seeds in runs(grid, spec).items():
        cells = [share_interval([coherence_value(m, scoring, mode) for m in seeds.values()]).format(1, pct=True)
                 for mode in ("predicted", "gold", "random")]
        diff = seed_interval([minus(coherence_value(m, scoring, "predicted"), coherence_value(m, scoring, "random"))
                              for m in seeds.values()])
        rows.append([arm, *cells, diff.format(1, pct=True)])
    if not rows:
        return "_No configuration of this grid has run yet._"
    return markdown_table(["recipe", "predicted states", "gold states", "random states", "predicted - random"], rows)


def lm_table(grid: str, spec: StudySpec | None = None) -> str:
    """Per arm: validation LM loss with the gold state of the unit (teacher-forced) and with
    the model's own predicted states (comparable with a model without states)."""
    rows = []
    for arm, seeds in runs(grid, spec).items():
        gold = over_seeds(seeds, lambda m: m["evaluate"].get("lm_loss_gold_states"))
        predicted = over_seeds(seeds, lambda m: m["evaluate"].get("lm_loss_predicted_states"))
        own, entity = lcl_over_seeds(seeds)
        parsed = share_interval([get_in(m["evaluate"], "world", "stage_one", "parse_rate") for m in seeds.values()])
        rows.append([arm, str(len(seeds)), gold.format(3), predicted.format(3), own.format(3), entity.format(3),
                     parsed.format(1, pct=True)])
    if not rows:
        return "_No configuration of this grid has run yet._"
    return markdown_table(["recipe", "seeds", "LM loss, gold states", "LM loss, predicted states",
                           "L_CL / chance (own)", "L_CL / chance (entity)", "samples' units parsed %"], rows)


def _yes(interval: Interval, passes: bool) -> str:
    return f"{'yes' if passes else 'no'}: {interval.format(3)}"


def targets_table(grid: str = "world", scoring: str = "lm", spec: StudySpec | None = None) -> str:
    """The issue's three targets per recipe, each decided over seeds: validation L_CL over entity
    candidates at most 0.90 x chance with the interval's upper end below 1.0 (and, beside it,
    below the blind control's, paired by seed: an interval below zero); the event probe on
    the predicted e^_n above the majority class (interval above zero); coherence with predicted
    states above random states (the paired difference's interval above zero)."""
    found = runs(grid, spec)
    rows = []
    for arm, seeds in found.items():
        if arm == BLIND:
            continue
        entity = lcl_over_seeds(seeds)[1]
        diff = minus_blind(seeds, found.get(BLIND))
        probe = seed_interval([probe_value(m, "predicted_vector/event", "gain") for m in seeds.values()])
        coherence = seed_interval([minus(coherence_value(m, scoring, "predicted"), coherence_value(m, scoring, "random"))
                                   for m in seeds.values()])
        above = lambda i: i.low is not None and i.low > 0
        rows.append([arm, str(len(seeds)),
                     _yes(entity, entity.value is not None and entity.value <= 0.90 and entity.high is not None
                          and entity.high < 1.0),
                     _yes(diff, _below(diff, 0.0)), _yes(probe, above(probe)), _yes(coherence, above(coherence))])
    if not rows:
        return "_No configuration of this grid has run yet._"
    return markdown_table(["recipe", "seeds", "entity L_CL <= 0.90 x chance, upper end < 1",
                           "entity L_CL below the blind control", "event probe on predicted ê_n above majority", "coherence: predicted > random"], rows)


BLOCKS: dict[str, Callable[[], str]] = {
    "state-predictor-targets": targets_table,
    "state-predictor-lcl": lcl_table,
    "state-predictor-lines": lines_table,
    "state-predictor-probes": probes_table,
    "state-predictor-oracle-probe": oracle_probe_line,
    "state-predictor-coherence": coherence_table,
    "state-predictor-lm-world": lambda: lm_table("world"),
    "state-predictor-wikiplots": lambda: lm_table("wikiplots"),
    # the same tables at the budget where the samples parse (grid world_long)
    **{f"{name}-long": (lambda table=table: table("world_long")) for name, table in (
        ("state-predictor-targets", targets_table), ("state-predictor-lcl", lcl_table),
        ("state-predictor-lines", lines_table), ("state-predictor-probes", probes_table),
        ("state-predictor-coherence", coherence_table), ("state-predictor-lm", lm_table))},
}
