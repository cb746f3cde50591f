"""docs/entityworld-study.md and its learning-curve figure, from studies/entityworld/outputs.

    python studies/entityworld/render.py     # or python -m studies.render (every page)

Every number is read from the committed outputs (run.py writes them); nothing is typed.
"""

from __future__ import annotations

import csv
import gzip
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

from eric.evaluate.intervals import mcnemar, paired_ratio_difference, ratio_interval, seed_interval
from eric.world.world import STATE_RULES

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUTPUTS = HERE / "outputs"
PAGE = ROOT / "docs" / "entityworld-study.md"
FIGURE = ROOT / "docs" / "img" / "entityworld-curves.png"
PLAN = yaml.safe_load((HERE / "plan.yaml").read_text())
_WORLD = yaml.safe_load((ROOT / PLAN["profile"]).read_text())
WORLD_SEED, WORLD_CAST = _WORLD["corpus.world.seed"], _WORLD["corpus.world.cast"]  # the study's world
NAMES = {"eric": "ERIC", "eric_paper": "ERIC (paper recipe)", "eric_no_state_attention": "ERIC w/o StateAttn",
         "eric_no_state": "ERIC w/o s_n", "bart": "BART", "simctg": "SimCTG"}
FLUENT_PARSE, FLUENT_GROUNDING = 0.95, 0.05  # the fluent budget's targets
RATIO_TARGET = 0.7  # ERIC's state violations at most this share of BART's
PLAN_MAX_UNITS = 15  # the checker reads the first 15 units, as evaluate.max_units
CURVE_KEYS = [("parse_rate", "parse rate"), ("violation_rate", "violations / parsed unit"),
              ("state_violation_rate", "state violations / parsed unit"), ("val_cl_ratio", "val L_CL / chance")]


# --- reading the outputs -----------------------------------------------------------------
@lru_cache(maxsize=None)  # by path: the page reads each output many times, and it does not change meanwhile
def _csv(path: Path) -> tuple[dict, ...]:
    with path.open() as handle:
        return tuple(csv.DictReader(handle))


@lru_cache(maxsize=None)
def _json(path: Path) -> dict:
    return json.loads(path.read_text())


@lru_cache(maxsize=None)
def _jsonl(path: Path) -> tuple[dict, ...]:
    """The rows of a `.jsonl.gz` output (samples, final samples)."""
    with gzip.open(path, "rt") as handle:
        return tuple(json.loads(line) for line in handle)


@lru_cache(maxsize=None)
def _checks(folder: Path) -> tuple:
    """The checker over a run's final samples (`samples.jsonl.gz`), one StoryCheck per test story."""
    from eric.world.checker import check_story
    from eric.world.metrics import text_units

    return tuple(check_story(r["input"], text_units(r["stage_one"], PLAN_MAX_UNITS))
                 for r in _jsonl(folder / "samples.jsonl.gz"))


@lru_cache(maxsize=None)
def world_story(sid: str):
    """A test input's own story, regenerated from its id (eric/world/generate.py)."""
    from eric.world.generate import generate_story, story_index, story_rng

    return generate_story(story_rng(WORLD_SEED, story_index(sid)), sid, tuple(WORLD_CAST))


def runs(arm: str) -> dict[int, Path]:
    """seed -> outputs folder, for the seeds whose final measurements exist."""
    found = {}
    for folder in sorted((OUTPUTS / arm).glob("seed-*")):
        if (folder / "final.json").is_file():
            found[int(folder.name.split("-")[1])] = folder
    return found


def arms() -> list[str]:
    return [arm for arm in PLAN["arms"] if runs(arm)]


def stories(arm: str, field: str, texts: str = "stories.csv") -> np.ndarray:
    """stories x seeds of one checker count (rows in the test inputs' order); "ones" counts
    stories. `texts`: stories.csv (stage one) or finals.csv (final texts, with names)."""
    columns = [[1.0 if field == "ones" else float(r[field]) for r in _csv(folder / texts)]
               for folder in runs(arm).values() if (folder / texts).is_file()]
    return np.array(columns).T


def finals(arm: str) -> list[dict]:
    return [_json(folder / "final.json") for folder in runs(arm).values()]


def curve_rows(arm: str) -> dict[int, list[dict]]:
    return {seed: _csv(folder / "curve.csv") for seed, folder in runs(arm).items() if (folder / "curve.csv").is_file()}


def cases(arm: str, scoring: str) -> dict[tuple, bool]:
    """(seed, text, unit) -> right, for the model's own states (predicted) or none."""
    out = {}
    for seed, folder in runs(arm).items():
        for r in _csv(folder / "cases.csv"):
            if r["scoring"] == scoring and r["mode"] in ("predicted", "none"):
                out[(seed, r["text"], int(r["unit"]))] = r["right"] == "1"
    return out


# --- formatting ----------------------------------------------------------------------------
def fmt(value, digits: int = 3, pct: bool = False) -> str:
    if value is None:
        return "–"
    return f"{100 * value:.1f}" if pct else f"{value:.{digits}f}"


