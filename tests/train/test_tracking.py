"""MLflow tracking: default store location, runs per stage/variant, reopening on resume."""

import pytest

from eric import tracking
from eric.config import flatten


def test_default_store_is_the_project_sqlite_and_env_overrides(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.tracking_uri() == f"sqlite:///{tracking.PROJECT_ROOT / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking.tracking_uri() == "http://127.0.0.1:5000"


def test_flatten_and_git_state():
    assert flatten({"train": {"lr": 1e-4, "epochs": 2}, "seed": 1}) == {
        "train.lr": 1e-4, "train.epochs": 2, "seed": 1}
    assert tracking.param_text(1e-4) == "0.0001" and len(tracking.param_text("x" * 7000)) == tracking.MAX_PARAM_CHARS
    state = tracking.git_state()
    assert state["git_dirty"] in ("true", "false", "unknown")
    assert state["git_commit"] == "unknown" or len(state["git_commit"]) == 40


def test_runs_are_grouped_by_corpus_and_reopened_on_resume(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    from mlflow.tracking import MlflowClient

    first = tracking.start_run("corpus-a", stage="train_stage_one", variant="eric",
                               params={"train": {"lr": 0.1}})
    first.log_metrics({"train_loss": 2.0, "skipped": None}, step=1)
    # a killed run stays RUNNING; the resumed one reopens it instead of starting another
    again = tracking.start_run("corpus-a", stage="train_stage_one", variant="eric",
                               run_id=first.run_id)
    assert again.run_id == first.run_id
    again.log_metrics({"train_loss": 1.5}, step=2)
    again.finish()
    other = tracking.start_run("corpus-a", stage="train_stage_one", variant="bart")
    other.finish("FAILED")

    client = MlflowClient(tracking_uri=tracking.tracking_uri())
    run = client.get_run(first.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "train_stage_one/eric"
    assert [m.value for m in client.get_metric_history(first.run_id, "train_loss")] == [2.0, 1.5]
    assert "skipped" not in run.data.metrics
    assert tracking.find_run("corpus-a", stage="train_stage_one", variant="eric") == first.run_id
    assert tracking.find_run("corpus-b", stage="train_stage_one", variant="eric") is None
    assert client.get_experiment_by_name("corpus-a").experiment_id == run.info.experiment_id


def test_disabled_tracking_logs_nothing(tmp_path, monkeypatch):
    store = tmp_path / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    tracker = tracking.start_run("x", stage="s", variant="v", enabled=False)
    assert isinstance(tracker, tracking.NullTracker) and tracker.run_id is None
    tracker.log_metrics({"a": 1.0}, step=0)
    tracker.log_params({"p": 1})
    (tmp_path / "artifact.txt").write_text("x")
    tracker.log_artifact(tmp_path / "artifact.txt")
    tracker.finish()
    assert not store.exists() and not (tmp_path / "mlruns").exists()  # no store was ever opened
