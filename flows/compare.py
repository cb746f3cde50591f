"""The ablation table from MLflow: one row per variant, final metrics side by side.

    python flows/compare.py [--experiment NAME] [--run PIPELINE_RUN_ID] [--all]

Reads MLFLOW_TRACKING_URI (else the project's mlflow.db); the experiment defaults
to params.yaml's corpus name. By default the variants of the latest pipeline
execution; --all lists every variant run of the experiment.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import review

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = "tags.`eric.role` = 'pipeline'"
VARIANT = "tags.`eric.role` = 'variant'"


class CompareError(RuntimeError):
    pass


def variant_table(uri: str, experiment: str, parent: str | None = None, every: bool = False):
    """A DataFrame: index = variant (and run start), columns = metrics."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise CompareError(f"no MLflow experiment {experiment!r} at {uri}")
    query = VARIANT
    if not every:
        parent = parent or _latest_pipeline(client, found.experiment_id)
        query += f" and tags.`mlflow.parentRunId` = '{parent}'"
    runs = client.search_runs([found.experiment_id], query, order_by=["attributes.start_time DESC"], max_results=1000)
    if not runs:
        raise CompareError(f"no variant runs in {experiment!r}" + ("" if every else f" under pipeline run {parent}"))
    return _frame(runs, with_start=every)


def _latest_pipeline(client, experiment_id: str) -> str:
    runs = client.search_runs([experiment_id], PIPELINE, order_by=["attributes.start_time DESC"], max_results=1)
    if not runs:
        raise CompareError("no pipeline run yet: run the pipeline flow or a deployment first")
    return runs[0].info.run_id


def _frame(runs, with_start: bool):
    import pandas as pd

    rows = []
    for run in runs:
        row = {"variant": run.data.tags.get("eric.variant", run.info.run_name)}
        if with_start:
            row["started"] = pd.to_datetime(run.info.start_time, unit="ms").strftime("%Y-%m-%d %H:%M")
        rows.append({**row, **run.data.metrics})
    index = ["variant", "started"] if with_start else ["variant"]
    return pd.DataFrame(rows).set_index(index).sort_index(axis=1)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", help="default: params.yaml's corpus.name")
    parser.add_argument("--run", help="a pipeline run id (default: the latest)")
    parser.add_argument("--all", action="store_true", help="every variant run, not just one execution's")
    args = parser.parse_args(argv)
    uri = review.tracking_uri(ROOT)
    try:
        experiment = args.experiment or _corpus_name()
        table = variant_table(uri, experiment, args.run, args.all)
    except CompareError as exc:
        sys.exit(f"compare: {exc}")
    flat = table.reset_index()
    print(flat.to_markdown(index=False, floatfmt=".4g") if _has_tabulate() else flat.to_string(index=False))


def _corpus_name() -> str:
    import yaml

    path = ROOT / "params.yaml"
    if not path.is_file():
        raise CompareError(f"{path} not found: pass --experiment")
    return str(((yaml.safe_load(path.read_text()) or {}).get("corpus") or {}).get("name") or "eric")


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main(sys.argv[1:])
