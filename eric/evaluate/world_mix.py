"""State violations at the world's own event mix (direct standardization).

Event kinds differ in how easily they break a state rule: a one-character `travel` rarely
does, a `rescue` often. A model that writes mostly `travel` therefore shows a low raw state
violation rate without tracking anything. The standardized rate weighs each kind's rate
(state violations per parsed unit of that kind) by the kind's share of the world's own
events, renormalized over the kinds the texts contain:

    sum_k w_k * v_k / p_k  /  sum_k w_k        (k: kinds with p_k > 0)

`covered` is that sum of w_k (the world mix the texts reach); `distance` is the total
variation distance between the texts' kind shares and the world's (0.5 sum_k |s_k - w_k|).
"""

from __future__ import annotations

from functools import lru_cache

from eric.world.checker import StoryCheck
from eric.world.world import STATE_RULES


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
    """kind -> per story (in order) its parsed units and their state violations; only the
    kinds the texts contain (the study bootstraps the standardized rate over stories)."""
    kinds = sorted({u.event.kind for c in checks for u in c.units if u.event is not None})
    out = {k: {"parsed": [0] * len(checks), "state_violations": [0] * len(checks)} for k in kinds}
    for i, check in enumerate(checks):
        for unit in check.units:
            if unit.event is not None:
                out[unit.event.kind]["parsed"][i] += 1
                out[unit.event.kind]["state_violations"][i] += sum(r in STATE_RULES for r in unit.violations)
    return out


def standardized(by_kind: dict[str, dict[str, list[int]]], mix: dict[str, float]) -> dict:
    """The standardized rate, the world mix covered and the kind-mix distance (module doc)."""
    parsed = {k: sum(v["parsed"]) for k, v in by_kind.items()}
    broken = {k: sum(v["state_violations"]) for k, v in by_kind.items()}
    seen = [k for k, n in parsed.items() if n and mix.get(k)]
    covered = sum(mix[k] for k in seen)
    rate = sum(mix[k] * broken[k] / parsed[k] for k in seen) / covered if covered else None
    total = sum(parsed.values())
    shares = {k: n / total for k, n in parsed.items()} if total else {}
    distance = 0.5 * sum(abs(shares.get(k, 0.0) - mix.get(k, 0.0)) for k in {*shares, *mix}) if total else None
    return {"state_violation_rate_at_world_mix": rate, "world_mix_covered": covered if total else None,
            "event_mix_distance": distance}
