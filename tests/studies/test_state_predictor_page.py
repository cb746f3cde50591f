"""The state-predictor page's tables: means over a grid's kept seeds with a Student-t interval,
and the verdict rule (the entity-candidate interval below chance, and below the blind control
paired by seed)."""

from __future__ import annotations

import json

import pytest
import yaml

from studies import state_predictor_page as page
from studies.spec import RUN_FILE, load_study


def _keep(root, name: str, train: dict, evaluate: dict) -> None:
    folder = root / "outputs" / name
    (folder / "metrics" / "train").mkdir(parents=True)
    (folder / "metrics" / "evaluate").mkdir(parents=True)
    (folder / "metrics" / "train" / "eric.json").write_text(json.dumps(train))
    (folder / "metrics" / "evaluate" / "eric.json").write_text(json.dumps(evaluate))
    (folder / RUN_FILE).write_text("{}")


def _train(own: float, entity: float) -> dict:
    return {"final_val_contrastive_loss": own * 5.0, "final_val_contrastive_chance": 5.0,
            "final_val_contrastive_entity_loss": entity * 1.0, "final_val_contrastive_entity_chance": 1.0}


def _evaluate(gain: float, predicted: float, random: float) -> dict:
    lines = {which: {"chance": 1.0, "identity": {"vs_chance": 1.0 if which == "entity" else 0.6},
                     "prior": {"vs_chance": 0.95}, "prior_identity": {"vs_chance": 0.6},
                     "oracle": {"vs_chance": 0.8}, "oracle_identity": {"vs_chance": 0.7}}
             for which in ("batch", "text", "entity")}
    probes = {f"{p}/{label}": {"gain": gain, "majority": 0.25} for p in page.PROBES for label in page.LABELS}
    probes["oracle_event"] = {"accuracy": 0.32, "majority": 0.27}
    coherence = {"accuracy": {"lm/predicted": predicted, "lm/gold": 0.60, "lm/random": random}}
    return {"lm_loss_gold_states": 1.5, "lm_loss_predicted_states": 1.6,
            "world": {"lines": lines, "probes": probes, "coherence": coherence, "stage_one": {"parse_rate": 0.5}}}


@pytest.fixture
def spec(tmp_path):
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {"world": {
        "seeds": [1, 2, 3], "arms": {"good": {"variants": ["eric"]}, "flat": {"variants": ["eric"]},
                                     "prior_only": {"variants": ["eric"]}, "blind": {"variants": ["eric"]}}}}}))
    for seed, noise in zip((1, 2, 3), (-0.01, 0.0, 0.01)):
        _keep(tmp_path, f"world-good-seed{seed}", _train(0.6 + noise, 0.85 + noise), _evaluate(0.05 + noise, 0.55, 0.50))
        _keep(tmp_path, f"world-flat-seed{seed}", _train(0.6, 1.0 + 3 * noise), _evaluate(noise, 0.49 + seed / 100, 0.50))
        # below chance at every seed, but no lower than the control that reads nothing of the prefix
        _keep(tmp_path, f"world-prior_only-seed{seed}", _train(0.6, 0.93 + 2 * noise), _evaluate(0.0, 0.5, 0.5))
        _keep(tmp_path, f"world-blind-seed{seed}", _train(0.6, 0.93 - noise), _evaluate(0.0, 0.5, 0.5))
    return load_study(tmp_path)


