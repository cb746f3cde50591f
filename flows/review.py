"""MLflow review of a pipeline execution: a parent run plus one child per variant.

Layout, in the corpus's experiment (`wikiplots-mini`, ...: where eric/tracking.py
logs the stages' own runs):
- parent run `pipeline <flow run>`, tag eric.role=pipeline: git commit
  (mlflow.source.git.commit), the DVC command and experiment, the Prefect flow
  run, the params actually used (flattened params.yaml) and the metrics of files
  that belong to no variant (stats.json -> stats.train.examples, ...).
- child run per variant, named after it, tags eric.role=variant and
  eric.variant=<name> (and `variant`, as the stages' runs have): the final
  metrics of that variant's files.
So the UI, filtered by `tags."eric.role" = 'variant'`, shows one row per variant
with its metrics side by side; expanded under its parent, one execution's table.
Stages that log their own runs (curves) nest under the parent through the
ERIC_PARENT_RUN_ID environment variable the flow hands to DVC.

A metrics file belongs to variant v when v is one of its folders or its file
name: metrics/<v>/eval.json or metrics/eval/<v>.json.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

PARAM_VALUE_LIMIT = 6000  # MLflow's limit on a param's value
BATCH = 100  # MLflow takes at most 100 params per log_batch


def tracking_uri(root: Path) -> str:
    """MLFLOW_TRACKING_URI, else the project's SQLite store (as eric/tracking.py)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{root / 'mlflow.db'}"


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


_UNSAFE = re.compile(r"[^\w\-. /:]")  # MLflow names: alphanumerics, _ - . space / :


def metric_name(key: str) -> str:
    """A name MLflow accepts: `coherence.eric (random states)` -> `coherence.eric _random states_`."""
    return _UNSAFE.sub("_", key)


def numeric(flat: Mapping[str, Any]) -> dict[str, float]:
    """Metrics MLflow can plot: finite numbers (bools and text are left out)."""
    return {
        metric_name(k): float(v)
        for k, v in flat.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def variant_names(params: Mapping[str, Any], chosen: Iterable[str] | None = None) -> list[str]:
    """The variants of this execution: those asked for, else params.yaml's `variants`."""
    if chosen:
        return list(chosen)
    listed = params.get("variants") or []
    return list(listed.keys() if isinstance(listed, Mapping) else listed)


def split_by_variant(metrics: Mapping[str, dict], variants: list[str]) -> tuple[dict, dict[str, dict]]:
    """Metric files -> (shared metrics, {variant: metrics}), keys prefixed by file."""
    shared: dict[str, float] = {}
    per_variant: dict[str, dict[str, float]] = {v: {} for v in variants}
    for path, values in metrics.items():
        parts = PurePosixPath(path).with_suffix("").parts
        owner = next((v for v in variants if v in parts), None)
        label = [p for p in parts if p != owner][-1] if owner else parts[-1]
        flat = numeric(flatten(values, f"{label}."))
        (per_variant[owner] if owner else shared).update(flat)
    return shared, per_variant


def _params(flat: Mapping[str, Any]) -> list:
    from mlflow.entities import Param

    return [Param(k, str(v)[:PARAM_VALUE_LIMIT]) for k, v in flat.items()]


def _metrics(values: Mapping[str, float]) -> list:
    import time

    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [Metric(k, v, now, 0) for k, v in values.items()]


def _log(client, run_id: str, params: list | None = None, metrics: list | None = None) -> None:
    params, metrics = params or [], metrics or []
    for i in range(0, max(len(params), len(metrics)), BATCH):
        client.log_batch(run_id, params=params[i : i + BATCH], metrics=metrics[i : i + BATCH])


def open_pipeline_run(uri: str, experiment: str, name: str, tags: Mapping[str, str]) -> tuple[str, str]:
    """Create the parent run (RUNNING) before DVC starts; -> (experiment id, run id)."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    exp_id = found.experiment_id if found else client.create_experiment(experiment)
    run = client.create_run(exp_id, run_name=name, tags={"eric.role": "pipeline", "stage": "pipeline", **tags})
    return exp_id, run.info.run_id


def close_pipeline_run(
    uri: str,
    exp_id: str,
    run_id: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, dict],
    variants: list[str],
    report: Mapping[str, Any],
    ok: bool,
) -> dict[str, str]:
    """Log params, shared metrics, the report and one child run per variant."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    shared, per_variant = split_by_variant(metrics, variants)
    _log(client, run_id, _params(flatten(params)), _metrics(shared))
    client.log_dict(run_id, dict(report), "pipeline_report.json")
    children = {}
    parent_tags = {t: v for t, v in client.get_run(run_id).data.tags.items() if t.startswith(("mlflow.source", "dvc."))}
    for variant, values in per_variant.items():
        tags = {**parent_tags, "mlflow.parentRunId": run_id, "eric.role": "variant", "eric.variant": variant, "variant": variant}
        child = client.create_run(exp_id, run_name=variant, tags=tags)
        _log(client, child.info.run_id, metrics=_metrics(values))
        client.set_terminated(child.info.run_id, "FINISHED" if ok else "FAILED")
        children[variant] = child.info.run_id
    client.set_terminated(run_id, "FINISHED" if ok else "FAILED")
    return children
