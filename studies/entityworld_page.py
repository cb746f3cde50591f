"""Generated blocks of docs/entityworld-study.md from the declarative study's kept runs
(studies/entityworld/outputs/world-<arm>-seed<k>/metrics/evaluate/<variant>.json, the
evaluate stage's `world` section: eric/evaluate/world_checks.py, world_mix.py).

Every rate is the checker's over one configuration's samples (`stage_one`: the placeholder
texts; `final`: the two-stage texts with names), one value per seed; means carry a 95%
Student-t interval over seeds, and a difference between two arms is paired by seed (seed n
of one arm against seed n of the other: the seed sets the initialisation and the data order,
the world and the test inputs stay).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache

from eric.config import PROJECT_ROOT
from eric.evaluate.intervals import Interval, paired_ratio_difference, seed_interval
from eric.evaluate.intervals import fmt_value as fmt
from eric.evaluate.report import markdown_table
from eric.world import world as rules
from studies.bounded import rate_interval, share_interval
from studies.currency import kept_inputs, older, study_drift
from studies.spec import StudySpec, load_study
from studies.state_predictor_page import coherence_value, get_in, lcl_over_seeds, minus, over_seeds, probe_value
from studies.state_predictor_page import runs as trained_runs

# the fluency: the budget is the one at which BART's samples meet all three
FLUENT = {"parse_rate": (">=", 0.95), "grounding_rate": ("<=", 0.10), "grounded_share": (">=", 0.80)}
FLUENT_INTERVAL = {"parse_rate": share_interval, "grounding_rate": rate_interval, "grounded_share": share_interval}
NAMES = {"eric": "ERIC", "eric_paper": "ERIC (paper recipe)", "eric_no_state_attention": "ERIC w/o StateAttn",
         "eric_no_state": "ERIC w/o s_n", "bart": "BART", "bart_two_stage": "BART (two-stage)", "simctg": "SimCTG",
         "eric_reference_states": "ERIC, reference states", "eric_random_states": "ERIC, random states",
         "bart_novels": "BART from novels", "bart_two_stage_novels": "BART (two-stage) from novels",
         "bart_two_stage_novels_p05": "BART (two-stage) from novels, top-p 0.5",
         "bart_two_stage_novels_w2000": "BART (two-stage) from novels, writer 2,000 steps",
         "bart_two_stage_novels_4500": "BART (two-stage) from novels, 4,500 steps",
         "bart_two_stage_novels_lr1e3": "BART (two-stage) from novels, lr 1e-3",
         "bart_two_stage_novels_4500_lr1e3": "BART (two-stage) from novels, 4,500 steps, lr 1e-3",
         "bart_two_stage_novels_d0": "BART (two-stage) from novels, dropout 0"}
# A - B of state violations per grounded unit: below zero, A breaks fewer state rules. The
# paper recipe's two pairs ask the questions of the paper's own ERIC as well.
PAIRS = (("eric", "bart"), ("eric", "eric_no_state"), ("eric_no_state", "bart"), ("eric", "eric_paper"),
         ("eric_paper", "bart"), ("eric_paper", "eric_no_state"),
         ("eric", "eric_no_state_attention"), ("eric_no_state_attention", "bart"),
         ("eric", "eric_reference_states"), ("eric", "eric_random_states"))
NONE_YET = "_No configuration of this grid is kept at this code yet._"
STATE_ARMS = ("eric", "eric_paper", "eric_no_state_attention")  # arms that train states (the bounds sample ERIC's)
# the checker's rules (eric/world/world.py) by what a model must know to keep them: the scene
# alone answers the first two, the replayed state of a character the rest (STATE_RULES)
RULE_FAMILIES = {
    "names outside the scene": (rules.UNKNOWN_CHARACTER, rules.UNKNOWN_PLACE, rules.UNKNOWN_ITEM),
    "one character in both roles": (rules.SAME_CHARACTER,),
    "condition (dead, captive, wounded)": (rules.DEAD, rules.CAPTIVE, rules.WOUNDED, rules.NOT_WOUNDED,
                                           rules.NOT_CAPTIVE, rules.ALREADY_CAPTIVE, rules.NOT_DEAD),
    "location": (rules.APART, rules.ALREADY_THERE, rules.WRONG_PLACE, rules.TARGET_HERE),
    "acquaintance": (rules.STRANGERS, rules.MARRIED),
    "items": (rules.NOT_HELD, rules.NOT_HERE, rules.HANDS_FULL),
}


@lru_cache(maxsize=1)
def study() -> StudySpec:
    return load_study(PROJECT_ROOT / "studies" / "entityworld")


# grids whose tables show only configurations measured at one code: their arms are paired seed
# by seed, and a difference of two codes' measures says nothing about the arms. The fluency
# grid's runs (the budget's record) stay whatever their code, marked by `older_note`.
CURRENT_ONLY = ("world",)


def late(grid: str = "world", spec: StudySpec | None = None) -> list[str]:
    """The grid's kept configurations that ran at older code (studies/currency.py)."""
    if spec is None or spec is study():
        return list(_late_in_study(grid))
    return _late(grid, spec)


