"""Generated blocks from outputs that retired runner scripts kept (studies/<name>/retired/).

The EntityWorld study ran through a script of its own before it became study.yaml
configurations; its outputs stay, read here in their own layout, until
`python flows/study.py studies/entityworld` replaces them. No number on their pages is typed.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from eric.config import PROJECT_ROOT
from eric.evaluate.intervals import fmt_value as fmt
from eric.evaluate.intervals import ratio_interval, seed_interval
from eric.evaluate.report import markdown_table
from eric.evaluate.world_lines import read_plot
from studies.bounded import rate_interval, share_interval
from studies.entityworld_page import NAMES, pairs_table

WORLD = PROJECT_ROOT / "studies" / "entityworld" / "retired"
ARMS = NAMES
MAX_UNITS = 15  # the checker read the first 15 units (evaluate.max_units)
NONE = "–"


# --- reading ---------------------------------------------------------------------------------
def _json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def runs(arm: str) -> dict[int, Path]:
    """seed -> folder of an EntityWorld arm's measured seeds."""
    folders = sorted((WORLD / arm).glob("seed-*"), key=lambda f: int(f.name.split("-")[1]))
    return {int(f.name.split("-")[1]): f for f in folders if (f / "final.json").is_file()}


def arms() -> list[str]:
    return [arm for arm in ARMS if runs(arm)]


def counts(arm: str, field: str, texts: str = "stories.csv") -> np.ndarray:
    """stories x seeds of one per-story checker count, as the retired runner wrote it."""
    return np.array([[float(r[field]) for r in read_plot(f / texts)]
                     for f in runs(arm).values() if (f / texts).is_file()]).T


@cache
def grounded(arm: str) -> dict[str, np.ndarray]:
    """seeds x stories of the checker's counts (eric/evaluate/world_checks.py: parsed,
    grounded, grounded_state_violations, ...), rechecked from the kept samples with today's
    checker: the retired runner's own files predate grounded units."""
    from eric.evaluate.world_checks import columns, story_checks, story_counts

    found = []
    for folder in runs(arm).values():
        with gzip.open(folder / "samples.jsonl.gz", "rt") as handle:
            rows = [json.loads(line) for line in handle]
        checks = story_checks([r["input"] for r in rows], [r["stage_one"] for r in rows], max_units=MAX_UNITS)
        found.append(columns([story_counts(c) for c in checks]))
    return {field: np.array([f[field] for f in found], dtype=float) for field in found[0]}


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


# --- formatting ------------------------------------------------------------------------------
def table(header: list[str], rows: list[list[str]]) -> str:
    return markdown_table(header, rows) + "\n" if rows else "_No retired outputs._\n"


# --- EntityWorld -------------------------------------------------------------------------------
def world_arms() -> str:
    """Per arm, pooled over seeds (story-bootstrap intervals), and coherence over seeds."""
    rows = []
    for arm in arms():
        rate = lambda field, per="parsed": ratio_interval(counts(arm, field), counts(arm, per))
        finals = [_json(f / "final.json") for f in runs(arm).values()]
        coherence = [share_interval([f["coherence"].get(f"{s}/predicted", f["coherence"].get(f"{s}/none"))
                                    for f in finals]) for s in ("lm", "joint", "event")]
        random = share_interval([f["coherence"].get("lm/random") for f in finals])
        rows.append([ARMS[arm], str(len(finals)), rate("parsed", "units").format(pct=True),
                     rate("state_violations").format(), rate("grounding").format(),
                     *(c.format(pct=True) for c in coherence), random.format(pct=True)])
    return table(["arm", "seeds", "parse rate %", "state viol. / parsed", "grounding viol. / parsed",
                  "coherence lm %", "coherence joint %", "coherence event %", "coherence lm, random states %"], rows)


def per_seed(arm: str) -> dict[str, list[float | None]]:
    total = {field: counts.sum(1) for field, counts in grounded(arm).items()}
    share = lambda n, d: [float(a / b) if b else None for a, b in zip(total[n], total[d])]
    return {"parse": share("parsed", "units"), "grounded": share("grounded", "parsed"),
            "rate": share("grounded_state_violations", "grounded")}


