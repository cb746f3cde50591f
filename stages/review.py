"""DVC stage `review`: after a plain `dvc repro`, the MLflow review a Prefect execution
records too: a pipeline run, one run per variant (the params that define it, its final
metrics under the same names for every variant, its loss curves, its model registered as
`<corpus>-<variant>`), the report as artifacts, and this repro's stage runs nested under
them (eric/review.py).

    python stages/review.py [params.yaml]

Inside an execution of the pipeline flow (a deployment, `flows/pipeline.py`, a study) the
flow records all this itself (ERIC_PARENT_RUN_ID is set), so the stage only says so.
Nothing is recorded with `train.mlflow: false`. A Prefect flow (`stage-review`).
"""

from __future__ import annotations

import os

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, load_params, resolve_path


@stage_task
def read_params(params_path: str) -> Params:
    return load_params(params_path)


@stage_task
def record(params: Params) -> dict:
    from eric.review import record_repro, view_url
    from eric.tracking import git_state, tracking_uri

    root, uri = resolve_path("."), tracking_uri()
    recorded = record_repro(root, params.model_dump(), uri, git_state(root))
    variants = ", ".join(f"{v} {r}" for v, r in recorded["variant_runs"].items())
    print(f"review: MLflow pipeline run {recorded['run_id']} at {uri}; variant runs: {variants}; "
          f"{len(recorded['adopted'])} stage runs nested")
    served = uri.startswith("http")  # else a local store, browsed with `mlflow ui`
    print(f"review: the variants table: {view_url(uri if served else 'http://127.0.0.1:5000', recorded['experiment_id'])}"
          + ("" if served else f" (with `mlflow ui --backend-store-uri {uri}` running)"))
    return recorded


@stage_flow("review")
def run(params_path: str = "params.yaml") -> dict:
    from eric.tracking import PARENT_ENV

    params = read_params(params_path)
    if not params.train.mlflow:
        print("review: train.mlflow is off, nothing recorded")
        return {}
    if os.environ.get(PARENT_ENV):
        print(f"review: recorded by the pipeline flow's run {os.environ[PARENT_ENV]}")
        return {}
    return record(params)


if __name__ == "__main__":
    run_stage(run, ParamsError)