@lru_cache(maxsize=None)
def _late_in_study(grid: str) -> tuple[str, ...]:
    """`late` of the study itself, once per process as `study()` is read once: every table of
    a grid and the note under it ask, and each answer hashes the code every kept run read."""
    return tuple(_late(grid, study()))


def _late(grid: str, spec: StudySpec) -> list[str]:
    return [name for name in _kept(grid, spec) if older(study_drift(spec, name, PROJECT_ROOT))]


def _kept(grid: str, spec: StudySpec) -> list[str]:
    return [name for name in spec.configurations if name.startswith(f"{grid}-") and spec.is_done(name)]


def one_older_code(grid: str, spec: StudySpec) -> bool:
    """Every kept configuration of the grid ran at older code, all at the same one (every input
    two of them read has one md5 in their dvc.locks): measured alike, still paired seed by seed."""
    kept = _kept(grid, spec)
    if not kept or set(late(grid, spec)) != set(kept):
        return False
    md5s: dict[str, set[str]] = {}
    for name in kept:
        for path, md5 in kept_inputs(spec.outputs / name, spec.configurations[name].variants).items():
            md5s.setdefault(path, set()).add(md5)
    return all(len(found) == 1 for found in md5s.values())


def hides_older(grid: str, spec: StudySpec) -> bool:
    """Whether the grid's tables leave out what ran at older code: a CURRENT_ONLY grid does,
    unless all of it ran at one older code (then it is shown as that code measured it)."""
    if grid not in CURRENT_ONLY:
        return False
    return not (_one_older_code_in_study(grid) if spec is study() else one_older_code(grid, spec))


@lru_cache(maxsize=None)
def _one_older_code_in_study(grid: str) -> bool:
    """`one_older_code` of the study itself, once per process (it reads every kept dvc.lock)."""
    return one_older_code(grid, study())


def shown(grid: str, spec: StudySpec) -> Callable[[str], bool]:
    """Whether a configuration's rows are in the grid's tables (`hides_older`)."""
    hidden = set(late(grid, spec)) if hides_older(grid, spec) else set()
    return lambda name: spec.is_done(name) and name not in hidden


def runs(grid: str = "world", spec: StudySpec | None = None) -> dict[str, dict[int, dict]]:
    """arm -> seed -> the `world` section of its variant's evaluate metrics (kept runs only)."""
    spec, out = spec or study(), {}
    keep = shown(grid, spec)
    for arm, declared in spec.grids[grid].arms.items():
        for seed in declared.seeds or spec.grids[grid].seeds:
            name = f"{grid}-{arm}-seed{seed}"
            if keep(name):
                found = spec.metrics(name).get(f"metrics/evaluate/{declared.variants[0]}.json", {})
                out.setdefault(arm, {})[seed] = found.get("world", {})
    return out


def rate(world: dict, field: str, form: str = "stage_one") -> float | None:
    return (world.get(form) or {}).get(field)


def by_seed(seeds: dict[int, dict], field: str, form: str = "stage_one") -> dict[int, float | None]:
    return {seed: rate(world, field, form) for seed, world in seeds.items()}


def seed_list(values: dict[int, float | None], pct: bool = False) -> str:
    """A table cell with one value per seed, in seed order as kept."""
    return ", ".join(fmt(value, pct=pct) for value in values.values())


def _meets(value: float | None, rule: tuple[str, float]) -> bool:
    op, line = rule
    return value is not None and (value >= line if op == ">=" else value <= line)


def _fluent(values: dict) -> bool:
    """Whether every FLUENT field of `values` meets its line."""
    return all(_meets(values.get(field), rule) for field, rule in FLUENT.items())


