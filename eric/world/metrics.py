"""EntityWorld metrics without a model: checker summaries, NMI and purity.

- `check_texts`: the checker over texts (stage-one, or final with names): units parsed
  (parse rate, a fluency proxy), violations per parsed unit, stories without violations.
- `nmi`, `purity`: agreement of a clustering (learned state ids) with true labels.
"""

from __future__ import annotations

import math
from collections import Counter

from eric.data.schema import SENT_TOKEN
from eric.world.checker import StoryCheck, check_story
from eric.world.world import RULES, STATE_RULES


def summarize(checks: list[StoryCheck]) -> dict:
    units = sum(len(c.units) for c in checks)
    parsed = sum(c.parsed for c in checks)
    violations = sum(c.violations for c in checks)
    by_rule = Counter()
    for c in checks:
        by_rule.update(c.by_rule)
    clean = sum(c.parsed > 0 and c.violations == 0 for c in checks)  # no violation, something read
    valid = sum(len(c.units) > 0 and c.unparsed == 0 and c.violations == 0 for c in checks)
    n = len(checks)
    return {
        "stories": n,
        "units": units,
        "parsed": parsed,
        "parse_rate": parsed / units if units else None,
        "violations": violations,
        "violation_rate": violations / parsed if parsed else None,  # per parsed unit
        # breaking a rule that needs the replayed state (tracking), not only the scene
        "state_violations": sum(by_rule[r] for r in STATE_RULES),
        "state_violation_rate": sum(by_rule[r] for r in STATE_RULES) / parsed if parsed else None,
        "units_with_violation": sum(sum(bool(u.violations) for u in c.units) for c in checks),
        "clean_stories": clean / n if n else None,  # >= 1 unit parsed, no violation
        "valid_stories": valid / n if n else None,  # every unit parsed, no violation
        "by_rule": {rule: by_rule[rule] for rule in RULES if by_rule[rule]},
    }


def text_units(text: str, max_units: int | None = None) -> list[str]:
    """The units of a `<sent>`-separated text, special tokens removed, empty ones kept
    (an empty unit counts as unparsed)."""
    pieces = text.split(SENT_TOKEN)
    pieces = pieces[1:] if not pieces[0].strip() else pieces  # the text starts with <sent>
    units = [p.replace("</s>", "").replace("<s>", "").replace("<pad>", "").strip() for p in pieces]
    return units[:max_units] if max_units else units


def check_texts(scenes: list[str], texts: list[str], names: bool = False, max_units: int | None = None) -> dict:
    """Checker summary over (scene, text) pairs."""
    return summarize([check_story(s, text_units(t or "", max_units), names) for s, t in zip(scenes, texts)])


# -- agreement of clusters with true labels --------------------------------------------
def _entropy(counts) -> float:
    total = sum(counts)
    return -sum(c / total * math.log(c / total) for c in counts if c)


def nmi(clusters: list, labels: list) -> float | None:
    """Normalized mutual information, I(C; L) / mean(H(C), H(L)) (sklearn's default).
    1.0 when both are constant; 0.0 when only one is."""
    if len(clusters) != len(labels):
        raise ValueError("clusters and labels must have the same length")
    if not clusters:
        return None
    n = len(clusters)
    h_c = _entropy(Counter(clusters).values())
    h_l = _entropy(Counter(labels).values())
    if h_c == 0 and h_l == 0:
        return 1.0
    if h_c == 0 or h_l == 0:
        return 0.0
    joint = Counter(zip(clusters, labels))
    pc, pl = Counter(clusters), Counter(labels)
    mi = sum(c / n * math.log(c * n / (pc[x] * pl[y])) for (x, y), c in joint.items())
    return max(0.0, mi / ((h_c + h_l) / 2))


def purity(clusters: list, labels: list) -> float | None:
    """Share of items whose label is the most common one of their cluster."""
    if len(clusters) != len(labels):
        raise ValueError("clusters and labels must have the same length")
    if not clusters:
        return None
    by_cluster: dict = {}
    for c, label in zip(clusters, labels):
        by_cluster.setdefault(c, Counter())[label] += 1
    return sum(max(counts.values()) for counts in by_cluster.values()) / len(clusters)
