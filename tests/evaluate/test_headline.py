"""The headline figures DVC shows as metrics: ~15 per variant, rounded as the report."""

from __future__ import annotations

import json

from eric.evaluate.headline import HEADLINE_NAMES, headline, write_headlines

EVALUATED = {"B-1": 19.6312, "MAUVE": 7.2449, "Len": 214.93, "states_used": 436,
             "coherence": {"eric": {"accuracy": 0.43157}, "eric (random states)": {"accuracy": 0.2}}}


def test_headline_rounds_table_two_and_reads_coherence_states_and_lm_loss():
    out = headline("eric", EVALUATED, {"final_val_loss": 12.55, "final_val_lm_loss": 5.99367})
    assert list(out) == list(HEADLINE_NAMES) and len(out) == 15
    assert out["B-1"] == 19.63 and out["MAUVE"] == 7.24 and out["Len"] == 214.93
    assert out["Coh"] == 43.2  # percent, the model's own states (not the random-state control)
    assert out["States"] == 436 and out["LM-loss"] == 5.994  # the LM loss, comparable across models
    assert out["B-2"] is None  # not scored: null, not a made-up zero


def test_a_variant_without_states_or_training_metrics_gets_nulls():
    out = headline("bart", {"B-1": 17.8, "coherence": {"bart": {"accuracy": float("nan")}}}, None)
    assert out["States"] is None and out["LM-loss"] is None and out["Coh"] is None


def test_write_headlines_writes_one_file_per_variant_and_drops_stale_ones(tmp_path):
    (tmp_path / "gone.json").write_text("{}")
    written = write_headlines(tmp_path, {"eric": EVALUATED, "bart": {"B-1": 17.8}}, {"eric": {"final_val_lm_loss": 6.0}})
    assert sorted(p.name for p in written) == ["bart.json", "eric.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bart.json", "eric.json"]
    assert json.loads((tmp_path / "eric.json").read_text())["LM-loss"] == 6.0
