"""Intervals over stories and seeds, and the paired tests, on cases whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from eric.evaluate.intervals import mcnemar, paired_ratio_difference, ratio_interval, seed_interval


def test_a_ratio_of_sums_with_a_bootstrap_interval_over_stories():
    numer, denom = [1, 2, 0, 3], [10, 10, 10, 10]
    found = ratio_interval(numer, denom, resamples=500)
    assert found.value == pytest.approx(6 / 40)
    assert found.low <= found.value <= found.high and found.low >= 0 and found.high <= 0.3
    constant = ratio_interval([2] * 30, [4] * 30)
    assert (constant.low, constant.high) == (pytest.approx(0.5), pytest.approx(0.5))  # nothing varies


def test_seed_columns_are_summed_per_story_before_resampling():
    by_seed = ratio_interval([[1, 0], [2, 2]], [[5, 5], [5, 5]])
    assert by_seed.value == pytest.approx(5 / 20)
    assert ratio_interval([1], [0]).value is None and ratio_interval([1], [2]).low is None  # nothing to resample


def test_seed_interval_is_a_student_t_interval():
    found = seed_interval([1.0, 2.0, 3.0])
    half = 4.302653 * 1.0 / np.sqrt(3)  # t(0.975, 2) x sd / sqrt(n)
    assert found.value == 2.0 and found.low == pytest.approx(2 - half) and found.high == pytest.approx(2 + half)
    assert seed_interval([0.4]).low is None and seed_interval([None, float("nan")]).value is None


def test_a_paired_difference_finds_a_consistent_gap_and_not_a_null_one():
    rng = np.random.default_rng(0)
    denom = np.full(60, 10)
    worse = rng.integers(3, 6, size=60)
    better = worse - rng.integers(1, 3, size=60)  # every story: fewer violations
    found = paired_ratio_difference(better, denom, worse, denom, resamples=500)
    assert found.difference < 0 and found.high < 0 and found.p_value < 1e-6 and found.stories == 60
    same = paired_ratio_difference(worse, denom, worse, denom, resamples=200)
    assert same.difference == 0 and same.p_value == 1.0


def test_mcnemar_counts_discordant_cases_and_gives_the_exact_p_value():
    a = {("t", i): i < 8 for i in range(10)}  # right on 8 of 10
    b = {("t", i): i < 2 for i in range(10)}  # right on 2; all of b's right cases a has right too
    found = mcnemar(a, b)
    assert (found.a_only, found.b_only, found.cases) == (6, 0, 10)
    assert found.p_value == pytest.approx(2 * 0.5 ** 6)  # two-sided exact binomial
    assert mcnemar(a, a).p_value == 1.0 and mcnemar(a, {("u", 0): True}).cases == 0
