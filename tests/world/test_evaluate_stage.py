"""stages/evaluate.py on a tiny EntityWorld project (corpus.kind: world), as DVC runs it
(without Prefect: run.fn): the `world` key holds everything a study aggregates."""

from __future__ import annotations

import json

import evaluate as evaluate_stage
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sample as sample_stage
import yaml

from eric.evaluate.world_checks import CHECK_FIELDS, NAME_FIELDS
from eric.world.corpus import WORLD_STAGE_ONE, stage_one_row
from eric.world.generate import generate_stories
from tests.generate.tiny import one_thread, save, tiny_mentions, tiny_stage_one, tiny_tokenizer  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")
SEED, CAST, EVENTS = 5, [3, 5], 6


@pytest.fixture(scope="module")
def world_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    rows = [stage_one_row(s) for s in generate_stories(SEED, 30, tuple(CAST), EVENTS)]
    splits = {"train": rows[:20], "val": rows[20:24], "test": rows[24:]}
    for split, found in splits.items():
        path = root / "data" / "stage_one" / f"{split}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(found, schema=WORLD_STAGE_ONE), path)
    tokenizer = tiny_tokenizer(rows)
    for variant in ("eric", "bart"):
        save(tiny_stage_one(tokenizer, variant), tokenizer, root / "models" / "stage_one" / variant)
    save(tiny_mentions(tokenizer), tokenizer, root / "models" / "mentions")
    snapshots = root / "models" / "snapshots" / "eric"
    for step in (2, 4):  # what train.snapshot_every leaves
        save(tiny_stage_one(tokenizer, "eric", seed=step), tokenizer, snapshots / f"step-{step:06d}")
    plots = root / "plots" / "train"
    plots.mkdir(parents=True)
    (plots / "eric_val.csv").write_text("step,val_lm_loss,val_contrastive_loss,val_contrastive_chance\n"
                                        "0,9.0,4.0,4.0\n2,8.0,3.0,4.0\n4,7.0,2.0,4.0\n")
    (plots / "eric.csv").write_text("step,contrastive_loss,contrastive_chance\n4,2.5,4.0\n")
    params = {
        "variants": ["eric", "bart"],
        "corpus": {"name": "tiny-world", "kind": "world", "world": {"seed": SEED, "cast": CAST}},
        "model": {"max_entities": 6, "num_states": 16, "state_dim": 8, "max_target_length": 128},
        "preprocess": {"out_dir": str(root / "data"), "max_entities": 6, "max_target_units": EVENTS},
        "train": {"out_dir": str(root / "models" / "stage_one"), "mlflow": False, "max_val_examples": 4,
                  "micro_batch_size": 2, "snapshots_dir": str(root / "models" / "snapshots"),
                  "plots_dir": str(plots), "metrics_dir": str(root / "metrics" / "train")},
        "mentions": {"out_dir": str(root / "models" / "mentions")},
        "sample": {"max_length": 24, "mention_max_length": 16, "batch_size": 3,
                   "out_dir": str(root / "outputs" / "samples")},
        "evaluate": {"mauve": False, "analysis_batch_size": 6, "explorer_units_per_state": 2,
                     "metrics_dir": str(root / "metrics" / "evaluate"),
                     "analysis_dir": str(root / "outputs" / "analysis"),
                     "world": {"mix_stories": 30, "probe_train_texts": 20, "curve_inputs": 3}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    params["evaluate"]["world"]["curve_inputs"] = 0  # bart kept no snapshots: no curve asked of it
    (root / "params_bart.yaml").write_text(yaml.safe_dump(params))
    paths = {"eric": str(root / "params.yaml"), "bart": str(root / "params_bart.yaml")}
    for variant, path in paths.items():
        sample_stage.run.fn(variant, path)
    return root, {variant: evaluate_stage.run.fn(variant, path) for variant, path in paths.items()}


def test_the_world_key_holds_rates_per_story_counts_and_the_event_mix(world_project):
    root, metrics = world_project
    world = metrics["eric"]["world"]
    saved = (root / "metrics" / "evaluate" / "eric.json").read_text()
    assert json.loads(saved) == json.loads(json.dumps(metrics["eric"]))
    assert '"id": ["world-' in saved  # lists of values on one line
    one = world["stage_one"]
    for key in ("parse_rate", "state_violation_rate", "grounding_rate", "grounded_share",
                "grounded_state_violation_rate", "state_violation_rate_at_world_mix", "event_mix_distance"):
        assert key in one
    stories = world["stories"]
    assert len(stories["id"]) == 6 and set(stories["stage_one"]) == set(CHECK_FIELDS)
    assert set(stories["final"]) == {*CHECK_FIELDS, *NAME_FIELDS}
    assert sum(stories["stage_one"]["parsed"]) == one["parsed"]
    assert sum(stories["stage_one"]["grounded"]) == one["grounded"] <= one["parsed"]
    kinds = world["event_kinds"]
    assert sum(kinds["world_mix"].values()) == pytest.approx(1.0)
    assert sum(sum(k["parsed"]) for k in kinds["stage_one"].values()) == one["parsed"]
    assert world["reference"]["violations"] == 0 and world["reference"]["state_violation_rate_at_world_mix"] == 0


def test_coherence_under_every_scoring_with_each_cases_outcome(world_project):
    _, metrics = world_project
    coherence = metrics["eric"]["world"]["coherence"]
    modes = ("predicted", "gold", "random")
    assert set(coherence["accuracy"]) == {f"{s}/{m}" for s in ("lm", "joint", "event") for m in modes}
    cases = len(coherence["cases"]["text"])
    assert cases and all(len(right) == cases for right in coherence["right"].values())
    # the lm rows are the pipeline's coherence (the report's), which leaves the gold states out
    assert coherence["accuracy"]["lm/predicted"] == metrics["eric"]["coherence"]["eric"]["accuracy"]
    assert set(metrics["eric"]["coherence"]) == {"eric", "eric (random states)"}
    assert "coherence" not in metrics["bart"]["world"]  # one-stage: no placeholders to swap


def test_probes_lines_and_the_learning_curve(world_project):
    _, metrics = world_project
    eric, bart = metrics["eric"]["world"], metrics["bart"]["world"]
    labels = ("event", "condition_before", "location_before", "condition")
    probes = ("predicted", "gold", "hidden", "linear", "entity", "predicted_vector", "predicted_state_vector",
              "gold_vector", "identity")
    assert {k for k in eric["probes"] if "/" in k} == {f"{p}/{label}" for p in probes for label in labels}
    for label in labels:  # a regression on the vectors: against the training majority, with an interval
        found = eric["probes"][f"predicted_vector/{label}"]
        assert found["gain"] == pytest.approx(found["accuracy"] - found["majority"], abs=1e-3)
        assert found["gain_low"] <= found["gain"] <= found["gain_high"] and found["units"] > 0
    assert all(0 <= eric["probes"][k]["majority"] <= 1 for k in eric["probes"] if "/" in k)
    assert eric["probes"]["oracle_event"]["units"] == 6 * EVENTS and "predicted_is_gold" in eric["probes"]
    # the identity line reads no model, only the units the model's probes read
    for model in (eric, bart):
        assert model["probes"]["identity/location_before"]["units"] == model["probes"]["linear/location_before"]["units"]
    # a one-stage model without states: its decoder, read on the named stories
    assert {k for k in bart["probes"] if "/" in k} == {f"{p}/{label}" for p in ("hidden", "linear", "identity")
                                                             for label in labels}
    lines = eric["lines"]
    assert lines["batches"] == 2 and lines["val_texts"] == 4
    for which in ("batch", "text", "entity"):
        assert {"anchors", "chance", "identity", "prior", "prior_identity", "oracle", "oracle_identity"} == set(
            lines[which])
        assert 0 < lines[which]["oracle"]["vs_chance"] and lines[which]["prior"]["loss"] is not None
    assert lines["entity"]["identity"]["vs_chance"] == 1.0 and lines["batch"]["identity"]["vs_chance"] < 1
    # the plots hold no entity-candidate columns: a run before them
    assert lines["model"] == {"train": 0.625, "val": 0.5, "entity_train": None, "entity_val": None}
    assert "lines" not in bart
    curve = eric["curve"]
    assert curve["step"] == [2, 4] and curve["val_lm_loss"] == [8.0, 7.0] and curve["val_cl_ratio"] == [0.75, 0.5]
    assert all(len(v) == 2 for v in curve.values()) and "curve" not in bart  # bart: curve_inputs 0


def test_the_lm_loss_with_gold_and_predicted_states_and_without_states(world_project):
    _, metrics = world_project
    eric, bart = metrics["eric"], metrics["bart"]
    assert eric["lm_loss_texts"] == bart["lm_loss_texts"] == 4  # train.max_val_examples
    assert eric["lm_loss_gold_states"] > 0 and eric["lm_loss_predicted_states"] > 0
    assert eric["lm_loss_unsettled_batches"] == 0 and "lm_loss" not in eric
    assert bart["lm_loss"] > 0 and "lm_loss_gold_states" not in bart


def test_a_curve_asked_of_a_training_without_snapshots_is_a_one_line_error(world_project):
    from eric.config import load_params
    from eric.evaluate.errors import EvaluationError

    root, _ = world_project
    params = load_params(root / "params.yaml")  # curve_inputs 3, and bart kept no snapshot
    with pytest.raises(EvaluationError, match=r"snapshots/bart holds no snapshot: train bart with train.snapshot_every"):
        evaluate_stage.world_curve.fn(params, "bart")
