"""MLflow tracking: one experiment per corpus, one run per stage and variant.

Default store: `sqlite:///<project>/mlflow.db` with artifacts under `<project>/mlartifacts/`
(both git-ignored). `MLFLOW_TRACKING_URI` overrides it (e.g. a server started from infra/).
Runs carry the tags `stage`, `variant`, `corpus`, `git_commit`, `git_dirty` (and
`mlflow.source.git.commit`), so the MLflow UI can put variants side by side. Experiments are
created as "custom model development" ones (`mlflow.experimentKind`), so MLflow 3 opens them
in the runs view, not the GenAI one. Nothing here needs a server; only the main rank logs.

Inside a pipeline execution (flows/pipeline.py) the environment names the parent:
ERIC_PARENT_RUN_ID = the pipeline run. A stage run then nests under that execution's
variant run (tags eric.role=variant, eric.variant=<variant>) when there is one, else under
the pipeline run itself, and takes the pipeline run's git tags (the commit the execution ran).

    tracker = start_run("wikiplots-mini", stage="train_stage_one", variant="eric",
                        params=params.model_dump())
    tracker.log_metrics({"train_loss": 3.2}, step=10)
    tracker.finish()
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from eric.config import PROJECT_ROOT, flatten

DEFAULT_DB = PROJECT_ROOT / "mlflow.db"
DEFAULT_ARTIFACTS = PROJECT_ROOT / "mlartifacts"
MAX_PARAM_CHARS = 6000  # MLflow's limit on a param value
PARENT_ENV = "ERIC_PARENT_RUN_ID"  # the pipeline run of this execution (flows/pipeline.py)
PIPELINE_TAG = "eric.pipeline_run_id"  # on every run of an execution: its pipeline run
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}  # MLflow 3: the runs view
GIT_TAGS = ("git_commit", "git_dirty", "mlflow.source.git.commit")
RUN_OUTPUTS = ("dvc.lock", "metrics", "plots", "reports", "data/processed/stats.json")  # committed, written by runs


def tracking_uri(root: Path = PROJECT_ROOT) -> str:
    """MLFLOW_TRACKING_URI, else the SQLite store of the project at `root`."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{root / DEFAULT_DB.name}"


def _client():
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri())


def git_state(root: Path = PROJECT_ROOT) -> dict[str, str]:
    """Commit hash and whether tracked files other than the pipeline's own outputs differ
    from it ('unknown' outside git): a `dvc repro` rewrites dvc.lock and the committed
    metrics, which is not a change of code or params."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                 text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":!{p}" for p in RUN_OUTPUTS))
    return {"git_commit": commit or "unknown",
            "git_dirty": "unknown" if dirty is None else str(bool(dirty)).lower()}


def param_text(value: Any) -> str:
    """A param's value as MLflow stores it: text, within its length limit."""
    return str(value)[:MAX_PARAM_CHARS]


def experiment_id(client, name: str, uri: str | None = None) -> str:
    """The experiment's id in the store `uri` (default: tracking_uri()), created if needed;
    tagged so MLflow 3 shows its runs table."""
    found = client.get_experiment_by_name(name)
    if found is None:
        location = None
        if (uri or tracking_uri()) == f"sqlite:///{DEFAULT_DB}":  # the project's store: artifacts beside the db
            location = (DEFAULT_ARTIFACTS / name).as_uri()
        try:
            return client.create_experiment(name, artifact_location=location, tags=EXPERIMENT_KIND)
        except Exception:  # created meanwhile by another process
            found = client.get_experiment_by_name(name)
            if found is None:
                raise
    for key, value in EXPERIMENT_KIND.items():
        if found.tags.get(key) != value:  # an experiment made elsewhere (or by MLflow's GenAI default)
            client.set_experiment_tag(found.experiment_id, key, value)
    return found.experiment_id


