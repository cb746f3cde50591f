"""Seed intervals of quantities that cannot leave a range: shares in [0, 1], rates >= 0,
Table 2's percentages in [0, 100].

A Student-t interval over a few seeds is symmetric about the mean, so a share near 100% or a
rate near zero gets an end it cannot reach (99.7 [99.2, 100.1]). The pages show the part of the
interval the quantity can take. Only ends outside the range move, and differences between arms
(the verdicts' intervals) are never clipped: they may be of either sign.
"""

from __future__ import annotations

from eric.evaluate.intervals import Interval, seed_interval


def within(interval: Interval, low: float | None = None, high: float | None = None) -> Interval:
    """`interval` with its ends moved into [low, high] (None: no bound on that side)."""
    if interval.low is None:
        return interval
    lo = interval.low if low is None else max(interval.low, low)
    hi = interval.high if high is None else min(interval.high, high)
    return Interval(interval.value, lo, hi)


def share_interval(values) -> Interval:
    """Mean over seeds of a share (parse rate, grounded share, a distance in [0, 1])."""
    return within(seed_interval(values), 0.0, 1.0)


def rate_interval(values) -> Interval:
    """Mean over seeds of a count per unit (violations per grounded unit)."""
    return within(seed_interval(values), 0.0)


def metric_interval(metric: str, values) -> Interval:
    """Mean over seeds of one of Table 2's metrics: a percentage in [0, 100], Len (tokens) >= 0,
    Zipf (a fitted slope) unbounded."""
    bounds = {"Zipf": (None, None), "Len": (0.0, None)}.get(metric, (0.0, 100.0))
    return within(seed_interval(values), *bounds)
