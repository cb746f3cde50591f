"""tests/pins.py's comparison: what a pin lets through under each tolerance."""

from __future__ import annotations

from tests.pins import FORWARD, TRAINING, _difference


def test_forward_pins_compare_counts_exactly_and_floats_closely():
    assert _difference({"tokens": [5, 7], "loss": 2.0001}, {"tokens": [5, 7], "loss": 2.00012}, "k", FORWARD) is None
    assert _difference({"tokens": [5, 7]}, {"tokens": [5, 8]}, "k", FORWARD) == "k.tokens[1]: 7 != 8"
    assert _difference({"loss": 2.5}, {"loss": 2.51}, "k", FORWARD) == "k.loss: 2.5 != 2.51"


def test_training_pins_let_a_count_move_by_five_percent_of_itself_on_another_cpu():
    assert _difference({"codes_used": 38}, {"codes_used": 37}, "k", TRAINING) is None  # a near-tie resolved otherwise
    assert _difference({"codes_used": 38.0}, {"codes_used": 37.0}, "k", TRAINING) is None  # read back from a CSV
    assert _difference({"codes_used": 38}, {"codes_used": 35}, "k", TRAINING) == "k.codes_used: 38 != 35"
    assert _difference([{"step": 2}], [{"step": 3}], "k", TRAINING) == "k[0].step: 2 != 3"
    assert _difference({"loss": 2.5}, {"loss": 2.6}, "k", TRAINING) is None  # 4% on other kernels
    assert _difference({"variant": "eric"}, {"variant": "bart"}, "k", TRAINING) == "k.variant: 'eric' != 'bart'"


def test_training_pins_let_the_codebooks_assignment_statistics_follow_a_near_tie_and_hold_the_losses():
    assert _difference([{"states_used": 16.0, "usage_perplexity": 5.45}], [{"states_used": 17.0, "usage_perplexity": 6.26}],
                       "k", TRAINING) is None  # one code flipped at step 1 on another CPU
    assert _difference({"val_state_entropy_loss": 0.50}, {"val_state_entropy_loss": 0.47}, "k", TRAINING) is None
    assert _difference({"usage_perplexity": 5.0}, {"usage_perplexity": 7.0}, "k", TRAINING) == "k.usage_perplexity: 5.0 != 7.0"
    assert _difference({"lm_loss": 5.0}, {"lm_loss": 5.5}, "k", TRAINING) == "k.lm_loss: 5.0 != 5.5"  # losses keep 5%
    assert _difference({"states_used": 16}, {"states_used": 17}, "k", FORWARD) == "k.states_used: 16 != 17"



def test_a_pinned_nan_matches_only_nan():
    nan = float("nan")
    assert _difference({"x": nan}, {"x": nan}, "k", FORWARD) is None
    assert _difference({"x": nan}, {"x": 1.5}, "k", FORWARD) == "k.x: nan != 1.5"
    assert _difference({"x": 1.5}, {"x": nan}, "k", FORWARD) is not None
