"""Seed intervals of quantities that cannot leave a range: shares in [0, 1], rates >= 0,
Table 2's percentages in [0, 100] (eric/evaluate/intervals.py `seed_interval` moves an end
outside the range onto it). Differences between arms (the verdicts' intervals) take no
bounds: they may be of either sign.
"""

from __future__ import annotations

from eric.evaluate.intervals import Interval, seed_interval


def share_interval(values) -> Interval:
    """Mean over seeds of a share (parse rate, grounded share, a distance in [0, 1])."""
    return seed_interval(values, 0.0, 1.0)


def rate_interval(values) -> Interval:
    """Mean over seeds of a count per unit (violations per grounded unit)."""
    return seed_interval(values, 0.0)


def metric_interval(metric: str, values) -> Interval:
    """Mean over seeds of one of Table 2's metrics: a percentage in [0, 100], Len (tokens) >= 0,
    Zipf (a fitted slope) unbounded."""
    bounds = {"Zipf": (None, None), "Len": (0.0, None)}.get(metric, (0.0, 100.0))
    return seed_interval(values, *bounds)
