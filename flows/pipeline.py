"""The pipeline flow: DVC runs the stages, MLflow records the execution.

    python flows/pipeline.py [--profile smoke] [-S key=value ...] [--variants a,b]

or through a deployment (prefect.yaml): `prefect deployment run
eric-pipeline/embedded-default`. Steps (tasks): read the git state, open the
MLflow parent run, `dvc repro` / `dvc exp run -S ...` (each stage a Prefect
flow of its own, reporting to the same server), read DVC's metrics, close the
MLflow run with one child per variant. Returns the report.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("PREFECT_HOME", str(PROJECT_ROOT / ".prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_API_BLOCKS_REGISTER_ON_START", "false")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")

import review  # noqa: E402
from dvc_steps import (  # noqa: E402
    DELETE,
    DvcLockBusy,
    OverrideError,
    PipelineError,
    check_overrides,
    dvc_command,
    experiment_name,
    read_metrics,
    read_params,
    run_streaming,
)
from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.context import get_run_context  # noqa: E402

PROFILES = PROJECT_ROOT / "flows" / "profiles"
# Deployment parameters -> params.yaml keys
CORPUS_KEYS = {"corpus_path": "corpus.path", "corpus_kind": "corpus.kind", "corpus_name": "corpus.name"}
MODEL_INIT_KEYS = ("model.init", "mentions.init")  # both stages start from the same checkpoint
VARIANTS_KEY = "variants"  # the variants `dvc repro` runs (a list, or a mapping name -> knobs)
VARIANT_CATALOG = ("model", "variants")  # every variant there is, when params.yaml has one


def profile_overrides(name: str | None) -> dict[str, Any]:
    """flows/profiles/<name>.yaml: a named set of overrides (smoke, ...)."""
    if not name:
        return {}
    path = PROFILES / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROFILES.glob("*.yaml")))
        raise OverrideError(f"no profile {name!r} in {PROFILES} (known: {known})")
    return yaml.safe_load(path.read_text()) or {}


def gather_overrides(params: dict, profile, overrides, variants, corpus: dict, model_init) -> dict[str, Any]:
    merged = {**profile_overrides(profile), **(overrides or {})}
    merged.update({CORPUS_KEYS[k]: v for k, v in corpus.items() if v is not None})
    if model_init is not None:
        keys = [k for k in MODEL_INIT_KEYS if _has_key(params, k)] or [MODEL_INIT_KEYS[0]]
        merged.update(dict.fromkeys(keys, model_init))
    if variants:
        merged.update(_select_variants(params, list(variants)))
    check_overrides(params, merged)
    return merged


def _has_key(params: dict, dotted: str) -> bool:
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _select_variants(params: dict, chosen: list[str]) -> dict[str, Any]:
    """Overrides that make `variants` exactly `chosen`. A list is replaced (any name
    of the model.variants catalog may enter); a mapping (name -> knobs) loses its
    other entries, since Hydra merges mappings."""
    declared = params.get(VARIANTS_KEY)
    if declared is None:
        raise OverrideError(f"params.yaml has no `{VARIANTS_KEY}` list to sweep over")
    catalog = params.get(VARIANT_CATALOG[0], {}).get(VARIANT_CATALOG[1]) if isinstance(declared, list) else None
    names = list(catalog or (declared.keys() if isinstance(declared, dict) else declared))
    unknown = [v for v in chosen if v not in names]
    if unknown:
        raise OverrideError(f"unknown variant(s) {unknown}; params.yaml knows {names}")
    if isinstance(declared, dict):
        return {f"{DELETE}{VARIANTS_KEY}.{name}": None for name in names if name not in chosen}
    return {VARIANTS_KEY: chosen}


class _OneLinePipelineErrors(logging.Filter):
    """Prefect logs a failed run with a traceback; a PipelineError needs one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PipelineError):
            record.exc_info = record.exc_text = None
        return True


for _name in ("prefect.flow_runs", "prefect.task_runs"):
    logging.getLogger(_name).addFilter(_OneLinePipelineErrors())


@task(cache_policy=NO_CACHE)
def git_state(root: Path) -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {"commit": git("rev-parse", "HEAD") or "unknown", "dirty": bool(git("status", "--porcelain"))}


def _lock_busy(task, task_run, state) -> bool:
    return isinstance(state.data, DvcLockBusy)


@task(cache_policy=NO_CACHE, retries=2, retry_delay_seconds=30, retry_condition_fn=_lock_busy)
def run_dvc(args: list[str], root: Path, env: dict[str, str]) -> str:
    logger = get_run_logger()
    logger.info("$ %s", " ".join(["dvc", *args[3:]]))
    return run_streaming(args, root, env, logger.info)