def _line(table: str, arm: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {arm} "))


def test_the_rule_says_yes_only_below_chance_and_below_the_blind_control(spec):
    table = page.lcl_table(spec=spec)
    good = _line(table, "good")
    assert good.endswith("| yes |") and "0.850 [0.825, 0.875]" in good  # t(2) interval of 0.84, 0.85, 0.86
    assert "| -0.080 [-0.130, -0.030] |" in good  # paired by seed: -0.10, -0.08, -0.06
    assert _line(table, "flat").endswith("| no |")
    prior_only = _line(table, "prior_only")
    assert "| 0.930 [0.880, 0.980] | 0.000 [-0.075, 0.075] | no |" in prior_only and prior_only.endswith("| no |")  # below chance, not the control
    assert _line(table, "blind").endswith("| – | control |")


def test_lines_probes_coherence_and_lm_loss_render_the_seed_means(spec):
    lines = page.lines_table(spec=spec)
    assert ("| the entity's later units | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] | 0.950 [0.950, 0.950] "
            "| 0.600 [0.600, 0.600] | 0.800 [0.800, 0.800] |") in lines
    probes = page.probes_table(spec=spec)
    assert "| good | next event kind | 0.250 [0.250, 0.250] | 0.050 [0.025, 0.075]" in probes
    assert page.oracle_probe_line(spec=spec).endswith("from the prefix gains 0.050.")
    coherence = page.coherence_table(spec=spec)
    assert "| good | 55.0 [55.0, 55.0] | 60.0 [60.0, 60.0] | 50.0 [50.0, 50.0] | 5.0 [5.0, 5.0] |" in coherence
    assert "| flat | 51.0 [48.5, 53.5] |" in coherence
    lm = page.lm_table("world", spec=spec)
    assert "| good | 3 | 1.500 [1.500, 1.500] | 1.600 [1.600, 1.600] |" in lm and lm.endswith("| 50.0 [50.0, 50.0] |")


def test_a_grid_with_no_kept_run_says_so(tmp_path):
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {"world": {
        "seeds": [1], "arms": {"a": {"variants": ["eric"]}}}}}))
    assert page.lcl_table(spec=load_study(tmp_path)) == "_No configuration of this grid has run yet._"


def test_the_targets_are_decided_over_seeds(spec):
    table = page.targets_table(spec=spec)
    good = next(line for line in table.splitlines() if line.startswith("| good"))
    flat = next(line for line in table.splitlines() if line.startswith("| flat"))
    assert good == ("| good | 3 | yes: 0.850 [0.825, 0.875] | yes: -0.080 [-0.130, -0.030] | yes: 0.050 [0.025, 0.075] "
                    "| yes: 0.050 [0.050, 0.050] |")
    assert "| no: 1.000 [" in flat and flat.count("| no:") == 4  # 0.51 - 0.50 over seeds: the interval spans 0
    assert "| blind " not in table  # the control is not held to the targets


def test_a_run_whose_decoder_read_the_gold_state_has_no_decoder_probe(tmp_path):
    """Runs before the probes read a pass with predicted states (they have no location probe)."""
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {"world": {
        "seeds": [1], "arms": {"old": {"variants": ["eric"]}, "new": {"variants": ["eric"]},
                                  "no_identity": {"variants": ["eric"]}}}}}))
    old = _evaluate(0.1, 0.5, 0.5)
    old["world"]["probes"] = {k: v for k, v in old["world"]["probes"].items() if "location_before" not in k}
    _keep(tmp_path, "world-old-seed1", _train(0.6, 0.9), old)
    _keep(tmp_path, "world-new-seed1", _train(0.6, 0.9), _evaluate(0.1, 0.5, 0.5))
    before_identity = _evaluate(0.1, 0.5, 0.5)  # a run before the identity line
    before_identity["world"]["probes"] = {k: v for k, v in before_identity["world"]["probes"].items()
                                          if not k.startswith("identity/")}
    _keep(tmp_path, "world-no_identity-seed1", _train(0.6, 0.9), before_identity)
    table = page.probes_table(spec=load_study(tmp_path))
    # ê_n, its state, decoder, gold e_n, identity
    assert _line(table, "old").endswith("| 0.100 | 0.100 | – | 0.100 | 0.100 |")
    assert _line(table, "new").endswith("| 0.100 | 0.100 | 0.100 | 0.100 | 0.100 |")
    assert _line(table, "no_identity").endswith("| 0.100 | 0.100 | 0.100 | 0.100 | – |")
