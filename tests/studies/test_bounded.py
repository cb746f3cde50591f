"""Intervals of shares and rates stop where the quantity does; differences are never cut."""

import pytest

from eric.evaluate.intervals import Interval, seed_interval
from studies.bounded import metric_interval, rate_interval, share_interval


def test_a_share_near_one_stops_at_one_and_keeps_its_mean_and_lower_end():
    values = [0.997, 0.998, 0.995]
    raw, cut = seed_interval(values), share_interval(values)
    assert raw.high > 1.0
    assert cut.high == 1.0
    assert (cut.value, cut.low) == (raw.value, raw.low)
    assert cut.format(1, pct=True) == "99.7 [99.3, 100.0]"


def test_a_rate_near_zero_stops_at_zero_and_has_no_upper_bound():
    values = [0.231, 0.0, 0.02, 0.5]
    raw, cut = seed_interval(values), rate_interval(values)
    assert raw.low < 0
    assert cut.low == 0.0
    assert cut.high == pytest.approx(raw.high)


def test_an_interval_inside_the_range_is_unchanged():
    values = [0.4, 0.5, 0.45]
    assert share_interval(values) == seed_interval(values)


def test_one_seed_and_no_seeds_pass_through():
    assert share_interval([0.9]) == Interval(0.9, None, None)
    assert rate_interval([]) == Interval(None, None, None)


def test_a_difference_takes_no_bounds_and_keeps_either_sign():
    differences = [-0.6, 0.1, -0.3, 0.05]
    open_ended = seed_interval(differences)
    assert open_ended.low < 0 < open_ended.high
    assert seed_interval(differences, None, None) == open_ended


def test_a_bound_moves_only_the_end_outside_it():
    values = [0.2, 0.9, 0.5]
    both = seed_interval(values, 0.0, 1.0)
    assert (both.low, both.high) == (0.0, 1.0)
    assert seed_interval(values, low=0.0).high == seed_interval(values).high


def test_table_two_metrics_stop_at_their_own_range():
    mauve = [2.0, 20.0, 7.0]  # a spread whose t-interval reaches below 0
    assert seed_interval(mauve).low < 0
    assert metric_interval("MAUVE", mauve).low == 0.0
    diverse = [99.9, 99.5, 100.0]
    assert metric_interval("D-4", diverse).high == 100.0
    lengths = [5.0, 300.0, 20.0]
    assert metric_interval("Len", lengths).low == 0.0
    assert metric_interval("Len", lengths).high == pytest.approx(seed_interval(lengths).high)
    slopes = [-0.5, 1.2, 0.1]  # a fitted slope has no range to stop at
    assert metric_interval("Zipf", slopes) == seed_interval(slopes)