@task(cache_policy=NO_CACHE, retries=3, retry_delay_seconds=5)
def open_run(uri: str, experiment: str, name: str, tags: dict[str, str]) -> tuple[str, str]:
    return review.open_pipeline_run(uri, experiment, name, tags)


@task(cache_policy=NO_CACHE, retries=3, retry_delay_seconds=5)
def close_run(uri, exp_id, run_id, params, metrics, variants, report, ok) -> dict[str, str]:
    return review.close_pipeline_run(uri, exp_id, run_id, params, metrics, variants, report, ok)


def mlflow_experiment(params: dict, overrides: dict[str, Any]) -> str:
    """One MLflow experiment per corpus, as eric/tracking.py does for the stages."""
    return str(overrides.get("corpus.name") or (params.get("corpus") or {}).get("name") or "eric")


def _metrics_or_none(root: Path, env: dict[str, str]) -> dict[str, dict]:
    try:
        return read_metrics(root, env)
    except PipelineError as exc:
        get_run_logger().warning("%s", exc)
        return {}


def stage_env(uri: str, experiment: str, parent_run: str) -> dict[str, str]:
    """What every stage inherits: this flow's Prefect server and MLflow run."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME=experiment, ERIC_PARENT_RUN_ID=parent_run)
    env.setdefault("DVC_NO_ANALYTICS", "1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    api = getattr(get_run_context().client, "api_url", None)
    if api:  # an ephemeral server too: stages then skip starting their own
        env["PREFECT_API_URL"] = str(api).rstrip("/")
    return env


@flow(name="eric-pipeline", persist_result=False)
def pipeline(
    profile: str | None = None,
    overrides: dict[str, Any] | None = None,
    variants: list[str] | None = None,
    corpus_path: str | None = None,
    corpus_kind: str | None = None,
    corpus_name: str | None = None,
    model_init: str | None = None,
    experiment: str | None = None,
    exp_name: str | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Run the DVC pipeline (overrides -> `dvc exp run -S`), record it in MLflow
    (experiment: the corpus name, where eric/tracking.py puts the stages' runs)."""
    root = PROJECT_ROOT
    corpus = {"corpus_path": corpus_path, "corpus_kind": corpus_kind, "corpus_name": corpus_name}
    params = read_params(root)
    merged = gather_overrides(params, profile, overrides, variants, corpus, model_init)
    experiment = experiment or mlflow_experiment(params, merged)
    command = dvc_command(merged, exp_name, force)
    git = git_state(root)
    uri = review.tracking_uri(root)
    ctx = get_run_context()
    tags = {
        "mlflow.source.git.commit": git["commit"],
        "mlflow.source.name": "flows/pipeline.py",
        "eric.git_dirty": str(git["dirty"]).lower(),
        "dvc.command": " ".join(["dvc", *command[3:]]),
        "prefect.flow_run_id": str(ctx.flow_run.id),
        "eric.profile": profile or "none",
    }
    exp_id, run_id = open_run(uri, experiment, f"pipeline {ctx.flow_run.name}", tags)
    env = stage_env(uri, experiment, run_id)
    report: dict[str, Any] = {"git": git, "command": tags["dvc.command"], "overrides": merged}
    ok = False
    try:
        report["dvc_experiment"] = experiment_name(run_dvc(command, root, env))
        ok = True
    finally:  # a failed execution is recorded too, with whatever metrics exist
        params = read_params(root)
        report["metrics"] = _metrics_or_none(root, env)
        names = review.variant_names(params, variants)
        report["variant_runs"] = close_run(uri, exp_id, run_id, params, report["metrics"], names, report, ok)
    report["mlflow"] = {"tracking_uri": uri, "experiment_id": exp_id, "run_id": run_id}
    return report


def _parse_args(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="Run the ERIC pipeline as a Prefect flow.")
    parser.add_argument("--profile", help="flows/profiles/<name>.yaml (e.g. smoke)")
    parser.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE", help="params override")
    parser.add_argument("--variants", help="comma-separated variants (ablation sweep)")
    parser.add_argument("--experiment", help="MLflow experiment (default: the corpus name)")
    parser.add_argument("--force", action="store_true", help="rerun every stage")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"-S {item!r}: expected KEY=VALUE")
        overrides[key] = yaml.safe_load(value)
    variants = args.variants.split(",") if args.variants else None
    return dict(profile=args.profile, overrides=overrides, variants=variants, experiment=args.experiment, force=args.force)


if __name__ == "__main__":
    kwargs = _parse_args(sys.argv[1:])
    try:
        result = pipeline(**kwargs)
    except PipelineError as exc:
        sys.exit(f"eric-pipeline: {exc}")
    print(yaml.safe_dump({k: result[k] for k in ("command", "dvc_experiment", "variant_runs", "mlflow")}, sort_keys=False))
