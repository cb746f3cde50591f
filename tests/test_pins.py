"""tests/pins.py's comparison: what a pin lets through under each tolerance."""

from __future__ import annotations

from tests.pins import FORWARD, TRAINING, _difference


def test_forward_pins_compare_counts_exactly_and_floats_closely():
    assert _difference({"tokens": [5, 7], "loss": 2.0001}, {"tokens": [5, 7], "loss": 2.00012}, "k", FORWARD) is None
    assert _difference({"tokens": [5, 7]}, {"tokens": [5, 8]}, "k", FORWARD) == "k.tokens[1]: 7 != 8"
    assert _difference({"loss": 2.5}, {"loss": 2.51}, "k", FORWARD) == "k.loss: 2.5 != 2.51"


def test_training_pins_let_a_count_move_by_five_percent_of_itself_on_another_cpu():
    assert _difference({"states_used": 38}, {"states_used": 37}, "k", TRAINING) is None  # a near-tie resolved otherwise
    assert _difference({"states_used": 38.0}, {"states_used": 37.0}, "k", TRAINING) is None  # read back from a CSV
    assert _difference({"states_used": 38}, {"states_used": 35}, "k", TRAINING) == "k.states_used: 38 != 35"
    assert _difference([{"step": 2}], [{"step": 3}], "k", TRAINING) == "k[0].step: 2 != 3"
    assert _difference({"loss": 2.5}, {"loss": 2.6}, "k", TRAINING) is None  # 4% on other kernels
    assert _difference({"variant": "eric"}, {"variant": "bart"}, "k", TRAINING) == "k.variant: 'eric' != 'bart'"