def fmt_interval(found, digits: int = 3, pct: bool = False) -> str:
    if found.value is None:
        return "–"
    if found.low is None:
        return fmt(found.value, digits, pct)
    return f"{fmt(found.value, digits, pct)} [{fmt(found.low, digits, pct)}, {fmt(found.high, digits, pct)}]"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


# --- the measures ----------------------------------------------------------------------------
def rate(arm: str, field: str, per: str = "parsed", texts: str = "stories.csv"):
    return ratio_interval(stories(arm, field, texts), stories(arm, per, texts), resamples=PLAN["evaluate"]["bootstrap"])


def per_seed(arm: str, field: str, per: str = "parsed") -> list[float | None]:
    numer, denom = stories(arm, field), stories(arm, per)
    return [float(numer[:, s].sum() / denom[:, s].sum()) if denom[:, s].sum() else None for s in range(numer.shape[1])]


def final_table(found: list[str]) -> list[str]:
    rows = []
    for arm in found:
        coherence = {s: seed_interval([f["coherence"].get(f"{s}/predicted", f["coherence"].get(f"{s}/none"))
                                        for f in finals(arm)]) for s in ("lm", "joint", "event")}
        rows.append([NAMES.get(arm, arm), str(len(runs(arm))), fmt_interval(rate(arm, "parsed", "units"), pct=True),
                     fmt_interval(rate(arm, "state_violations")), fmt_interval(rate(arm, "grounding")),
                     fmt_interval(rate(arm, "violations")), fmt_interval(rate(arm, "clean", "ones"), pct=True),
                     fmt_interval(rate(arm, "valid", "ones"), pct=True),
                     *(fmt_interval(coherence[s], pct=True) for s in ("lm", "joint", "event"))])
    return table(["arm", "seeds", "parse rate %", "state viol. / parsed", "grounding viol. / parsed",
                  "all viol. / parsed", "clean stories %", "valid stories %", "coherence lm %", "coherence joint %",
                  "coherence event %"], rows)


# --- final texts: the mention writer's names in ---------------------------------------------
WRITER = OUTPUTS / "writer"


def writer_line() -> str:
    """The mention writer on the reference texts: its curve and whether it meets the plan's target."""
    from studies.entityworld.measure import read_checks, summarize_checks

    if not (WRITER / "gold.csv").is_file():
        return "The mention writer has not been trained on the world yet (`run.py` trains it first)."
    gold = read_checks(WRITER / "gold.csv")
    summary, named = summarize_checks(gold), sum(r["named"] for r in gold)
    curve = ", ".join(f"{r['step']}: {fmt(float(r['mapped_rate']), pct=True)}%" for r in _csv(WRITER / "curve.csv"))
    target, spec = PLAN["writer"]["target"], PLAN["writer"]["set"]
    mapped = summary["mapped_rate"]
    met = "meets" if mapped >= target else "misses"
    return (f"The mention writer (`{spec['mentions.size']}` size, {spec['mentions.max_steps']:,} steps at lr "
            f"{spec['mentions.lr']}, trained once on the world and shared by every arm) {met} the target: on the "
            f"reference stage-one texts of the test inputs, {fmt(mapped, pct=True)}% of the {named:,} units "
            f"with placeholders get names that map back to the cast (target {100 * target:.0f}%), "
            f"{fmt(summary['faithful_rate'], pct=True)}% to the very characters of the unit, and "
            f"{fmt(summary['parse_rate'], pct=True)}% of the named reference texts' units parse. "
            f"Named units mapping back, by training step: {curve}." + ("" if mapped >= target else _writer_why()))


def _writer_why() -> str:
    d = writer_diagnosis()
    return (f" Why: against the world's own mention lists, the writer puts the right placeholder at "
            f"{fmt(d['tags'], pct=True)}% of the positions, and of the mentions it writes "
            f"{fmt(d['cast'], pct=True)}% are a name of the story's cast at all and {fmt(d['right'], pct=True)}% the "
            "name of the character the placeholder stands for: it writes names of the world's vocabulary in the "
            "world's form but copies neither the stage-one text's placeholders in order nor the scene's names. "
            "A likely reason (untested): `<ek>` stands for the k-th character the scene names, so writing its "
            "name means counting the scene's names, which this small model from random weights has not learned "
            "at this budget. Where a placeholder was given no name the pipeline's merge falls back "
            "to a name from the training stories, which is rarely one of the cast.")


def writer_diagnosis() -> dict[str, float]:
    """What the writer's mention lists get right on the reference texts, against the world's own
    lists (eric/world/generate.Story.mentions): the placeholder at each position, a name of the
    cast at all, and the name of the very character its placeholder stands for."""
    from eric.generate.merge import parse_mentions

    tags = cast_names = right = written = positions = 0
    for row in _jsonl(WRITER / "gold_samples.jsonl.gz"):
        story = world_story(row["id"])
        truth, wrote = story.mentions(), parse_mentions(row["mentions"])
        names = {k: {name, name.split()[0]} for k, name in enumerate(story.cast)}
        tags += sum(t == w for (t, _), (w, _) in zip(truth, wrote))
        positions += len(truth)
        for tag, mention in wrote:
            k = int(tag[2:-1])
            cast_names += any(mention in forms for forms in names.values())
            right += mention in names.get(k, ())
        written += len(wrote)
    return {"tags": tags / max(positions, 1), "cast": cast_names / max(written, 1), "right": right / max(written, 1),
            "written": written / max(positions, 1)}