def world_seeds() -> str:
    """Per seed: parse rate, grounded share of parsed units, state violations per grounded unit."""
    rows = []
    for arm in arms():
        found = per_seed(arm)
        cells = [" / ".join([fmt(p, pct=True), fmt(g, pct=True), fmt(r)]) for p, g, r in zip(*found.values())]
        rows.append([ARMS[arm], "; ".join(cells), share_interval(found["grounded"]).format(pct=True),
                     rate_interval(found["rate"]).format()])
    return table(["arm", "per seed: parse % / grounded % / state viol. per grounded unit",
                  "grounded % (mean [t-interval])", "state viol. / grounded unit (mean [t-interval])"], rows)


# the pairs the retired runner's page compared, named rather than taken by position from the
# declarative study's PAIRS, which grows as arms land
RETIRED_PAIRS = (("eric", "bart"), ("eric", "eric_no_state"), ("eric_no_state", "bart"), ("eric", "eric_paper"))


def world_pairs() -> str:
    """A - B per seed (paired by seed) of state violations per grounded unit, t-interval over seeds."""
    return pairs_table({arm: dict(zip(runs(arm), per_seed(arm)["rate"])) for arm in arms()}, RETIRED_PAIRS)


LABELS = ("event", "condition_before", "condition")


def world_probes() -> str:
    """Per arm and state: each label's gain over the majority class, mean over seeds [t-interval]."""
    rows = []
    for arm in arms():
        probes = [_json(f / "probes.json") or {} for f in runs(arm).values()]
        for what in sorted({key.split("/")[0] for key in probes[0]}):
            gains = [seed_interval([p.get(f"{what}/{label}", {}).get("gain") for p in probes]) for label in LABELS]
            rows.append([ARMS[arm], what, *(g.format() for g in gains)])
    majority = [_mean([p[f"predicted/{label}"]["majority"] for arm in arms() for f in runs(arm).values()
                       if f"predicted/{label}" in (p := _json(f / "probes.json") or {})]) for label in LABELS]
    rows.append(["majority class (accuracy)", NONE, *(fmt(m) for m in majority)])
    oracle = _json(WORLD / "oracle.json")
    if oracle:
        rows.append(["the generator's own distribution (oracle)", NONE,
                     fmt(oracle["accuracy"] - oracle["majority"]), NONE, NONE])
    return table(["arm", "state", *(f"gain: {label}" for label in LABELS)], rows)


def world_curve() -> str:
    """Mean over seeds at each snapshot: parse rate % / grounding viol. / state viol. per parsed unit."""
    found = {arm: [read_plot(f / "curve.csv") for f in runs(arm).values() if (f / "curve.csv").is_file()] for arm in arms()}
    steps = sorted({int(r["step"]) for curves in found.values() for curve in curves for r in curve})
    rows = []
    for step in steps:
        cells = []
        for curves in found.values():
            at = [r for curve in curves for r in curve if int(r["step"]) == step]
            mean = lambda k: _mean([float(r[k]) for r in at if r[k] != ""])
            cells.append(f"{fmt(mean('parse_rate'), pct=True)} / {fmt(mean('grounding_rate'), 2)} / "
                         f"{fmt(mean('state_violation_rate'), 2)}")
        rows.append([str(step), *cells])
    return table(["step", *(ARMS[a] for a in found)], rows)


def world_finals() -> str:
    """The two-stage texts: the shared mention writer's names merged into each arm's texts."""
    rows = []
    gold = WORLD / "writer" / "gold.csv"
    if gold.is_file():
        g = read_plot(gold)
        total = lambda k: sum(int(r[k]) for r in g)
        rows.append(["reference texts (the writer alone)", "1", fmt(total("mapped") / max(total("named"), 1), pct=True),
                     fmt(total("faithful") / max(total("named"), 1), pct=True),
                     fmt(total("parsed") / max(total("units"), 1), pct=True)])
    for arm in arms():
        rate = lambda field, per: ratio_interval(counts(arm, field, "finals.csv"), counts(arm, per, "finals.csv"))
        rows.append([ARMS[arm], str(counts(arm, "units", "finals.csv").shape[1]),
                     rate("mapped", "named").format(pct=True), rate("faithful", "named").format(pct=True),
                     rate("parsed", "units").format(pct=True)])
    return table(["texts", "seeds", "named units mapping to the cast %", "to the same characters %",
                  "final parse rate %"], rows)


BLOCKS: dict[str, Callable[[], str]] = {
    "entityworld-retired-arms": world_arms,
    "entityworld-retired-seeds": world_seeds,
    "entityworld-retired-pairs": world_pairs,
    "entityworld-retired-probes": world_probes,
    "entityworld-retired-curve": world_curve,
    "entityworld-retired-finals": world_finals,
}