def pipeline_parent(client, variant: str) -> tuple[str | None, dict[str, str], str | None]:
    """Where a stage run of `variant` nests in this execution, the tags it inherits and the
    execution's experiment id (a smoke run's or a study's, not the corpus's): (parent run id,
    tags, experiment id), or (None, {}, None) outside a pipeline execution."""
    pipeline = os.environ.get(PARENT_ENV)
    if not pipeline:
        return None, {}, None
    try:
        run = client.get_run(pipeline)
    except Exception as exc:
        raise RuntimeError(f"{PARENT_ENV}={pipeline}: no such MLflow run ({exc})") from None
    inherited = {k: v for k, v in run.data.tags.items() if k in GIT_TAGS}
    inherited[PIPELINE_TAG] = pipeline
    found = client.search_runs(
        [run.info.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{pipeline}' and tags.`eric.role` = 'variant' "
                      f"and tags.`eric.variant` = '{variant}'",
        max_results=1,
    )
    return (found[0].info.run_id if found else pipeline), inherited, run.info.experiment_id


class RunTracker:
    """Logs to one MLflow run. `NullTracker` has the same methods and does nothing."""

    def __init__(self, client, run_id: str):
        self.client, self.run_id = client, run_id

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)

    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param

        items = [Param(k, param_text(v)) for k, v in flatten(params).items()]
        for i in range(0, len(items), 100):  # MLflow caps a batch at 100 params
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def set_tags(self, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(self.run_id, key, str(value))

    def log_artifact(self, path: str | Path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)

    def __enter__(self) -> "RunTracker":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finish("FAILED" if exc_type else "FINISHED")


class NullTracker(RunTracker):
    def __init__(self) -> None:
        super().__init__(None, None)

    def log_metrics(self, metrics, step) -> None: ...
    def log_params(self, params) -> None: ...
    def set_tags(self, tags) -> None: ...
    def log_artifact(self, path) -> None: ...
    def finish(self, status: str = "FINISHED") -> None: ...


def start_run(experiment: str, *, stage: str, variant: str, params: dict | None = None,
              tags: dict | None = None, run_id: str | None = None,
              enabled: bool = True) -> RunTracker:
    """A new run tagged with stage/variant/corpus/git state and holding `params`;
    with `run_id` (a resumed training) the same run is reopened instead."""
    if not enabled:
        return NullTracker()
    client = _client()
    if run_id is not None and _run_exists(client, run_id):
        client.update_run(run_id, status="RUNNING")
        return RunTracker(client, run_id)
    parent, inherited, execution_experiment = pipeline_parent(client, variant)
    git = git_state()
    all_tags = {"stage": stage, "variant": variant, "corpus": experiment, **git,
                "mlflow.source.git.commit": git["git_commit"], **inherited, **(tags or {})}
    if parent:
        all_tags["mlflow.parentRunId"] = parent  # MLflow's own nesting
    where = execution_experiment or experiment_id(client, experiment)  # nested runs live beside their parent
    run = client.create_run(where, run_name=f"{stage}/{variant}", tags={k: str(v) for k, v in all_tags.items()})
    tracker = RunTracker(client, run.info.run_id)
    if params:
        tracker.log_params(params)
    return tracker


def _run_exists(client, run_id: str) -> bool:
    try:
        client.get_run(run_id)
    except Exception:
        return False
    return True


def find_run(experiment: str, *, stage: str, variant: str) -> str | None:
    """The latest run id of a stage and variant (for stages that log into it later);
    inside a pipeline execution, only that execution's runs count."""
    client = _client()
    query = f"tags.stage = '{stage}' and tags.variant = '{variant}'"
    if pipeline := os.environ.get(PARENT_ENV):  # the execution's runs, in its experiment
        query += f" and tags.`{PIPELINE_TAG}` = '{pipeline}'"
        where = client.get_run(pipeline).info.experiment_id
    else:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return None
        where = found.experiment_id
    runs = client.search_runs(
        [where],
        filter_string=query,
        order_by=["attributes.start_time DESC"], max_results=1,
    )
    return runs[0].info.run_id if runs else None