def finals_table(found: list[str]) -> list[str]:
    rows = []
    for arm in found:
        units = stories(arm, "units", "finals.csv")  # stories x seeds; empty before the writer ran
        if not units.size:
            continue
        cells = [fmt_interval(rate(arm, "mapped", "named", "finals.csv"), pct=True),
                 fmt_interval(rate(arm, "faithful", "named", "finals.csv"), pct=True),
                 fmt_interval(rate(arm, "parsed", "units", "finals.csv"), pct=True),
                 fmt(rate(arm, "parsed", "units").value, pct=True),
                 fmt_interval(rate(arm, "state_violations", texts="finals.csv")),
                 fmt_interval(rate(arm, "grounding", texts="finals.csv")),
                 fmt_interval(rate(arm, "valid", "ones", "finals.csv"), pct=True)]
        rows.append([NAMES.get(arm, arm), str(units.shape[1]), *cells])
    return table(["arm", "seeds", "named units mapping to the cast %", "to the same characters %",
                  "final parse rate %", "stage-one parse rate %", "state viol. / parsed", "grounding viol. / parsed",
                  "valid stories %"], rows)


def case_rows(arm: str) -> list[dict]:
    """Seed 1's (the first seed's) test stories as sample rows: stage one, and the final text where
    the writer filled it."""
    folder = next(iter(runs(arm).values()))
    named = folder / "final_samples.jsonl.gz"
    finals = {r["id"]: r["final_text"] for r in _jsonl(named)} if named.is_file() else {}
    return [{**r, "final_text": finals.get(r["id"], r["stage_one"]), "reference": reference(r["id"])}
            for r in _jsonl(folder / "samples.jsonl.gz")]


def reference(sid: str) -> str:
    """The human story of a test input: the world's own story, regenerated from its id, with names."""
    from eric.data.anonymize import deanonymize

    story = world_story(sid)
    text = "<sent> " + " <sent> ".join(story.units)
    return deanonymize(text, [{"placeholder": tag, "mention": name} for tag, name in story.mentions()])


CASES = 1  # test stories shown, every arm's first seed


def case_section(found: list[str]) -> list[str]:
    """A test story as every arm's first seed wrote it, unit by unit, with the checker's verdict."""
    from eric.evaluate.case_study import build_cases, case_markdown

    samples = {arm: case_rows(arm) for arm in found}
    cases = build_cases(samples, CASES, PLAN["seeds"][0], world=True, max_units=PLAN_MAX_UNITS)
    return [case_markdown(cases, lambda arm: NAMES.get(arm, arm))] if cases else []


def seed_table(found: list[str]) -> list[str]:
    rows = []
    for arm in found:
        parse, state = per_seed(arm, "parsed", "units"), per_seed(arm, "state_violations")
        rows.append([NAMES.get(arm, arm), fmt_interval(seed_interval(parse), pct=True),
                     ", ".join(fmt(v, pct=True) for v in parse), fmt_interval(seed_interval(state)),
                     ", ".join(fmt(v) for v in state)])
    return table(["arm", "parse rate % (mean, t-interval)", "per seed", "state viol. / parsed (mean, t-interval)",
                  "per seed"], rows)


MATCH_SHARE = 0.8  # matched parse rate: stories both arms parse at least this share of


def paired_columns(a: str, b: str) -> tuple[list[int], list[int], list[int]]:
    """The seeds both arms ran, and their columns in each arm's stories x seeds arrays."""
    seeds = sorted(set(runs(a)) & set(runs(b)))
    return seeds, [list(runs(a)).index(s) for s in seeds], [list(runs(b)).index(s) for s in seeds]


def matched(a: str, b: str, field: str = "state_violations"):
    """A minus B on the story-seeds where both arms parse at least MATCH_SHARE of the units
    (seeds paired by number), and each arm's parse rate there."""
    _, ia, ib = paired_columns(a, b)
    parsed = {arm: (stories(arm, "parsed")[:, idx], stories(arm, "units")[:, idx]) for arm, idx in ((a, ia), (b, ib))}
    both = np.logical_and(*[p >= MATCH_SHARE * np.maximum(u, 1) for p, u in parsed.values()])
    rates = [float((p * both).sum() / max((u * both).sum(), 1)) for p, u in parsed.values()]
    diff = paired_ratio_difference(stories(a, field)[:, ia] * both, parsed[a][0] * both,
                                   stories(b, field)[:, ib] * both, parsed[b][0] * both,
                                   resamples=PLAN["evaluate"]["bootstrap"])
    return diff, int(both.sum()), rates