def fluency_table(grid: str = "world", spec: StudySpec | None = None) -> str:
    """Per arm: parse rate, grounding violations per parsed unit (and per seed) and grounded share
    of parsed units (means over seeds); whether the means meet the fluency lines (FLUENT), and
    how many seeds do on their own."""
    rows = []
    for arm, seeds in runs(grid, spec).items():
        values = {field: by_seed(seeds, field) for field in FLUENT}
        means = {field: FLUENT_INTERVAL[field](list(found.values())) for field, found in values.items()}
        fluent = _fluent({field: found.value for field, found in means.items()})
        per_seed = seed_list(values["grounding_rate"])
        fluent_seeds = sum(_fluent(world.get("stage_one") or {}) for world in seeds.values())
        rows.append([NAMES.get(arm, arm), str(len(seeds)), means["parse_rate"].format(1, pct=True),
                     means["grounding_rate"].format(3), per_seed, means["grounded_share"].format(1, pct=True),
                     "yes" if fluent else "no", f"{fluent_seeds} of {len(seeds)}"])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "seeds", "parse rate %", "grounding viol. / parsed unit", "per seed",
                           "grounded % of parsed", "fluent (>= 95%, <= 0.10, >= 80%)", "seeds fluent"], rows)


def snapshots(curve: dict) -> dict[int, dict]:
    """step -> that snapshot's values, from a curve kept as columns (one value per snapshot)."""
    return {step: {k: values[i] for k, values in curve.items()} for i, step in enumerate(curve.get("step", []))}


def _code(spec: StudySpec, name: str) -> str:
    """The commit a kept configuration was made at (its run.json), short; a dash without one."""
    return ((spec.run(name) or {}).get("commit") or "–")[:7]


def fluency_curve(grid: str = "fluency", spec: StudySpec | None = None) -> str:
    """Per arm and snapshot of the fluency grid: what the checker says of the texts that snapshot
    writes (eric/evaluate/world_curve.py), the validation LM loss, the input gap (its rise with
    another story's scene; 0: the model does not read the scene, blank: not logged then), and
    whether it meets FLUENT. `code`: the commit the run was made at (its run.json), so rows
    made before a change of the world read as such."""
    spec, rows = spec or study(), []
    for arm, seeds in runs(grid, spec).items():
        for seed, world in seeds.items():
            code = _code(spec, f"{grid}-{arm}-seed{seed}")
            for step, at in snapshots(world.get("curve") or {}).items():
                rows.append([NAMES.get(arm, arm), str(seed), code, str(step), fmt(at.get("parse_rate"), pct=True),
                             fmt(at.get("grounding_rate")), fmt(at.get("grounded_share"), pct=True),
                             fmt(at.get("val_lm_loss")), fmt(at.get("val_input_gap")), "yes" if _fluent(at) else "no"])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "seed", "code", "step", "parse rate %", "grounding viol. / parsed unit",
                           "grounded % of parsed", "val LM loss", "input gap", "fluent"], rows)


# the columns of the world grid's curve: the fluency lines, the study's rate, the losses
CURVE = (("parse_rate", True), ("grounding_rate", False), ("grounded_share", True),
         ("grounded_state_violation_rate", False), ("val_lm_loss", False), ("val_cl_ratio", False))


def grid_curve(grid: str = "world", spec: StudySpec | None = None) -> str:
    """Per arm and snapshot of the arms x seeds grid: means over its kept seeds of what the checker
    says of that snapshot's texts (eric/evaluate/world_curve.py) and of the validation LM loss and
    L_CL / chance (ERIC's states; blank without them), and whether the means meet FLUENT."""
    rows = []
    for arm, seeds in runs(grid, spec).items():
        curves = [snapshots(world.get("curve") or {}) for world in seeds.values()]
        for step in sorted({step for curve in curves for step in curve}):
            at = [curve[step] for curve in curves if step in curve]
            means = {field: seed_interval([snapshot.get(field) for snapshot in at]).value for field, _ in CURVE}
            rows.append([NAMES.get(arm, arm), str(len(at)), str(step),
                         *(fmt(means[field], pct=pct) for field, pct in CURVE), "yes" if _fluent(means) else "no"])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "seeds", "step", "parse rate %", "grounding viol. / parsed unit", "grounded % of parsed",
                           "state viol. / grounded unit", "val LM loss", "val L_CL / chance", "fluent"], rows)


