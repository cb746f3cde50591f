"""State violations at the world's own event mix (direct standardization).

Event kinds differ in how easily they break a state rule: a one-character `travel` rarely
does, a `rescue` often. A model that writes mostly `travel` therefore shows a low raw state
violation rate without tracking anything. The standardized rate weighs each kind's rate
(state violations per grounded unit of that kind) by the kind's share of the world's own
events, renormalized over the kinds the texts contain. Only grounded units count
(world_checks.py `is_grounded`): a unit that names someone outside the scene, or one
character twice, escapes state rules, so per parsed unit writing such units would lower the
rate too:

    sum_k w_k * v_k / g_k  /  sum_k w_k        (g_k: grounded units of kind k; k: g_k > 0)

`covered` is that sum of w_k (the world mix the texts reach); `distance` is the total
variation distance between the kind shares of the texts' grounded units and the world's
(0.5 sum_k |s_k - w_k|).
"""

from __future__ import annotations

from functools import lru_cache

from eric.evaluate.world_checks import is_grounded, state_violations
from eric.world.checker import StoryCheck


@lru_cache(maxsize=4)
def world_mix(seed: int, stories: int, cast: tuple[int, int] = (3, 8), events: int = 15) -> dict[str, float]:
    """The world's event-kind shares, from `stories` stories of its generator (the corpus's
    seed and cast: a corpus is the first stories of any larger one)."""
    from collections import Counter

    from eric.world.generate import generate_stories

    counts = Counter(e.kind for s in generate_stories(seed, stories, tuple(cast), events) for e in s.events)
    total = sum(counts.values())
    return {kind: counts[kind] / total for kind in sorted(counts)}


def kind_columns(checks: list[StoryCheck]) -> dict[str, dict[str, list[int]]]:
    """kind -> per story (in order) its grounded units and their state violations; only the
    kinds the texts' grounded units contain (the study bootstraps the standardized rate over
    stories)."""
    grounded = [[u for u in check.units if is_grounded(u)] for check in checks]
    kinds = sorted({u.event.kind for units in grounded for u in units})
    out = {k: {"grounded": [0] * len(checks), "state_violations": [0] * len(checks)} for k in kinds}
    for i, units in enumerate(grounded):
        for unit in units:
            out[unit.event.kind]["grounded"][i] += 1
            out[unit.event.kind]["state_violations"][i] += state_violations(unit)
    return out


def standardized(by_kind: dict[str, dict[str, list[int]]], mix: dict[str, float]) -> dict:
    """The standardized rate, the world mix covered and the kind-mix distance (module doc)."""
    grounded = {k: sum(v["grounded"]) for k, v in by_kind.items()}
    broken = {k: sum(v["state_violations"]) for k, v in by_kind.items()}
    seen = [k for k, n in grounded.items() if n and mix.get(k)]
    covered = sum(mix[k] for k in seen)
    rate = sum(mix[k] * broken[k] / grounded[k] for k in seen) / covered if covered else None
    total = sum(grounded.values())
    shares = {k: n / total for k, n in grounded.items()} if total else {}
    distance = 0.5 * sum(abs(shares.get(k, 0.0) - mix.get(k, 0.0)) for k in {*shares, *mix}) if total else None
    return {"state_violation_rate_at_world_mix": rate, "world_mix_covered": covered if total else None,
            "event_mix_distance": distance}
