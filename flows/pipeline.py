"""The pipeline flow: DVC runs the stages, MLflow records the execution.

    python flows/pipeline.py [--profile smoke] [-S key=value ...] [--variants a,b]

or through a deployment (prefect.yaml): `prefect deployment run
eric-pipeline/embedded-default`. Steps (tasks): read the git state, open the
MLflow pipeline run with one child run per variant, make a checkout of its own
(flows/dvc_steps.py: the workspace is never modified), `dvc exp run [-S ...]`
there (each stage a Prefect flow run, a child of this flow run's `run_dvc` task;
every output line in this flow run's log), read DVC's metrics, close the MLflow
runs (params, metrics, curves, report, registered models), remove the checkout.
Returns the report. An execution killed mid-training resumes: the next execution of
the same configuration takes its checkpoints (flows/executions.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from eric.env import apply_prefect_defaults, exit_interrupted, stop_ephemeral_server_with_process

PROJECT_ROOT = Path(__file__).resolve().parent.parent
apply_prefect_defaults(PROJECT_ROOT)  # before Prefect is imported: it reads its settings once

from eric import review  # noqa: E402
from eric.config import flatten  # noqa: E402
from eric.tracking import tracking_uri  # noqa: E402
from dvc_steps import (  # noqa: E402
    DELETE,
    RUNS_DIR,
    DvcLockBusy,
    OverrideError,
    PipelineError,
    check_overrides,
    dvc_command,
    experiment_name,
    isolated_checkout,
    keep_outputs,
    one_experiment_at_a_time,
    read_params,
    remove_checkout,
    run_streaming,
)
from executions import alive, carry_resumable_state, execution_key, has_resumable_state  # noqa: E402
from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.context import get_run_context  # noqa: E402

PROFILES = PROJECT_ROOT / "flows" / "profiles"
PARENT_TASK_ENV = "ERIC_PREFECT_PARENT_TASK_RUN_ID"  # read by stages/_flow.py: run as a child of this task run
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
    """HEAD and whether code or params differ from it, as eric/tracking.py judges it."""
    from eric.tracking import git_state as tracked

    state = tracked(root)
    return {"commit": state["git_commit"], "dirty": state["git_dirty"] == "true"}


def _lock_busy(task, task_run, state) -> bool:
    return isinstance(state.data, DvcLockBusy)


@task(cache_policy=NO_CACHE, retries=2, retry_delay_seconds=30, retry_condition_fn=_lock_busy)
def run_dvc(args: list[str], checkout: Path, env: dict[str, str]) -> str:
    """DVC in the execution's own checkout; every line it (and each stage) prints goes to
    this flow run's log, so `--watch` and the UI follow the stages."""
    logger = get_run_logger()
    logger.info("$ %s   (in %s)", " ".join(["dvc", *args[3:]]), checkout)
    env = {**env, PARENT_TASK_ENV: str(get_run_context().task_run.id)}  # stage flow runs: children of this task
    with one_experiment_at_a_time(PROJECT_ROOT, logger.info):
        return run_streaming(args, checkout, env, logger.info)


@task(cache_policy=NO_CACHE)
def make_checkout(root: Path, name: str, outside: list[str], env: dict[str, str], key: str,
                  resumable: list[str]) -> Path:
    """The execution's checkout, with what a killed execution of the same configuration
    left to resume from (flows/executions.py)."""
    checkout = isolated_checkout(root, name, outside, env)
    carry_resumable_state(checkout, key, resumable, lambda dead: remove_checkout(root, dead), get_run_logger().info)
    return checkout


@task(cache_policy=NO_CACHE, retries=3, retry_delay_seconds=5)
def open_run(uri: str, experiment: str, name: str, tags: dict[str, str], params: dict, variants: list[str]):
    return review.open_pipeline_run(uri, experiment, name, tags, params, variants)


@task(cache_policy=NO_CACHE, retries=3, retry_delay_seconds=5)
def close_run(uri, exp_id, run_id, variant_runs, checkout, params, metrics, report, ok) -> dict[str, str]:
    return review.close_pipeline_run(uri, exp_id, run_id, variant_runs, checkout, params, metrics, report, ok)


# profiles that check the wiring, not the model: their runs and registered models go to an
# experiment of their own (`<corpus>-smoke`), never into the corpus's record or its "latest"
SEPARATE_PROFILES = {"smoke"}


def mlflow_experiment(params: dict, overrides: dict[str, Any], profile: str | None = None) -> str:
    """One MLflow experiment per corpus, as eric/tracking.py does for the stages; a wiring
    profile's runs go to `<corpus>-<profile>`."""
    corpus = str(overrides.get("corpus.name") or review.corpus_experiment(params))
    return f"{corpus}-{profile}" if profile in SEPARATE_PROFILES else corpus