def final_table(grid: str = "world", spec: StudySpec | None = None) -> str:
    """The two-stage check over the grid's seeds: per arm, means of the final texts' parse rate,
    units mapped to the cast, mentions that are cast names and that name their own character, and
    state violations per grounded unit, each with its t-interval over seeds."""
    rows = []
    for arm, seeds in runs(grid, spec).items():
        final = lambda field: list(by_seed(seeds, field, "final").values())
        shares = [share_interval(final(field)).format(1, pct=True)
                  for field in ("parse_rate", "mapped_rate", "cast_mention_rate", "own_mention_rate")]
        rows.append([NAMES.get(arm, arm), str(len(seeds)), *shares,
                     rate_interval(final("grounded_state_violation_rate")).format(3)])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "seeds", "final parse %", "units mapped to the cast %", "mentions that are cast names %",
                           "mentions naming their own character %", "state viol. / grounded unit"], rows)


def seeds_table(grid: str = "world", form: str = "stage_one", spec: StudySpec | None = None) -> str:
    """Per arm and seed: parse %, grounded %, state violations per grounded unit; the means of
    the grounded rate and of the rate standardized to the world's event mix, the share of that
    mix each seed's grounded units reach (the standardized rate is over those kinds only, so a
    seed that writes one kind is that kind's rate), and how far the kinds of the arm's grounded
    units are from the mix (total variation distance)."""
    rows = []
    for arm, seeds in runs(grid, spec).items():
        cells = [" / ".join([fmt(rate(w, "parse_rate", form), pct=True), fmt(rate(w, "grounded_share", form), pct=True),
                             fmt(rate(w, "grounded_state_violation_rate", form))]) for w in seeds.values()]
        grounded = rate_interval(list(by_seed(seeds, "grounded_state_violation_rate", form).values()))
        mixed = rate_interval(list(by_seed(seeds, "state_violation_rate_at_world_mix", form).values()))
        covered = seed_list(by_seed(seeds, "world_mix_covered", form), pct=True)
        distance = share_interval(list(by_seed(seeds, "event_mix_distance", form).values()))
        rows.append([NAMES.get(arm, arm), "; ".join(cells), grounded.format(3), mixed.format(3), covered,
                     distance.format(3)])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "per seed: parse % / grounded % / state viol. per grounded unit",
                           "state viol. / grounded unit", "state viol. / grounded unit at the world's event mix",
                           "world's mix reached %, per seed", "event-mix distance"], rows)


def paired(a: dict[int, float | None], b: dict[int, float | None]) -> list[float]:
    """A - B for every seed both have a value for, in seed order."""
    return [a[s] - b[s] for s in sorted(set(a) & set(b)) if a[s] is not None and b[s] is not None]


def verdict(found: Interval) -> str:
    """The page's rule: a difference counts only where the seed interval excludes zero."""
    if found.low is None:
        return "no: fewer than two seeds"
    if found.high < 0:
        return "yes: A breaks fewer"
    return "yes: A breaks more" if found.low > 0 else "no"


def pairs_table(rates: dict[str, dict[int, float | None]], pairs=PAIRS, names=NAMES,
                story_view: Callable[[str, str], str] | None = None) -> str:
    """A - B per seed of a per-arm rate, its mean with the t-interval over seeds, the verdict;
    with `story_view`, a last column of its cell for (A, B) (the secondary view)."""
    rows = []
    for a, b in pairs:
        if a not in rates or b not in rates:
            continue
        diffs = paired(rates[a], rates[b])
        found = seed_interval(diffs)
        rows.append([f"{names.get(a, a)} − {names.get(b, b)}", ", ".join(f"{d:+.3f}" for d in diffs) or "–",
                     found.format(3), verdict(found), *([story_view(a, b)] if story_view else [])])
    if not rows:
        return NONE_YET
    return markdown_table(["A − B", "per seed", "mean [95% t-interval over seeds]", "interval excludes 0",
                           *([STORY_VIEW] if story_view else [])], rows)


STORY_VIEW = "pooled over those seeds [95% story bootstrap] (secondary)"


def _stories(world: dict, form: str) -> dict[str, tuple[int, int]]:
    """story id -> (state violations, units) over its grounded units; empty without per-story lists."""
    found = world.get("stories") or {}
    if not found.get(form):
        return {}
    return dict(zip(found["id"], zip(found[form]["grounded_state_violations"], found[form]["grounded"])))


def story_columns(a: dict[int, dict], b: dict[int, dict], form: str = "stage_one") -> list[list[list[int]]]:
    """A's and B's grounded-rate numerators and denominators, each story x seed (the seeds both
    have per-story lists for), rows matched by story id (every arm and seed writes the same
    test stories): the arguments of `paired_ratio_difference`."""
    kept = {s: (_stories(a[s], form), _stories(b[s], form)) for s in sorted(set(a) & set(b))}
    kept = {s: pair for s, pair in kept.items() if all(pair)}
    ids = sorted(set.intersection(*(set(t) for pair in kept.values() for t in pair))) if kept else []
    return [[[pair[arm][i][part] for pair in kept.values()] for i in ids] for arm in (0, 1) for part in (0, 1)]


