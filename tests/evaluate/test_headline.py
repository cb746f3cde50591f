"""The headline figures DVC shows as metrics, rounded as the report."""

from __future__ import annotations

import json

from eric.evaluate.headline import HEADLINE_NAMES, headline, write_headlines

EVALUATED = {"B-1": 19.6312, "MAUVE": 7.2449, "Len": 214.93, "states_used": 436, "mauve_min": 3.1234,
             "mauve_max": 12.5, "mauve_seed": 42, "mauve_seeds": 10,
             "coherence": {"eric": {"accuracy": 0.43157}, "eric (random states)": {"accuracy": 0.2}}}
TRAINED = {"steps": 200, "final_val_loss": 12.55, "final_val_lm_loss": 5.99367, "state_space_recipe": "decoupled"}


def test_headline_rounds_table_two_and_reads_equal_length_b1_coherence_states_and_lm_loss():
    out = headline("eric", EVALUATED, TRAINED, matched=25.1789)
    assert list(out) == list(HEADLINE_NAMES)
    assert out["B-1"] == 19.63 and out["MAUVE"] == 7.24 and out["Len"] == 214.93
    assert out["B-1-eq"] == 25.18
    assert all(" " not in name for name in out)  # `dvc metrics show` splits its header on spaces
    assert out["Coh"] == 43.2  # percent, the model's own states (not the random-state control)
    assert out["States"] == 436 and out["LM-loss"] == 5.994  # teacher-forced, with the gold states
    assert out["B-2"] is None  # not scored: null, not a made-up zero


def test_a_variant_without_states_or_training_metrics_gets_nulls():
    out = headline("bart", {"B-1": 17.8, "coherence": {"bart": {"accuracy": float("nan")}}}, None)
    assert out["States"] is None and out["LM-loss"] is None and out["Coh"] is None
    assert out["B-1-eq"] is None


def test_write_headlines_writes_one_file_per_variant_and_drops_stale_ones(tmp_path):
    (tmp_path / "gone.json").write_text("{}")
    written = write_headlines(tmp_path, {"eric": EVALUATED, "bart": {"B-1": 17.8}}, {"eric": {"final_val_lm_loss": 6.0}},
                              {"eric": 25.0, "bart": 26.0})
    assert sorted(p.name for p in written) == ["bart.json", "eric.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bart.json", "eric.json"]
    assert json.loads((tmp_path / "eric.json").read_text())["LM-loss"] == 6.0
    assert json.loads((tmp_path / "bart.json").read_text())["B-1-eq"] == 26.0