def stage_env(uri: str, experiment: str, parent_run: str, checkout: Path) -> dict[str, str]:
    """What every stage inherits: this flow's Prefect server and MLflow run, the
    checkout's own `eric` (never the workspace's: its relative paths would write there)."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME=experiment, ERIC_PARENT_RUN_ID=parent_run)
    env.setdefault("DVC_NO_ANALYTICS", "1")
    env["PYTHONUNBUFFERED"] = "1"  # stage output reaches the flow's log line by line, as it happens
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # dvc.yaml's `python`: ours
    others = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != PROJECT_ROOT]
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *others])
    env.setdefault("TORCH_EXTENSIONS_DIR", str(PROJECT_ROOT / ".torch_extensions"))  # compiled once, shared
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
    keep: str | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the DVC pipeline as a DVC experiment (overrides -> `dvc exp run -S`) in a
    checkout of its own, and record it in MLflow (experiment: the corpus name, where
    eric/tracking.py puts the stages' runs). The workspace is left as it is; `keep`: a
    folder that receives the run's metrics, report and dvc.lock (a study's outputs);
    `tags`: extra MLflow tags on the pipeline run (a study's name and configuration)."""
    root = PROJECT_ROOT
    corpus = {"corpus_path": corpus_path, "corpus_kind": corpus_kind, "corpus_name": corpus_name}
    params = read_params(root)
    merged = gather_overrides(params, profile, overrides, variants, corpus, model_init)
    effective = effective_params(root, merged)
    experiment = experiment or mlflow_experiment(params, merged, profile)
    command = dvc_command(merged, exp_name, force)
    git = git_state(root)
    uri = tracking_uri(root)
    ctx = get_run_context()
    flow_run = ctx.flow_run
    tags = {
        "mlflow.source.git.commit": git["commit"],
        "git_commit": git["commit"],
        "git_dirty": str(git["dirty"]).lower(),
        "mlflow.source.name": "flows/pipeline.py",
        "dvc.command": " ".join(["dvc", *command[3:]]),
        "prefect.flow_run_id": str(flow_run.id),
        "prefect.flow_run_name": flow_run.name,
        "eric.profile": profile or "none",
        **(tags or {}),
    }
    names = review.variant_names(effective, variants)
    run_name = f"pipeline {profile + ' ' if profile else ''}{flow_run.name}"  # a smoke run says so in the list
    exp_id, run_id, variant_runs = open_run(uri, experiment, run_name, tags, effective, names)
    report: dict[str, Any] = {"git": git, "command": tags["dvc.command"], "overrides": merged}
    key, kept_state = execution_key(effective), resumable(effective)
    name = f"{key}-{flow_run.id}"
    with alive(root / RUNS_DIR / name):  # until it ends, no later execution takes its checkpoints
        checkout = make_checkout(root, name, outside_paths(effective), dict(os.environ), key, kept_state)
        env = stage_env(uri, experiment, run_id, checkout)
        ok = False
        try:
            report["dvc_experiment"] = experiment_name(run_dvc(command, checkout, env))
            ok = True
        finally:  # a failed execution is recorded too, with whatever metrics exist
            try:
                report["metrics"] = review.read_results(checkout, effective)
                if keep and ok:
                    report["kept"] = keep_outputs(checkout, list(report["metrics"]), Path(keep))
                report["variant_runs"] = close_run(
                    uri, exp_id, run_id, variant_runs, checkout, effective, report["metrics"], report, ok
                )
            finally:
                if ok or not has_resumable_state(checkout, kept_state):
                    remove_checkout(root, checkout)
                else:
                    get_run_logger().info("%s kept: the next execution of this configuration resumes from its "
                                          "checkpoints", checkout)
    report["mlflow"] = {"tracking_uri": uri, "experiment_id": exp_id, "run_id": run_id}
    return report


def effective_params(root: Path, overrides: dict[str, Any]) -> dict:
    """params.yaml as the experiment will see it: the overrides applied by DVC's own
    Hydra code to a copy (the file itself is left alone)."""
    import tempfile

    from dvc.utils.hydra import apply_overrides

    params = read_params(root)
    if not overrides:
        return params
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "params.yaml"
        copy.write_text(yaml.safe_dump(params))
        args = dvc_command(overrides)
        apply_overrides(copy, [a for i, a in enumerate(args) if i and args[i - 1] == "-S"])
        return yaml.safe_load(copy.read_text()) or {}


def resumable(params: dict) -> list[str]:
    """What a killed execution leaves to resume from, inside its checkout (none when
    train.checkpoint_dir is absolute: then every execution shares it already)."""
    folder = str(params.get("train", {}).get("checkpoint_dir") or "")
    return [folder] if folder and not Path(folder).is_absolute() and not folder.startswith("..") else []


def outside_paths(params: dict) -> list[str]:
    """Relative paths in the params that leave the project (../corpora/...): the
    execution's checkout links them (flows/dvc_steps.py)."""
    return sorted({v for v in flatten(params).values() if isinstance(v, str) and v.startswith("../")})


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
    stop_ephemeral_server_with_process()  # killed, this flow takes its ephemeral Prefect server with it
    try:
        result = pipeline(**kwargs)
    except PipelineError as exc:
        sys.exit(f"eric-pipeline: {exc}")
    except KeyboardInterrupt:
        exit_interrupted("eric-pipeline")
    print(yaml.safe_dump({k: result[k] for k in ("command", "dvc_experiment", "variant_runs", "mlflow")}, sort_keys=False))