def story_bootstrap(a: dict[int, dict], b: dict[int, dict], form: str = "stage_one") -> str:
    """A - B of state violations per grounded unit pooled over the seeds both have, with the
    paired bootstrap over test stories (eric/evaluate/intervals.py): the noise of the inputs
    only, so the secondary view; the verdict reads the interval over seeds."""
    columns = story_columns(a, b, form)
    found = paired_ratio_difference(*columns) if columns[0] else None
    return Interval(found.difference, found.low, found.high).format(3) if found else "–"


def grounded_pairs(grid: str = "world", form: str = "stage_one", spec: StudySpec | None = None) -> str:
    """Paired differences of state violations per grounded unit (PAIRS), and the story bootstrap."""
    found = runs(grid, spec)
    return pairs_table(per_arm(found, "grounded_state_violation_rate", form),
                       story_view=lambda a, b: story_bootstrap(found[a], found[b], form))


def per_arm(found: dict[str, dict[int, dict]], field: str, form: str = "stage_one") -> dict[str, dict[int, float | None]]:
    """arm -> seed -> one checker rate of that arm's kept runs (`pairs_table`'s argument)."""
    return {arm: by_seed(seeds, field, form) for arm, seeds in found.items()}


# the questions, each read as one pair of PAIRS on both texts
QUESTIONS = (
    (("eric", "bart"), "Do ERIC's states lower state violations per grounded unit against BART?"),
    (("eric", "eric_no_state"), "... against the same planner without states (ERIC w/o s_n)?"),
    (("eric", "eric_reference_states"), "How far is ERIC from its upper bound (the reference's states)?"),
    (("eric", "eric_random_states"), "... and from its lower bound (random states)?"),
    (("eric_paper", "bart"), "Does the paper's own recipe lower them against BART?"),
    (("eric_paper", "eric_no_state"), "... against ERIC w/o s_n?"),
)


def answers_table(grid: str = "world", spec: StudySpec | None = None) -> str:
    """The issue's questions under the page's rule (`verdict`): the pair's mean over seeds of
    state violations per grounded unit with its t-interval, on the placeholder texts and on the
    final ones, and the seeds it rests on against those the study declares; then on how many
    seeds BART is fluent (FLUENT), which says at what kind of budget the answers are."""
    spec = spec or study()
    found, declared = runs(grid, spec), len(spec.grids[grid].seeds)
    rows = []
    for (a, b), question in QUESTIONS:
        if a not in found or b not in found:
            continue
        diffs = {form: paired(by_seed(found[a], "grounded_state_violation_rate", form),
                              by_seed(found[b], "grounded_state_violation_rate", form)) for form in ("stage_one", "final")}
        cells = [cell for d in diffs.values() for cell in (seed_interval(d).format(3), verdict(seed_interval(d)))]
        rows.append([question, f"{NAMES[a]} − {NAMES[b]}", f"{len(diffs['stage_one'])} of {declared}", *cells])
    if not rows:
        return NONE_YET
    bart = found.get("bart", {})
    fluent = sum(_fluent(world.get("stage_one") or {}) for world in bart.values())
    return (markdown_table(["question", "A − B", "seeds", "placeholder texts: mean [95% t over seeds]",
                            "interval excludes 0", "final texts: mean [95% t over seeds]", "interval excludes 0"], rows)
            + f"\n\nBART meets all three fluency lines on {fluent} of its {len(bart)} seeds kept.")


def world_mix_pairs(grid: str = "world", spec: StudySpec | None = None) -> str:
    """PAIRS of the rate standardized to the world's event mix (no story view: the standardized
    rate is not kept per story): whether a difference on the grounded rate is one of how many
    state rules an arm breaks or of which events it writes."""
    return pairs_table(per_arm(runs(grid, spec), "state_violation_rate_at_world_mix"))


def _line(seeds: dict[int, dict], candidates: str, critic: str) -> Interval:
    return over_seeds(seeds, lambda m: get_in(m["evaluate"], "world", "lines", candidates, critic, "vs_chance"))


def _gain(seeds: dict[int, dict], probe: str) -> Interval:
    return over_seeds(seeds, lambda m: probe_value(m, probe, "gain"))