def pair_rows(pairs: list[tuple[str, str]]) -> list[list[str]]:
    rows = []
    for a, b in pairs:
        seeds, ia, ib = paired_columns(a, b)
        diff = paired_ratio_difference(stories(a, "state_violations")[:, ia], stories(a, "parsed")[:, ia],
                                       stories(b, "state_violations")[:, ib], stories(b, "parsed")[:, ib],
                                       resamples=PLAN["evaluate"]["bootstrap"])
        at_match, n, rates = matched(a, b)
        tests = [mcnemar(cases(a, s), cases(b, s)) for s in ("lm", "joint", "event")]
        mixed = paired_standardized(a, b)
        rows.append([f"{NAMES.get(a, a)} − {NAMES.get(b, b)}", str(len(seeds)),
                     f"{mixed[0]:+.3f} [{mixed[1]:+.3f}, {mixed[2]:+.3f}]", _diff(diff), _p(diff.p_value),
                     f"{_diff(at_match)} ({n} story-seeds; parse {fmt(rates[0], pct=True)}% vs "
                     f"{fmt(rates[1], pct=True)}%)",
                     *(f"{t.a_only}/{t.b_only}, p {_p(t.p_value)}" for t in tests)])
    return rows


def _diff(found) -> str:
    if found.difference is None:
        return "–"
    return f"{found.difference:+.3f} [{found.low:+.3f}, {found.high:+.3f}]"


def _p(value) -> str:
    return "–" if value is None else (f"{value:.2g}" if value >= 1e-4 else "<1e-4")


def probe_table(found: list[str]) -> list[str]:
    rows = []
    for arm in found:
        probes = [f["probes"] for f in finals(arm)]
        for key in sorted(probes[0]):
            acc = seed_interval([p[key]["accuracy"] for p in probes])
            gain = seed_interval([p[key]["gain"] for p in probes])
            pooled_low = min(p[key]["gain_low"] for p in probes)
            what, label = key.split("/")
            rows.append([NAMES.get(arm, arm), what, label, fmt_interval(acc), fmt(np.mean([p[key]["majority"] for p in probes])),
                         fmt_interval(gain), f"{pooled_low:+.3f}"])
    return table(["arm", "state", "label", "accuracy (mean over seeds)", "majority class", "gain (mean, t-interval)",
                  "lowest per-seed bootstrap low"], rows)


def oracle_line() -> str:
    path = OUTPUTS / "oracle.json"
    if not path.is_file():
        return ""
    o = json.loads(path.read_text())
    return (f"The event type of a unit is drawn at random by the generator: its exact distribution before the "
            f"unit (`eric/world/oracle.py`), the best any model can know from the prefix, names the right kind for "
            f"{fmt(o['accuracy'])} of the {o['units']:,} test units against the majority kind's {fmt(o['majority'])} "
            f"(`outputs/oracle.json`), so no probe of what the prefix gives (`predicted`, `hidden`, `linear`) can gain "
            f"more than about {o['accuracy'] - o['majority']:+.3f} there (`gold` reads the whole unit, `entity` the "
            "words before the placeholder, which may already name the event). The condition a unit begins in is fixed by the prefix: a model "
            "that tracks states can reach 1.0 there.")


def probe_mean(arm: str, key: str, field: str = "gain") -> float | None:
    values = [f["probes"][key][field] for f in finals(arm) if key in f["probes"]]
    return float(np.mean(values)) if values else None


def why_line(found: list[str]) -> str:
    """What the probes say about where the condition is lost (numbers from the outputs)."""
    eric = [a for a in found if a in ("eric", "eric_paper") and probe_mean(a, "gold/condition_before") is not None]
    if not eric:
        return ""
    parts = []
    for arm in eric:
        parts.append(f"{NAMES[arm]}: gold-state gain {probe_mean(arm, 'gold/event'):+.3f} for the event type, "
                     f"{probe_mean(arm, 'gold/condition_before'):+.3f} for the condition the unit begins in; "
                     f"predicted-state gain {probe_mean(arm, 'predicted/condition_before'):+.3f} for that condition")
    hidden = [f"{NAMES.get(a, a)} {probe_mean(a, 'entity/condition_before'):+.3f}" for a in found
              if probe_mean(a, "entity/condition_before") is not None]
    return ("Where the condition is lost: the states are defined by L_CL's targets, the sentence encoder's "
            "reading of one unit alone. " + "; ".join(parts) + ". The decoder's own hidden vector once it has "
            "read the focal character's placeholder, read by the linear probe (gain for the condition the unit "
            "begins in): " + ", ".join(hidden) + ".")


def contrast_table(found: list[str]) -> list[str]:
    rows = []
    for arm in found:
        fs = finals(arm)
        if not any(f["contrastive"].get("val") for f in fs):
            continue
        states = [f.get("states") or {} for f in fs]
        rows.append([NAMES.get(arm, arm), fmt_interval(seed_interval([f["contrastive"]["train"] for f in fs])),
                     fmt_interval(seed_interval([f["contrastive"]["val"] for f in fs])),
                     fmt_interval(seed_interval([s.get("nmi") for s in states])),
                     fmt_interval(seed_interval([s.get("purity") for s in states]), pct=True),
                     fmt(np.mean([s.get("states_used", 0) for s in states]), 0)])
    return table(["arm", "train L_CL / chance", "val L_CL / chance", "NMI (event, condition)", "purity %",
                  "states used (test)"], rows)


