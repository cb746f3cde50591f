"""eric/review.py: one MLflow parent run per execution, one child per variant."""

from __future__ import annotations

import math

import pytest
from mlflow import MlflowClient
from eric.review import (
    aligned,
    close_pipeline_run,
    flatten,
    numeric,
    open_pipeline_run,
    split_by_variant,
    variant_names,
    variant_params,
)
from eric.tracking import tracking_uri

METRICS = {
    "data/processed/stats.json": {"examples_out": 40, "corpus": "wikiplots-mini", "train": {"examples": 35}},
    "metrics/eric/eval.json": {"bleu": 2.5, "distinct": {"d4": 0.9}},
    "metrics/eval/no_states.json": {"bleu": 2.1, "ok": True, "bad": math.nan},
}
PARAMS = {
    "seed": 42,
    "corpus": {"name": "c", "kind": "wikiplots", "path": "x.zip"},
    "model": {"size": "tiny", "num_states": 16, "state_space": {"recipe": "paper"},
              "variants": {"eric": {"state": True, "entity": True}, "no_states": {"state": False, "entity": True}}},
    "train": {"max_steps": 2, "out_dir": "models/stage_one"},
    "variants": ["eric", "no_states"],
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


def test_every_variant_gets_the_same_metric_names():
    # the evaluate stage names coherence after the variant: eric, "eric (random states)"
    metrics = {
        "metrics/evaluate/eric.json": {"coherence": {"eric": {"accuracy": 0.5}, "eric (random states)": {"accuracy": 0.2}}, "states_used": 9},
        "metrics/evaluate/bart.json": {"coherence": {"bart": {"accuracy": 0.4}}},
    }
    _, per_variant = split_by_variant(metrics, ["eric", "bart"])
    assert per_variant["eric"] == {
        "evaluate.coherence.model.accuracy": 0.5, "evaluate.coherence.random_states.accuracy": 0.2, "evaluate.states_used": 9.0}
    same = aligned(per_variant)
    assert list(same["eric"]) == list(same["bart"])
    assert same["bart"]["evaluate.coherence.model.accuracy"] == 0.4 and math.isnan(same["bart"]["evaluate.states_used"])


def test_variant_params_name_the_switches_recipe_size_budget_and_corpus():
    eric, plain = variant_params(PARAMS, "eric"), variant_params(PARAMS, "no_states")
    assert set(eric) == set(plain)
    assert eric["model.state"] == "True" and plain["model.state"] == "False"
    assert eric["model.state_space.recipe"] == "paper" and plain["model.state_space.recipe"] == "none"
    assert eric["model.size"] == "tiny" and eric["train.max_steps"] == "2" and eric["corpus.name"] == "c"
    auto = {**PARAMS, "model": {**PARAMS["model"], "state_space": {"recipe": "auto"}}}
    assert variant_params(auto, "eric")["model.state_space.recipe"] == "decoupled"  # the recipe in force


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


def _execution(uri, experiment, metrics, variants=("eric", "no_states"), ok=True, checkout=None, name="pipeline test"):
    tags = {"mlflow.source.git.commit": "abc123", "git_commit": "abc123", "git_dirty": "false"}
    exp_id, run_id, runs = open_pipeline_run(uri, experiment, name, tags, PARAMS, list(variants))
    close_pipeline_run(uri, exp_id, run_id, runs, checkout, PARAMS, metrics, {"command": "dvc exp run"}, ok=ok)
    return exp_id, run_id, runs


def test_one_parent_run_and_one_child_per_variant(store, tmp_path):
    uri = store
    checkout = tmp_path / "checkout"
    (checkout / "reports").mkdir(parents=True)
    (checkout / "reports" / "results.html").write_text("<h1>results</h1>")
    (checkout / "models" / "stage_one" / "eric").mkdir(parents=True)
    (checkout / "models" / "stage_one" / "eric" / "config.json").write_text("{}")
    (checkout / "models" / "mentions").mkdir(parents=True)
    (checkout / "models" / "mentions" / "config.json").write_text("{}")
    exp_id, run_id, children = _execution(uri, "eric", METRICS, checkout=checkout)

    client = MlflowClient(uri)
    assert client.get_experiment(exp_id).tags["mlflow.experimentKind"] == "custom_model_development"
    parent = client.get_run(run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["eric.role"] == "pipeline"
    assert parent.data.params["corpus.path"] == "x.zip"
    assert parent.data.params["variants"] == "['eric', 'no_states']"
    assert parent.data.metrics == {"stats.examples_out": 40.0, "stats.train.examples": 35.0}
    assert {a.path for a in client.list_artifacts(run_id)} == {"pipeline_report.json", "report", "mentions_model"}
    assert [a.path for a in client.list_artifacts(run_id, "report")] == ["report/results.html"]

    assert set(children) == {"eric", "no_states"}
    eric, plain = client.get_run(children["eric"]), client.get_run(children["no_states"])
    assert eric.info.run_name == "eric" and eric.info.status == "FINISHED"
    assert eric.data.tags["mlflow.parentRunId"] == run_id
    assert eric.data.tags["eric.variant"] == "eric"
    assert eric.data.tags["mlflow.source.git.commit"] == "abc123" and eric.data.tags["git_dirty"] == "false"
    assert eric.data.metrics == {"eval.bleu": 2.5, "eval.distinct.d4": 0.9}
    assert set(plain.data.metrics) == set(eric.data.metrics) and math.isnan(plain.data.metrics["eval.distinct.d4"])
    assert eric.data.params["model.state"] == "True" and set(eric.data.params) == set(plain.data.params)
    found = client.search_runs([exp_id], "tags.`eric.role` = 'variant'")
    assert {r.info.run_name for r in found} == {"eric", "no_states"}
    # the trained model: an artifact of its variant run, a version in the registry
    (version,) = client.search_model_versions("name = 'eric-eric'")
    assert version.run_id == children["eric"] and eric.data.tags["eric.registered_model"] == "models:/eric-eric/1"
    assert [a.path for a in client.list_artifacts(children["eric"], "model")] == ["model/config.json"]
    # the mention writer beside it (was not registered: ERIC's final text could not be rebuilt from the registry)
    (mentions,) = client.search_model_versions("name = 'eric-mentions'")
    assert mentions.run_id == run_id and client.get_run(run_id).data.tags["eric.mentions_model"] == "models:/eric-mentions/1"
    assert version.tags["mentions_model"] == "models:/eric-mentions/1"
    assert eric.data.tags["eric.mentions_model"] == "models:/eric-mentions/1"


def test_a_stage_run_nests_under_its_variant_and_its_curves_reach_the_variant_run(store, monkeypatch):
    from eric import tracking

    uri = store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tags = {"mlflow.source.git.commit": "abc123", "git_commit": "abc123", "git_dirty": "false"}
    exp_id, run_id, runs = open_pipeline_run(uri, "eric-nested", "pipeline nested", tags, PARAMS, ["eric"])
    monkeypatch.setenv("ERIC_PARENT_RUN_ID", run_id)
    train = tracking.start_run("eric-nested", stage="train_stage_one", variant="eric", params={"train": {"lr": 1}})
    for step, loss in ((1, 3.0), (2, 2.5)):
        train.log_metrics({"train_loss": loss}, step=step)
    train.finish()
    mentions = tracking.start_run("eric-nested", stage="train_mentions", variant="mentions")
    mentions.finish()
    assert tracking.find_run("eric-nested", stage="train_stage_one", variant="eric") == train.run_id
    close_pipeline_run(uri, exp_id, run_id, runs, None, PARAMS, {}, {}, ok=True)

    client = MlflowClient(uri)
    nested = client.get_run(train.run_id).data.tags
    assert nested["mlflow.parentRunId"] == runs["eric"] and nested["eric.pipeline_run_id"] == run_id
    assert nested["git_commit"] == "abc123" and nested["git_dirty"] == "false"  # the execution's, not the checkout's
    assert client.get_run(mentions.run_id).data.tags["mlflow.parentRunId"] == run_id
    assert [(m.step, m.value) for m in client.get_metric_history(runs["eric"], "curve.train_loss")] == [(1, 3.0), (2, 2.5)]


def test_the_stage_runs_of_an_execution_in_its_own_experiment_stay_beside_it(store, monkeypatch):
    """A smoke run (or a study) records into an experiment of its own: its stages, which name
    the corpus, must neither land in the corpus's experiment nor be missed by find_run."""
    from eric import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    tags = {"git_commit": "abc123", "git_dirty": "false"}
    exp_id, run_id, runs = open_pipeline_run(store, "corpus-smoke", "pipeline smoke x", tags, PARAMS, ["eric"])
    monkeypatch.setenv("ERIC_PARENT_RUN_ID", run_id)
    train = tracking.start_run("corpus", stage="train_stage_one", variant="eric")
    train.finish()
    client = MlflowClient(store)
    assert client.get_run(train.run_id).info.experiment_id == exp_id
    assert client.get_experiment_by_name("corpus") is None  # the corpus's record untouched
    assert tracking.find_run("corpus", stage="train_stage_one", variant="eric") == train.run_id


def test_a_failed_execution_is_recorded_as_failed(store):
    uri = store
    exp_id, run_id, _ = _execution(uri, "eric-failing", {}, variants=["eric"], ok=False)
    client = MlflowClient(uri)
    assert client.get_run(run_id).info.status == "FAILED"
    (child,) = client.search_runs([exp_id], "tags.`eric.role` = 'variant'")
    assert child.info.status == "FAILED" and child.data.metrics == {}


def test_compare_prints_table_two_of_the_latest_execution(store, capsys):
    from compare import CompareError, render, select, variant_table

    uri = store
    for bleu in (1.0, 3.0):  # two executions; the latest wins
        metrics = {
            "metrics/evaluate/eric.json": {"B-1": bleu, "D-4": 0.5, "states_used": 9, "extra": 1,
                                           "coherence": {"eric": {"accuracy": 0.432}}},
            "metrics/evaluate/no_states.json": {"B-1": bleu / 2, "D-4": 0.25, "extra": 2},
            "metrics/train/eric.json": {"final_val_loss": 12.5, "final_val_lm_loss": 6.0},
            "metrics/train/no_states.json": {"final_val_loss": 5.8, "final_val_lm_loss": 5.8},
        }
        _execution(uri, "eric-compare", metrics)
    table = variant_table(uri, "eric-compare")
    said = capsys.readouterr().err.splitlines()[-1]  # which execution the table is (a smoke run was shown unnamed)
    assert said.startswith(f"eric-compare at {uri}: pipeline run 'pipeline test' (") and "profile none" in said
    shown = select(table, everything=False)
    assert list(shown.columns) == ["B-1", "D-4", "States used", "Coherence", "Val LM loss", "Val total loss"]
    assert shown["B-1"].to_dict() == {"eric": 3.0, "no_states": 1.5}
    assert shown["Coherence"]["eric"] == pytest.approx(43.2)  # percent, as the report
    assert shown["Val LM loss"].to_dict() == {"eric": 6.0, "no_states": 5.8}  # like with like
    shown = shown[["B-1", "D-4", "States used"]]
    assert len(variant_table(uri, "eric-compare", every=True)) == 4
    assert "evaluate.extra" in select(variant_table(uri, "eric-compare", with_params=True), everything=True).columns

    text = render(shown, "text", width=30)
    assert all(len(line) <= 30 for line in text.splitlines())
    assert text.count("variant") == 2 and "–" in text  # two blocks; no_states has no states
    assert render(shown, "markdown").splitlines()[0] == "| variant | B-1 | D-4 | States used |"
    assert render(shown, "csv").splitlines()[1:] == ["eric,3.0,0.5,9.0", "no_states,1.5,0.25,"]
    with pytest.raises(CompareError, match="no MLflow experiment 'nope'"):
        variant_table(uri, "nope")


def test_metric_names_are_made_safe_for_mlflow():
    # the evaluate stage names the random-state coherence "eric (random states)"
    from eric.review import numeric

    safe = numeric({"evaluate.coherence.eric (random states).cases": 3, "train.val-loss": 1.5, "text": "x"})
    assert safe == {"evaluate.coherence.eric _random states_.cases": 3.0, "train.val-loss": 1.5}


def _repro_outputs(root, run_id):
    """What a plain `dvc repro` leaves for the review stage (PARAMS' variants)."""
    import json

    files = {
        "metrics/headline/eric.json": {"B-1": 3.0, "States": 9},
        "metrics/headline/no_states.json": {"B-1": 2.0, "States": None},
        "metrics/train/eric.json": {"stage": "train_stage_one", "final_val_lm_loss": 5.5, "mlflow_run_id": run_id},
        "metrics/evaluate/eric.json": {"B-1": 3.0, "coherence": {"eric": {"accuracy": 0.4}}},
        "data/processed/stats.json": {"examples_out": 40},
        "metrics/evaluate/no_states.json": None,  # not JSON: left out
        "metrics/evaluate/bart.json": {"B-1": 1.0},  # a variant this run did not train (git's copy): left out
    }
    for rel, values in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("{" if values is None else json.dumps(values))
    (root / "reports").mkdir()
    (root / "reports" / "results.md").write_text("| Model |")
    (root / "models" / "stage_one" / "eric").mkdir(parents=True)
    (root / "models" / "stage_one" / "eric" / "config.json").write_text("{}")


REPRO_PARAMS = {**PARAMS, "evaluate": {"headline_dir": "metrics/headline", "metrics_dir": "metrics/evaluate"},
                "train": {**PARAMS["train"], "metrics_dir": "metrics/train"}, "preprocess": {"out_dir": "data/processed"}}


def test_read_results_reads_the_headline_and_the_full_figures(tmp_path):
    from eric.review import read_results

    _repro_outputs(tmp_path, "r1")
    found = read_results(tmp_path, REPRO_PARAMS)
    assert sorted(found) == ["data/processed/stats.json", "metrics/evaluate/eric.json", "metrics/headline/eric.json",
                             "metrics/headline/no_states.json", "metrics/train/eric.json"]
    assert found["metrics/headline/no_states.json"] == {"B-1": 2.0, "States": None}


def test_a_plain_repro_gets_the_pipeline_structure_and_nests_its_own_stage_runs(store, monkeypatch, tmp_path):
    """What `dvc repro`'s review stage records: the same layout as a flow execution."""
    from eric import tracking
    from eric.review import record_repro

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.delenv("ERIC_PARENT_RUN_ID", raising=False)
    experiment = PARAMS["corpus"]["name"]
    old = tracking.start_run(experiment, stage="evaluate", variant="eric")  # an earlier repro's, then re-run
    old.finish()
    train = tracking.start_run(experiment, stage="train_stage_one", variant="eric")
    for step, loss in ((1, 3.0), (2, 2.5)):
        train.log_metrics({"train_loss": loss}, step=step)
    train.finish()
    stage_runs = {key: tracking.start_run(experiment, stage=key[0], variant=key[1])
                  for key in (("evaluate", "eric"), ("train_mentions", "mentions"), ("report", "all"))}  # fmt: skip
    for tracker in stage_runs.values():
        tracker.finish()
    _repro_outputs(tmp_path, train.run_id)
    git = {"git_commit": "abc1234def", "git_dirty": "false"}
    first = record_repro(tmp_path, REPRO_PARAMS, store, git)

    client = MlflowClient(store)
    pipeline = client.get_run(first["run_id"])
    assert pipeline.info.run_name == "pipeline dvc repro abc1234" and pipeline.data.tags["eric.role"] == "pipeline"
    assert pipeline.data.tags["dvc.command"] == "dvc repro" and pipeline.data.tags["git_dirty"] == "false"
    assert pipeline.data.metrics == {"stats.examples_out": 40.0}
    assert {a.path for a in client.list_artifacts(first["run_id"])} == {"pipeline_report.json", "report"}
    variants = first["variant_runs"]
    assert set(variants) == {"eric", "no_states"}
    eric = client.get_run(variants["eric"])
    assert eric.data.metrics["headline.B-1"] == 3.0 and eric.data.metrics["train.final_val_lm_loss"] == 5.5
    assert set(eric.data.metrics) == set(client.get_run(variants["no_states"]).data.metrics)
    assert [(m.step, m.value) for m in client.get_metric_history(variants["eric"], "curve.train_loss")] == [(1, 3.0), (2, 2.5)]
    (version,) = client.search_model_versions("name = 'c-eric'")
    assert version.run_id == variants["eric"]
    # this repro's stage runs nest: a variant's under its variant run, the shared ones under the pipeline run
    parent_of = {run_id: client.get_run(run_id).data.tags["mlflow.parentRunId"] for run_id in first["adopted"]}
    assert parent_of == {train.run_id: variants["eric"], stage_runs["evaluate", "eric"].run_id: variants["eric"],
                         stage_runs["train_mentions", "mentions"].run_id: first["run_id"],
                         stage_runs["report", "all"].run_id: first["run_id"]}
    assert "mlflow.parentRunId" not in client.get_run(old.run_id).data.tags  # superseded: not this repro's
    # the pipeline run spans the repro (it began when this repro's first stage run began), not the review alone
    assert pipeline.info.start_time == client.get_run(train.run_id).info.start_time
    assert client.get_run(variants["eric"]).info.start_time == pipeline.info.start_time
    # MLflow's shared view `variants`: the variant runs, this execution expanded, the headline as columns
    import json

    view = json.loads(client.get_experiment(first["experiment_id"]).tags["mlflow.sharedViewState.variants"])
    assert view["searchFilter"] == "tags.`eric.role` = 'variant'"
    # one group per variant: MLflow's summary row averages a variant over executions, never across variants
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "eric.variant"}]
    assert eric.data.tags["eric.variant"] == "eric"
    assert eric.data.tags["eric.execution"].startswith("pipeline dvc repro abc1234, ")
    assert view["selectedColumns"][:4] == ["tags.`eric.execution`", "metrics.`headline.B-1`", "metrics.`headline.B-2`",
                                           "metrics.`headline.MSJ-1`"]
    assert "params.`model.state`" in view["selectedColumns"]

    # a second repro in which DVC reran only the evaluation: training stays with the first
    # execution, yet the new variant run still gets the curves of the run that made the model
    again = tracking.start_run(experiment, stage="evaluate", variant="eric")
    again.finish()
    second = record_repro(tmp_path, REPRO_PARAMS, store, git)
    assert second["adopted"] == [again.run_id]
    assert client.get_run(train.run_id).data.tags["mlflow.parentRunId"] == variants["eric"]
    history = client.get_metric_history(second["variant_runs"]["eric"], "curve.train_loss")
    assert [(m.step, m.value) for m in history] == [(1, 3.0), (2, 2.5)]
    assert len(client.search_model_versions("name = 'c-eric'")) == 2  # a version per execution


def test_a_dvc_experiment_is_named_after_it(store, monkeypatch, tmp_path):
    from eric.review import record_repro

    monkeypatch.setenv("DVC_EXP_NAME", "kaput-odor")  # what DVC sets for a `dvc exp run`'s stages
    _repro_outputs(tmp_path, "none")
    recorded = record_repro(tmp_path, {**REPRO_PARAMS, "corpus": {"name": "c-exp"}}, store, {"git_commit": "abc1234"})
    run = MlflowClient(store).get_run(recorded["run_id"])
    assert run.info.run_name == "pipeline dvc exp run kaput-odor"
    assert run.data.tags["dvc.command"] == "dvc exp run" and run.data.tags["dvc.experiment"] == "kaput-odor"