def states_table(grid: str = "world", spec: StudySpec | None = None) -> str:
    """What each state-training arm's states know, each figure beside the line a trivial critic
    reaches (means over seeds, t-intervals): val L_CL / chance over the batch's candidates
    against the identity critic's, over the entity's later units against the anchor-blind
    prior's; the event probe on the predicted ê_n against the oracle's gain (the ceiling from
    the prefix), the location probe against knowing which entity alone; coherence with
    predicted states minus random states, paired by seed; per seed, how many of the codebook's
    states the sentence encoder gives the test stories' units (a collapse shows as few)."""
    spec, rows = spec or study(), []
    keep = shown(grid, spec)
    for arm, seeds in trained_runs(grid, spec).items():
        seeds = {seed: found for seed, found in seeds.items() if keep(f"{grid}-{arm}-seed{seed}")}
        if arm not in STATE_ARMS or not seeds:
            continue
        batch, entity = lcl_over_seeds(seeds)
        oracle = over_seeds(seeds, lambda m: minus(probe_value(m, "oracle_event", "accuracy"),
                                                   probe_value(m, "oracle_event", "majority")))
        coherence = over_seeds(seeds, lambda m: minus(coherence_value(m, "lm", "predicted"),
                                                      coherence_value(m, "lm", "random")))
        rows.append([NAMES.get(arm, arm), str(len(seeds)),
                     f"{batch.format(3)} (identity {_line(seeds, 'batch', 'identity').format(3)})",
                     f"{entity.format(3)} (prior {_line(seeds, 'entity', 'prior').format(3)})",
                     f"{_gain(seeds, 'predicted_vector/event').format(3)} (oracle {oracle.format(3)})",
                     f"{_gain(seeds, 'predicted_vector/location_before').format(3)} "
                     f"(identity {_gain(seeds, 'identity/location_before').format(3)})",
                     coherence.format(1, pct=True),
                     ", ".join(str(get_in(m["evaluate"], "world", "states", "states_used") or "–") for m in seeds.values())])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "seeds", "val L_CL / chance: batch", "val L_CL / chance: entity's later units",
                           "event probe gain, predicted ê_n", "location probe gain, predicted ê_n",
                           "coherence: predicted − random states (points)", "states in use, per seed"], rows)


def writer_table(grid: str = "fluency", spec: StudySpec | None = None) -> str:
    """The two-stage check of each two-stage run: how its final texts read once the mention
    writer named the placeholders. Per unit, the final parse rate and the units whose names all
    map back to the cast (`mapped`); per mention the writer generated, those that are a cast
    member's name and those that name the placeholder's own character (eric/evaluate/
    world_checks.py `mention_counts`; blank: a run from before it), with the writer's steps, its
    last validation loss and how many mentions it generated, and the final texts' state violations
    per grounded unit (beside the placeholder texts' in `fluency_rules`). The issue's line: at least 90% of
    mentions are cast names."""
    spec, rows = spec or study(), []
    for arm, seed, name, world in _two_stage_runs(grid, spec):
        writer = spec.metrics(name).get("metrics/train/mentions.json", {})
        cast = rate(world, "cast_mention_rate", "final")
        rows.append([NAMES.get(arm, arm), str(seed), _code(spec, name), str(writer.get("steps") or "–"),
                     fmt(writer.get("final_val_loss")), str(rate(world, "mentions", "final") or "–"),
                     fmt(rate(world, "parse_rate", "final"), pct=True), fmt(rate(world, "mapped_rate", "final"), pct=True),
                     fmt(cast, pct=True), fmt(rate(world, "own_mention_rate", "final"), pct=True),
                     fmt(rate(world, "grounded_state_violation_rate", "final")),
                     "–" if cast is None else "yes" if cast >= 0.90 else "no"])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "seed", "code", "writer steps", "writer val loss", "mentions", "final parse %",
                           "units mapped to the cast %", "mentions that are cast names %",
                           "mentions naming their own character %", "final state viol. / grounded unit",
                           "meets >= 90%"], rows)


def _two_stage_runs(grid: str, spec: StudySpec):
    """(arm, seed, configuration, world) of the grid's kept runs whose final texts a mention
    writer named; a one-stage run writes the names itself and is left out."""
    for arm, seeds in runs(grid, spec).items():
        for seed, world in seeds.items():
            if rate(world, "named", "final"):
                yield arm, seed, f"{grid}-{arm}-seed{seed}", world


def _minutes(runs: list[dict]) -> str:
    """Mean minutes of training metrics' `train_seconds` and their range, e.g. '58 (47–79)'."""
    if not runs:
        return "–"
    seconds = [run["train_seconds"] for run in runs]
    low, high, mean = (round(s / 60) for s in (min(seconds), max(seconds), sum(seconds) / len(seconds)))
    return f"{mean} ({low}–{high})" if low != high else str(mean)