def story_units(arm: str) -> tuple[tuple[tuple[tuple[str, int], ...], ...], ...]:
    """Per seed, per test story: (event kind, state violations) of every parsed unit."""
    return tuple(tuple(tuple((u.event.kind, sum(v in STATE_RULES for v in u.violations)) for u in c.units
                             if u.event is not None) for c in _checks(folder))
                 for folder in runs(arm).values())


def by_rule(arm: str) -> tuple[dict[str, float], int]:
    """Violations per parsed unit by rule, pooled over seeds."""
    from collections import Counter

    counts, parsed = Counter(), 0
    for folder in runs(arm).values():
        for check in _checks(folder):
            counts.update(check.by_rule)
            parsed += check.parsed
    return {rule: n / parsed for rule, n in counts.items()} if parsed else {}, parsed


# --- the event mix: a model that writes mostly one-character events breaks fewer state rules ---
@lru_cache(maxsize=None)
def world_mix(stories: int = 2000) -> dict[str, float]:
    """The world's own event-kind shares (the generator, seed of the plan's world)."""
    from collections import Counter

    from eric.world.generate import generate_stories

    counts = Counter(e.kind for s in generate_stories(WORLD_SEED, stories) for e in s.events)
    total = sum(counts.values())
    return {kind: n / total for kind, n in counts.items()}


def kind_arrays(arm: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """stories x seeds x kinds: parsed units and their state violations, per event kind."""
    kinds = sorted(world_mix())
    seeds = story_units(arm)
    parsed = np.zeros((len(seeds[0]), len(seeds), len(kinds)))
    broken = np.zeros_like(parsed)
    for s, stories in enumerate(seeds):
        for i, units in enumerate(stories):
            for kind, violations in units:
                parsed[i, s, kinds.index(kind)] += 1
                broken[i, s, kinds.index(kind)] += violations
    return parsed, broken, kinds


def _standardized(parsed: np.ndarray, broken: np.ndarray, weights: np.ndarray) -> float | None:
    """sum_k w_k x (violations_k / parsed_k) over the kinds written, weights renormalized."""
    p, b = parsed.reshape(-1, parsed.shape[-1]).sum(0), broken.reshape(-1, broken.shape[-1]).sum(0)
    seen = p > 0
    return float((weights[seen] * b[seen] / p[seen]).sum() / weights[seen].sum()) if seen.any() else None


def standardized(arm: str, resamples: int | None = None):
    """State violations per parsed unit at the world's event mix (direct standardization),
    with a bootstrap interval over test stories; and the world-mix weight the arm covers."""
    from eric.evaluate.intervals import Interval

    parsed, broken, kinds = kind_arrays(arm)
    weights = np.array([world_mix()[k] for k in kinds])
    value = _standardized(parsed, broken, weights)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, parsed.shape[0], size=(resamples or PLAN["evaluate"]["bootstrap"], parsed.shape[0]))
    boots = [v for pick in picks if (v := _standardized(parsed[pick], broken[pick], weights)) is not None]
    low, high = np.percentile(boots, [2.5, 97.5])
    covered = float(weights[parsed.sum((0, 1)) > 0].sum())
    return Interval(value, float(low), float(high)), covered


def per_seed_standardized(arm: str) -> list[float | None]:
    parsed, broken, kinds = kind_arrays(arm)
    weights = np.array([world_mix()[k] for k in kinds])
    return [_standardized(parsed[:, s:s + 1], broken[:, s:s + 1], weights) for s in range(parsed.shape[1])]


def mix_distance(arm: str) -> list[float]:
    """Per seed: total variation distance between the arm's event-kind shares and the world's."""
    parsed, _, kinds = kind_arrays(arm)
    world = np.array([world_mix()[k] for k in kinds])
    shares = parsed.sum(0) / np.maximum(parsed.sum((0, 2))[:, None], 1)
    return [float(0.5 * np.abs(row - world).sum()) for row in shares]


def mix_table(found: list[str]) -> list[str]:
    rows = []
    for arm in found:
        value, covered = standardized(arm)
        distance = mix_distance(arm)
        travel = kind_arrays(arm)
        share = travel[0][..., travel[2].index("travel")].sum() / max(travel[0].sum(), 1)
        rows.append([NAMES.get(arm, arm), fmt(share, pct=True), ", ".join(fmt(d, 2) for d in distance),
                     fmt_interval(value), ", ".join(fmt(v) for v in per_seed_standardized(arm)),
                     fmt(covered, pct=True)])
    return table(["arm", "travel % of parsed units", "event-mix distance to the world, per seed (TV)",
                  "state viol. / parsed at the world's mix", "per seed", "world mix covered %"], rows)


