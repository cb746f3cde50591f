"""Intervals and paired tests for results measured on the same test inputs over seeds.

- `ratio_interval`: a ratio of sums over test stories (e.g. violations per parsed unit),
  with a 95% bootstrap interval that resamples the stories (every seed's copy of a story
  moves with it, so the interval is over inputs, not over seeds);
- `seed_interval`: mean and 95% Student-t interval of one number per seed, kept inside the
  range the quantity can take;
- `paired_ratio_difference`: A minus B of a ratio on the same stories, a paired bootstrap
  interval and the Wilcoxon signed-rank test of the per-story differences;
- `mcnemar`: the exact McNemar test of two models' right/wrong answers on the same cases.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats


def fmt_value(value: float | None, digits: int = 3, pct: bool = False) -> str:
    """A figure for a table: "–" when missing; `pct`: times 100 with one decimal."""
    if value is None:
        return "–"
    return f"{100 * value:.1f}" if pct else f"{value:.{digits}f}"


@dataclass(frozen=True)
class Interval:
    value: float | None
    low: float | None
    high: float | None

    def to_dict(self) -> dict:
        return {k: None if v is None else round(v, 6) for k, v in asdict(self).items()}

    def format(self, digits: int = 3, pct: bool = False) -> str:
        """`value [low, high]` for a table; the value alone where there is no interval."""
        if self.value is None or self.low is None:
            return fmt_value(self.value, digits, pct)
        return f"{fmt_value(self.value, digits, pct)} [{fmt_value(self.low, digits, pct)}, {fmt_value(self.high, digits, pct)}]"


def _per_story(values) -> np.ndarray:
    """One number per story: rows are stories, any further columns (seeds) are summed."""
    array = np.asarray(values, float)
    return array.reshape(len(array), -1).sum(1) if array.ndim > 1 else array


def _ratio(numer: np.ndarray, denom: np.ndarray) -> float | None:
    total = denom.sum()
    return float(numer.sum() / total) if total else None


def ratio_interval(numer, denom, resamples: int = 2000, seed: int = 0) -> Interval:
    """sum(numer) / sum(denom) over stories (rows; columns are seeds, summed), with a 95%
    percentile bootstrap over the rows."""
    numer, denom = _per_story(numer), _per_story(denom)
    value = _ratio(numer, denom)
    if value is None or len(numer) < 2:
        return Interval(value, None, None)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(numer), size=(resamples, len(numer)))
    sums = denom[picks].sum(1)
    ratios = numer[picks].sum(1)[sums > 0] / sums[sums > 0]
    low, high = np.percentile(ratios, [2.5, 97.5])
    return Interval(value, float(low), float(high))


def seed_interval(values, low: float | None = None, high: float | None = None) -> Interval:
    """Mean over seeds and its 95% Student-t interval (None with fewer than two seeds).

    `low`, `high`: the range the quantity cannot leave (a share [0, 1], a rate >= 0). A
    t-interval over a few seeds is symmetric about the mean, so near a bound it gets an end
    the quantity cannot reach (99.7 [99.2, 100.1]); only such an end moves onto the bound.
    Differences between arms take either sign: leave both open."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return Interval(None, None, None)
    mean = float(np.mean(values))
    if len(values) < 2:
        return Interval(mean, None, None)
    half = float(stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(len(values)))
    lo, hi = mean - half, mean + half
    return Interval(mean, lo if low is None else max(lo, low), hi if high is None else min(hi, high))


@dataclass(frozen=True)
class PairedDifference:
    difference: float | None  # ratio(A) - ratio(B) over the common stories
    low: float | None
    high: float | None
    p_value: float | None  # Wilcoxon signed-rank of per-story differences (stories both read)
    stories: int

    def to_dict(self) -> dict:
        return {k: v if v is None or isinstance(v, int) else round(v, 6) for k, v in asdict(self).items()}


def paired_ratio_difference(a_numer, a_denom, b_numer, b_denom, resamples: int = 2000,
                            seed: int = 0) -> PairedDifference:
    """Model A minus model B on the same stories (rows; seed columns summed)."""
    an, ad, bn, bd = map(_per_story, (a_numer, a_denom, b_numer, b_denom))
    a, b = _ratio(an, ad), _ratio(bn, bd)
    if a is None or b is None:
        return PairedDifference(None, None, None, None, 0)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(an), size=(resamples, len(an)))
    ok = (ad[picks].sum(1) > 0) & (bd[picks].sum(1) > 0)
    diffs = (an[picks].sum(1) / np.maximum(ad[picks].sum(1), 1) - bn[picks].sum(1) / np.maximum(bd[picks].sum(1), 1))[ok]
    low, high = np.percentile(diffs, [2.5, 97.5]) if len(diffs) else (None, None)
    both = (ad > 0) & (bd > 0)
    per_story = an[both] / ad[both] - bn[both] / bd[both]
    p = float(stats.wilcoxon(per_story).pvalue) if np.any(per_story != 0) else 1.0
    return PairedDifference(a - b, None if low is None else float(low), None if high is None else float(high),
                            p, int(both.sum()))


@dataclass(frozen=True)
class McNemar:
    a_only: int  # cases A gets right and B wrong
    b_only: int
    cases: int  # paired cases
    p_value: float

    def to_dict(self) -> dict:
        return asdict(self)


def mcnemar(a: dict, b: dict) -> McNemar:
    """Exact McNemar test over the cases both answered (`a`, `b`: case key -> right)."""
    common = sorted(set(a) & set(b))
    a_only = sum(a[k] and not b[k] for k in common)
    b_only = sum(b[k] and not a[k] for k in common)
    discordant = a_only + b_only
    p = float(stats.binomtest(a_only, discordant, 0.5).pvalue) if discordant else 1.0
    return McNemar(a_only, b_only, len(common), p)