def cost_table(grids: tuple[str, ...] = ("world", "fluency"), spec: StudySpec | None = None) -> str:
    """What the kept runs cost on the host that made them: per arm, the wall minutes of its
    stage-one trainings and of the mention writers trained for it (the training metrics'
    `train_seconds`; two configurations ran at once, so a minute is one of two cores). A run
    another arm already counted (DVC's run cache gave it: the bounds take ERIC's model, the arms
    of a seed share one writer, and its metrics file comes along whole) is not counted again."""
    spec, rows = spec or study(), []
    for grid in grids:
        keep, counted = shown(grid, spec), set()
        for arm, declared in spec.grids[grid].arms.items():
            stage, writer = [], []
            for seed in declared.seeds or spec.grids[grid].seeds:
                if not keep(name := f"{grid}-{arm}-seed{seed}"):
                    continue
                found = spec.metrics(name)
                for path, into in ((f"metrics/train/{declared.variants[0]}.json", stage),
                                   ("metrics/train/mentions.json", writer)):
                    run = found.get(path) or {}
                    key = json.dumps(run, sort_keys=True)  # one run, whatever arm kept it (MLflow may be off)
                    if run.get("train_seconds") and key not in counted:
                        counted.add(key)
                        into.append(run)
            if stage or writer:
                rows.append([grid, NAMES.get(arm, arm), ", ".join(sorted({str(run["steps"]) for run in stage})) or "–",
                             str(len(stage)), _minutes(stage), str(len(writer)), _minutes(writer)])
    if not rows:
        return NONE_YET
    return markdown_table(["grid", "arm", "stage-one steps", "stage-one trainings", "minutes each (range)",
                           "writers trained", "minutes each (range)"], rows)


def _commonest_state_rule(by_rule: dict[str, int]) -> str:
    """The state rule broken most often and its share of the state violations."""
    counts = {rule: n for rule, n in by_rule.items() if rule in rules.STATE_RULES and n}
    if not counts:
        return "–"
    rule = max(counts, key=counts.get)
    return f"{rule} ({fmt(counts[rule] / sum(counts.values()), pct=True)}%)"


def _snapshot_range(curve: dict, field: str) -> str:
    """min–max of one curve column over a run's snapshots; a dash without any."""
    values = [v for v in curve.get(field, []) if v is not None]
    return f"{fmt(min(values))}–{fmt(max(values))}" if values else "–"


def fluency_rules(grid: str = "fluency", spec: StudySpec | None = None) -> str:
    """What each two-stage run of the fluency grid gets wrong, from its final evaluation's
    placeholder texts (the checker's counts by rule): the grounding violations and how many are
    one character in both roles (`same_character`) or a name the scene lacks; the state
    violations per grounded unit, their range over the run's snapshots and the rule broken most."""
    spec, rows = spec or study(), []
    for arm, seed, name, world in _two_stage_runs(grid, spec):
        by_rule, parsed = rate(world, "by_rule") or {}, rate(world, "parsed") or 0
        if not parsed:
            continue
        families = family_counts(by_rule)
        same = families["one character in both roles"]
        rows.append([NAMES.get(arm, arm), str(seed), _code(spec, name), str(parsed),
                     fmt(rate(world, "grounding_rate")), str(rate(world, "grounding_violations")),
                     f"{same} ({fmt(same / parsed)})", str(families["names outside the scene"]),
                     fmt(rate(world, "grounded_share"), pct=True), fmt(rate(world, "grounded_state_violation_rate")),
                     _snapshot_range(world.get("curve") or {}, "grounded_state_violation_rate"),
                     _commonest_state_rule(by_rule)])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "seed", "code", "parsed units", "grounding viol. / parsed unit", "grounding viol.",
                           "same_character (per parsed unit)", "names outside the scene", "grounded % of parsed",
                           "state viol. / grounded unit", "over the snapshots", "commonest state rule"], rows)