def rule_table(found: list[str], top: int = 6) -> list[str]:
    rates = {arm: by_rule(arm)[0] for arm in found}
    rules = sorted({r for per in rates.values() for r in per}, key=lambda r: -max(p.get(r, 0) for p in rates.values()))
    kinds = {r: "state" if r in STATE_RULES else "grounding" for r in rules}
    return table(["rule", "kind", *(NAMES.get(a, a) for a in found)],
                 [[f"`{r}`", kinds[r], *(fmt(rates[a].get(r, 0.0)) for a in found)] for r in rules[:top]])


# --- curves ----------------------------------------------------------------------------------
def mean_curve(arm: str, key: str) -> list[tuple[int, float]]:
    by_step: dict[int, list[float]] = {}
    for rows in curve_rows(arm).values():
        for r in rows:
            if r.get(key) not in (None, ""):
                by_step.setdefault(int(r["step"]), []).append(float(r[key]))
    return [(step, float(np.mean(v))) for step, v in sorted(by_step.items())]


def curve_table(found: list[str]) -> list[str]:
    steps = sorted({s for arm in found for s, _ in mean_curve(arm, "parse_rate")})
    rows = []
    for step in steps:
        cells = []
        for arm in found:
            values = {key: dict(mean_curve(arm, key)).get(step) for key in ("parse_rate", "grounding_rate",
                                                                                 "state_violation_rate")}
            cells.append(f"{fmt(values['parse_rate'], pct=True)} / {fmt(values['grounding_rate'], 2)} / "
                         f"{fmt(values['state_violation_rate'], 2)}")
        rows.append([str(step), *cells])
    return table(["step", *(NAMES.get(a, a) for a in found)], rows)


