"""flows/review.py: one MLflow parent run per execution, one child per variant."""

from __future__ import annotations

import math

import pytest
from mlflow import MlflowClient
from review import (
    close_pipeline_run,
    flatten,
    numeric,
    open_pipeline_run,
    split_by_variant,
    tracking_uri,
    variant_names,
)

METRICS = {
    "data/processed/stats.json": {"examples_out": 40, "corpus": "wikiplots-mini", "train": {"examples": 35}},
    "metrics/eric/eval.json": {"bleu": 2.5, "distinct": {"d4": 0.9}},
    "metrics/eval/no_states.json": {"bleu": 2.1, "ok": True, "bad": math.nan},
}


def test_flatten_and_numeric_keep_plottable_numbers_only():
    flat = flatten({"a": {"b": 1, "c": {"d": "x"}}, "e": [1]})
    assert flat == {"a.b": 1, "a.c.d": "x", "e": [1]}
    assert numeric({"i": 2, "f": 0.5, "t": True, "s": "x", "n": math.inf}) == {"i": 2.0, "f": 0.5}


def test_variant_names_from_params_list_mapping_or_choice():
    assert variant_names({"variants": ["eric", "no_states"]}) == ["eric", "no_states"]
    assert variant_names({"variants": {"eric": {}, "bart": {}}}) == ["eric", "bart"]
    assert variant_names({"variants": ["eric", "bart"]}, ["bart"]) == ["bart"]
    assert variant_names({"seed": 1}) == []


def test_metric_files_go_to_their_variant_by_folder_or_file_name():
    shared, per_variant = split_by_variant(METRICS, ["eric", "no_states", "bart"])
    assert shared == {"stats.examples_out": 40.0, "stats.train.examples": 35.0}
    assert per_variant == {
        "eric": {"eval.bleu": 2.5, "eval.distinct.d4": 0.9},
        "no_states": {"eval.bleu": 2.1},
        "bart": {},
    }


def test_tracking_uri_defaults_to_the_project_sqlite(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(tmp_path) == f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking_uri(tmp_path) == "http://127.0.0.1:5000"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store for the module: creating one costs seconds of migrations."""
    path = tmp_path_factory.mktemp("mlflow")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(path)  # the SQLite store keeps artifacts under ./mlruns
        yield f"sqlite:///{path}/mlflow.db"


def test_one_parent_run_and_one_child_per_variant(store):
    uri = store
    exp_id, run_id = open_pipeline_run(uri, "eric", "pipeline test", {"mlflow.source.git.commit": "abc123"})
    params = {"seed": 42, "corpus": {"path": "x.zip"}, "variants": ["eric", "no_states"]}
    report = {"command": "dvc repro"}
    children = close_pipeline_run(uri, exp_id, run_id, params, METRICS, ["eric", "no_states"], report, ok=True)

    client = MlflowClient(uri)
    parent = client.get_run(run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["eric.role"] == "pipeline"
    assert parent.data.params["corpus.path"] == "x.zip"
    assert parent.data.params["variants"] == "['eric', 'no_states']"
    assert parent.data.metrics == {"stats.examples_out": 40.0, "stats.train.examples": 35.0}
    assert [a.path for a in client.list_artifacts(run_id)] == ["pipeline_report.json"]

    assert set(children) == {"eric", "no_states"}
    eric = client.get_run(children["eric"])
    assert eric.info.run_name == "eric"
    assert eric.data.tags["mlflow.parentRunId"] == run_id
    assert eric.data.tags["eric.variant"] == "eric"
    assert eric.data.tags["mlflow.source.git.commit"] == "abc123"
    assert eric.data.metrics == {"eval.bleu": 2.5, "eval.distinct.d4": 0.9}
    found = client.search_runs([exp_id], "tags.`eric.role` = 'variant'")
    assert {r.info.run_name for r in found} == {"eric", "no_states"}


def test_a_failed_execution_is_recorded_as_failed(store):
    uri = store
    exp_id, run_id = open_pipeline_run(uri, "eric-failing", "pipeline failing", {})
    close_pipeline_run(uri, exp_id, run_id, {"seed": 1}, {}, ["eric"], {}, ok=False)
    client = MlflowClient(uri)
    assert client.get_run(run_id).info.status == "FAILED"
    (child,) = client.search_runs([exp_id], "tags.`eric.role` = 'variant'")
    assert child.info.status == "FAILED" and child.data.metrics == {}


def test_compare_prints_one_row_per_variant_of_the_latest_execution(store):
    from compare import CompareError, variant_table

    uri = store
    for bleu in (1.0, 3.0):  # two executions; the latest wins
        exp_id, run_id = open_pipeline_run(uri, "eric-compare", "pipeline", {})
        metrics = {"metrics/eric/eval.json": {"bleu": bleu}, "metrics/bart/eval.json": {"bleu": bleu / 2}}
        close_pipeline_run(uri, exp_id, run_id, {}, metrics, ["eric", "bart"], {}, ok=True)
    table = variant_table(uri, "eric-compare")
    assert table["eval.bleu"].to_dict() == {"bart": 1.5, "eric": 3.0}
    assert len(variant_table(uri, "eric-compare", every=True)) == 4
    with pytest.raises(CompareError, match="no MLflow experiment 'nope'"):
        variant_table(uri, "nope")


def test_metric_names_are_made_safe_for_mlflow():
    # the evaluate stage names the random-state coherence "eric (random states)"
    from review import numeric

    safe = numeric({"evaluate.coherence.eric (random states).cases": 3, "train.val-loss": 1.5, "text": "x"})
    assert safe == {"evaluate.coherence.eric _random states_.cases": 3.0, "train.val-loss": 1.5}