def scene_blind(seed: int = 42, stories: int = 200) -> str:
    """The line a writer that ignores its scene reaches: the world's own stories (the world
    profile's seed, the generator's cast and length) each checked against the next story's
    scene, beside their own (eric/evaluate/world_lines.py `scene_blind_rates`); its state
    violations at the world's event mix, as the grid's arms are read (the evaluate stage's mix)."""
    from eric.config import load_params
    from eric.evaluate.world_lines import scene_blind_rates
    from eric.evaluate.world_mix import world_mix

    cast, events = (3, 8), 15  # the generator's, as the world profile draws its stories
    mix = world_mix(seed, load_params(PROJECT_ROOT / "params.yaml").evaluate.world.mix_stories, cast, events)
    found = scene_blind_rates(seed, stories, cast, events, mix)
    rows = [[label, fmt(found[key]["grounding_rate"]), fmt(found[key]["grounded_share"], pct=True),
             fmt(found[key]["grounded_state_violation_rate"]), fmt(found[key]["state_violation_rate_at_world_mix"]),
             fmt(found[key]["event_mix_distance"])]
            for key, label in (("next", f"{stories} stories of the world, each read against the next story's scene"),
                               ("own", "the same stories, each against its own scene"))]
    return markdown_table(["texts", "grounding viol. / parsed unit", "grounded % of parsed", "state viol. / grounded unit",
                           "at the world's event mix", "event-mix distance"], rows)


def family_counts(by_rule: dict[str, int]) -> dict[str, int]:
    """Violations of each RULE_FAMILIES family, from the checker's counts by rule."""
    return {family: sum(by_rule.get(r, 0) for r in members) for family, members in RULE_FAMILIES.items()}


def family_rates(by_rule: dict[str, int], parsed: int) -> dict[str, float | None]:
    """Violations per parsed unit of each RULE_FAMILIES family."""
    return {family: count / parsed if parsed else None for family, count in family_counts(by_rule).items()}


def rules_table(grid: str = "world", spec: StudySpec | None = None) -> str:
    """Where each arm's violations fall: per RULE_FAMILIES family, violations per parsed unit of
    the placeholder texts (means over seeds, t-intervals), with the grounded share beside them.
    Per parsed unit because the checker counts by rule over every parsed unit (a unit that
    names an item outside the scene still has its character's rules applied); a text with
    fewer grounded units is checked against fewer state rules, so the state families read
    together with the grounded share (the grounded rates are `seeds_table`'s)."""
    rows = []
    for arm, seeds in runs(grid, spec).items():
        per_seed = [family_rates(rate(w, "by_rule") or {}, rate(w, "parsed") or 0) for w in seeds.values()]
        grounded = share_interval(list(by_seed(seeds, "grounded_share").values()))
        rows.append([NAMES.get(arm, arm), str(len(seeds)), grounded.format(1, pct=True),
                     *(rate_interval([found[family] for found in per_seed]).format(3) for family in RULE_FAMILIES)])
    if not rows:
        return NONE_YET
    return markdown_table(["arm", "seeds", "grounded % of parsed", *RULE_FAMILIES], rows)


def older_note(grid: str = "world", spec: StudySpec | None = None) -> str:
    """A line under a table of the grid naming its kept configurations that ran at older code:
    left out of the table or shown as that code measured them (`hides_older`), until `--stale`
    reruns them."""
    spec = spec or study()
    names = late(grid, spec)
    if not names:
        return ""
    hidden, changes = hides_older(grid, spec), f"{spec.folder.relative_to(PROJECT_ROOT)}/results.md: what changed"
    if grid in CURRENT_ONLY and not hidden:
        return (f"\n\n_All {len(names)} configurations of this grid ran at one older code, shown as that code "
                f"measured them (still paired seed by seed; {changes})._")
    how = "not in the table until rerun" if hidden else "shown as that code measured them"
    return f"\n\n_Ran at older code, {how}: {', '.join(names)} ({changes})._"


def _current(table: Callable[[], str], grid: str = "world") -> Callable[[], str]:
    return lambda: table() + older_note(grid)


BLOCKS: dict[str, Callable[[], str]] = {
    "entityworld-answers": _current(answers_table),
    "entityworld-scene-blind": scene_blind,
    "entityworld-fluency": _current(fluency_table),
    "entityworld-fluency-curve": _current(fluency_curve, "fluency"),
    "entityworld-writer": _current(writer_table, "fluency"),
    "entityworld-fluency-rules": _current(fluency_rules, "fluency"),
    "entityworld-cost": cost_table,
    "entityworld-curve": _current(grid_curve),
    "entityworld-final": _current(final_table),
    "entityworld-states": _current(states_table),
    "entityworld-seeds": _current(seeds_table),
    "entityworld-rules": _current(rules_table),
    "entityworld-pairs": _current(grounded_pairs),
    "entityworld-pairs-final": _current(lambda: grounded_pairs(form="final")),
    "entityworld-pairs-world-mix": _current(world_mix_pairs),
}