def draw(found: list[str] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = found or arms()
    fig, axes = plt.subplots(1, len(CURVE_KEYS), figsize=(4 * len(CURVE_KEYS), 3.6))
    for ax, (key, title) in zip(axes, CURVE_KEYS):
        for arm in found:
            points = mean_curve(arm, key)
            if points:
                ax.plot([s for s, _ in points], [v for _, v in points], marker="o", label=NAMES.get(arm, arm))
        if key == "parse_rate":
            ax.axhline(FLUENT_PARSE, color="grey", linestyle=":", linewidth=0.8)
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("step")
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    plt.close(fig)


# --- the verdict -------------------------------------------------------------------------------
def fluent_line() -> str:
    points = {s: v for s, v in mean_curve("bart", "parse_rate")}
    grounding = dict(mean_curve("bart", "grounding_rate"))
    if not points:
        return "BART has no learning curve yet."
    met = [s for s in sorted(points) if points[s] >= FLUENT_PARSE and (grounding.get(s) or 1) <= FLUENT_GROUNDING]
    last = max(points)
    if met:
        return f"BART meets the fluent budget from step {met[0]} (parse rate {fmt(points[met[0]], pct=True)}%)."
    steps = sorted(points)
    previous = steps[-2] if len(steps) > 1 else last
    trend = (f"from step {previous} to {last} the parse rate moved {100 * (points[last] - points[previous]):+.1f} "
             f"points and grounding violations {(grounding.get(last) or 0) - (grounding.get(previous) or 0):+.2f}")
    rates = by_rule("bart")[0]
    worst = max((r for r in rates if r not in STATE_RULES), key=rates.get, default=None)
    why = (f" The grounding rule BART breaks most in its final samples is `{worst}` ({fmt(rates[worst])} per parsed "
           "unit): copying the scene's names is what this budget has not yet taught.") if worst else ""
    return (f"**The fluent budget is missed:** at step {last}, the end of this budget, BART parses "
            f"{fmt(points[last], pct=True)}% of units (target {100 * FLUENT_PARSE:.0f}%) with "
            f"{fmt(grounding.get(last), 2)} grounding violations per parsed unit (target {FLUENT_GROUNDING}); "
            f"{trend}.{why}")


PROBE_LABEL = "condition_before"  # the verdict's probe: what the prefix fixes, so a tracker can know it


def probe_key(arm: str) -> str:
    """ERIC's predicted state, or (no states) the decoder's hidden state in K clusters: equal capacity."""
    predicted = f"predicted/{PROBE_LABEL}"
    return predicted if any(predicted in f["probes"] for f in finals(arm)) else f"hidden/{PROBE_LABEL}"


def probe_accuracy(arm: str) -> float | None:
    return probe_mean(arm, probe_key(arm), "accuracy")


def probe_better(a: str, b: str) -> bool:
    """A's probe gains over the majority class in every seed (bootstrap low above 0) and more than B's."""
    lows = [f["probes"][probe_key(a)]["gain_low"] for f in finals(a)]
    gain_a, gain_b = probe_mean(a, probe_key(a)), probe_mean(b, probe_key(b))
    return bool(lows) and min(lows) > 0 and None not in (gain_a, gain_b) and gain_a > gain_b


MIX_LIMIT = 0.3  # a seed whose event mix is this far (TV) from the world's writes another kind of story


def paired_standardized(a: str, b: str) -> tuple[float | None, float | None, float | None]:
    """A minus B of the standardized rate, with a paired bootstrap over the test stories."""
    (pa, ba, kinds), (pb, bb, _) = kind_arrays(a), kind_arrays(b)
    weights = np.array([world_mix()[k] for k in kinds])
    value = (_standardized(pa, ba, weights) or 0) - (_standardized(pb, bb, weights) or 0)
    rng = np.random.default_rng(0)
    diffs = []
    for pick in rng.integers(0, pa.shape[0], size=(PLAN["evaluate"]["bootstrap"], pa.shape[0])):
        x, y = _standardized(pa[pick], ba[pick], weights), _standardized(pb[pick], bb[pick], weights)
        if x is not None and y is not None:
            diffs.append(x - y)
    low, high = np.percentile(diffs, [2.5, 97.5]) if diffs else (None, None)
    return value, low, high


def verdict() -> str:
    if not (runs("eric") and runs("bart")):
        return "No verdict yet: ERIC and BART have not both been measured."
    (eric, _), (bart, _) = standardized("eric"), standardized("bart")
    seeds = seed_interval(per_seed_standardized("eric")), seed_interval(per_seed_standardized("bart"))
    ratio = eric.value / bart.value if bart.value else None
    apart = eric.high < bart.low
    seeds_apart = None not in (seeds[0].high, seeds[1].low) and seeds[0].high < seeds[1].low
    probes = probe_accuracy("eric"), probe_accuracy("bart")
    majority = probe_mean("eric", probe_key("eric"), "majority")
    misses = [f"the ratio is {fmt(ratio, 2)}, above {RATIO_TARGET}"] if ratio is None or ratio > RATIO_TARGET else []
    misses += [] if apart else ["the intervals over test stories overlap"]
    misses += [] if seeds_apart else [f"the intervals over seeds overlap (ERIC {fmt_interval(seeds[0])}, BART "
                                      f"{fmt_interval(seeds[1])})"]
    misses += [] if probe_better("eric", "bart") else [
        f"ERIC's predicted state predicts the condition a unit begins in no better than BART's hidden state "
        f"(accuracy {fmt(probes[0])} vs {fmt(probes[1])}, majority class {fmt(majority)})"]
    odd = [f"seed {seed} ({d:.2f})" for seed, d in zip(runs("eric"), mix_distance("eric")) if d > MIX_LIMIT]
    misses += [f"ERIC's {', '.join(odd)} write another kind of story than the world (event-mix distance above "
               f"{MIX_LIMIT}: mostly one-character travel)"] if odd else []
    if not misses:
        head = "**Verdict: ERIC tracks entities better than BART here.**"
    elif apart:
        head = ("**Verdict: partly — ERIC breaks fewer state rules than BART at the world's event mix, but the "
                "decisive bar is not met: " + "; ".join(misses) + ".**")
    else:
        head = "**Verdict: not shown — " + "; ".join(misses) + ".**"
    raw = rate("eric", "state_violations"), rate("bart", "state_violations")
    return (f"{head} State violations per parsed unit at the world's event mix: ERIC {fmt_interval(eric)}, BART "
            f"{fmt_interval(bart)} (raw: {fmt_interval(raw[0])} and {fmt_interval(raw[1])}); parse rates "
            f"{fmt(rate('eric', 'parsed', 'units').value, pct=True)}% and "
            f"{fmt(rate('bart', 'parsed', 'units').value, pct=True)}%.")


def missing_arms(found: list[str]) -> list[str]:
    missing = [NAMES.get(a, a) for a in PLAN["arms"] if a not in found]
    short = [f"{NAMES.get(a, a)} ({len(runs(a))} of {len(PLAN['seeds'])})" for a in found
             if len(runs(a)) < len(PLAN["seeds"])]
    lines = [f"- Arms of the plan not run yet: {', '.join(missing)}." if missing else "",
             f"- Arms with fewer seeds than planned: {', '.join(short)}." if short else ""]
    lines = [line for line in lines if line]
    return lines + (["  `python flows/study.py studies/entityworld` runs what is missing and keeps the rest."]
                    if lines else [])


# --- the page -------------------------------------------------------------------------------------
def page() -> str:
    found = arms()
    s, ev = PLAN["set"], PLAN["evaluate"]
    out = ["# The decisive EntityWorld study: does ERIC track entities better than BART?", "",
           "<!-- generated by studies/entityworld/render.py from studies/entityworld/outputs; do not edit -->", "",
           f"Every number is read from `studies/entityworld/outputs/` ({len(found)} arms; rerun what is missing with "
           "`python flows/study.py studies/entityworld`, i.e. `studies/entityworld/run.py`). The plan "
           f"(`studies/entityworld/plan.yaml`): {s['corpus.world.stories']:,} generated stories (the world and the "
           f"test inputs are fixed), the `{s['model.size']}` model size from random weights, {s['train.max_steps']:,} "
           f"steps of batch 8 at lr {s['train.lr']} (no story seen twice), seeds {', '.join(map(str, PLAN['seeds']))} "
           "(initialisation and data order), one torch thread per run on a 2-core CPU. The checker reads the "
           f"stage-one texts (placeholders) of the first {ev['test_inputs']} test inputs, sampled with top-p 0.9; "
           f"the learning curves read the first {ev['curve_inputs']} at every snapshot.", "",
           verdict(), "", "## The fluent budget", "", fluent_line(), "",
           f"![learning curves]({FIGURE.relative_to(PAGE.parent).as_posix()})", "",
           "Learning curves, mean over seeds (parse rate % / grounding violations / state violations per parsed "
           "unit):", "", *curve_table(found), "",
           "## What each arm writes", "",
           "Pooled over seeds; 95% intervals are bootstrap over the test stories (a story's seeds move together). "
           "Coherence: the model's own predicted states; `lm` is the paper's test, `joint` adds the planner's "
           "log-probability of the swapped-in entity, `event` leaves the swapped placeholder out of both scores "
           "(mean over seeds, t-interval).", "", *final_table(found), "",
           "The spread over seeds (one number per seed, mean and 95% Student-t interval):", "", *seed_table(found), "",
           "What the arms write, against the world: a model that writes mostly one-character events (travel) "
           "breaks fewer state rules without tracking anything, so the state-violation rate is also given at the "
           "world's own event mix (direct standardization: each event kind's rate, weighted by its share of the "
           "generator's events; kinds an arm never writes are left out and the weights renormalized).", "",
           *mix_table(found), "",
           "The rules broken most, per parsed unit (pooled over seeds; the checker rereads `samples.jsonl.gz`):", "",
           *rule_table(found), "",
           "## Paired tests", "",
           "Per test input (seed n of one arm paired with seed n of the other): the difference of state violations "
           "per parsed unit at the world's event mix with a paired bootstrap over test stories, then the raw one "
           "with a paired bootstrap interval and the Wilcoxon signed-rank p-value over per-story "
           "differences; **at matched parse rate**: the same difference on only the story-seeds where both arms "
           f"parse at least {100 * MATCH_SHARE:.0f}% of the units (each arm's parse rate there in brackets), so "
           "neither arm is judged on text the other could not write; "
           "McNemar on the coherence cases (right only in A / right only in B, exact p).", "",
           *table(["A − B", "seeds", "state viol. / parsed at the world's mix", "raw", "Wilcoxon p (raw)",
                   "at matched parse rate (raw)",
                   "McNemar lm", "McNemar joint", "McNemar event"],
                  pair_rows([(a, b) for a, b in (("eric", "bart"), ("eric", "eric_no_state"), ("eric", "eric_paper"))
                             if runs(a) and runs(b)])), "",
           "## Does the state carry the entity's situation?", "",
           "L_CL against chance at the end of training (the stage's own last train window and validation pass), "
           "and NMI / purity of the gold states (sentence encoder, from the unit itself) against the focal "
           "character's (event type, condition after):", "", *contrast_table(found), "",
           f"Probes (`eric/evaluate/state_probe.py`): fitted on {ev['probe_train_texts']:,} training stories, scored "
           "on the test inputs; the label is the unit's event type (`event`), or its focal character's condition when "
           "the unit begins (`condition_before`) or after it (`condition`). "
           "`predicted`: the state the predictor chooses for the planned (focal) entity from the prefix; `gold`: "
           "the sentence encoder's state of the unit itself; `hidden`: the decoder's last hidden state at the "
           "unit's sentence token, quantized into as many k-means clusters as ERIC has states (the same probe for "
           "every arm); `linear`: a logistic regression on that hidden vector itself; `entity`: the same regression "
           "where the decoder has read the focal character's placeholder (it knows whom the unit is about). Gain = accuracy − majority class. "
           f"The verdict compares ERIC's `predicted` with BART's `hidden` (K states against K clusters) on "
           f"`{PROBE_LABEL}`.", "", oracle_line(), "", *probe_table(found), "",
           why_line(found), "",
           "## Final texts: the whole two-stage system", "",
           writer_line(), "",
           "Each arm's stage-one texts above, with the writer's names merged in (the pipeline's merge, its fallbacks "
           "included), read by the checker after the cast's names are mapped back to placeholders; a name outside "
           "the cast leaves its unit unparsed. Pooled over seeds, bootstrap intervals over test stories:", "",
           *finals_table(found), "",
           "## Case study", "",
           "Each arm's first seed, its final text (the writer's names merged in) read by the checker unit by unit.",
           "", *case_section(found), "",
           "## Not in this study yet", "",
           *missing_arms(found),
           "- A GPU run: none was lent to the sessions that ran the study; training takes its device settings from "
           "params only (`train.deepspeed_config: auto`), and the measurements run on the GPU when there is one.", ""]
    return "\n".join(out)


def summary() -> str:
    """The verdict and the main table, for docs/entityworld.md's generated block."""
    page_link = f"[the study's page]({PAGE.name})"
    return "\n".join([verdict(), "", *final_table(arms()), "", writer_line(), "",
                      f"Learning curves, seeds, paired tests, probes, final texts and a case study: {page_link}.", ""])


def pages() -> dict[Path, str]:
    return {PAGE: page()}


def main() -> None:
    draw()
    PAGE.write_text(page())
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
