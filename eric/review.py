"""MLflow review of a pipeline execution: a parent run plus one child per variant.

Layout, in the corpus's experiment (`wikiplots-mini`, ...: where eric/tracking.py
logs the stages' own runs; tagged mlflow.experimentKind=custom_model_development,
so MLflow 3 opens it in the runs view):
- parent run `pipeline <flow run>`, tag eric.role=pipeline: git commit
  (mlflow.source.git.commit, git_commit, git_dirty), the DVC command and
  experiment, the Prefect flow run, the params actually used (params.yaml with the
  overrides), the metrics of files that belong to no variant (stats.json ->
  stats.examples_out, ...) and the report as artifacts: report/ (results.html,
  results.md, plots), analysis/<variant>/ (state explorer, CSVs), samples/.
- child run per variant, named after it, tags eric.role=variant and
  eric.variant=<name> (and `variant`, as the stages' runs have), opened before DVC
  starts: the params that define the variant (VARIANT_PARAMS), its final metrics
  (train.*, evaluate.*) and its loss curves as step metrics, all under the same
  names for every variant (a metric a variant lacks is NaN: states_used of BART);
  its trained model under model/, registered as `<experiment>-<variant>` (a version
  per execution: `models:/wikiplots-mini-eric/3`).
- the stages' own runs (train_stage_one/<variant>, train_mentions, report) nest
  under these (eric/tracking.py reads ERIC_PARENT_RUN_ID).
So the runs table, filtered by ``tags.`eric.role` = 'variant'``, shows one row per
variant with its params and metrics side by side (flows/compare.py prints it).

A metrics file belongs to variant v when v is one of its folders or its file
name: metrics/<v>/eval.json or metrics/evaluate/<v>.json.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from eric.config import VariantParams, effective_recipe, flatten
from eric.tracking import experiment_id, param_text

BATCH = 100  # MLflow takes at most 100 params per log_batch
GIT_TAGS = ("mlflow.source.git.commit", "git_commit", "git_dirty", "mlflow.source.name")
# What defines a variant run besides its model switches (model.variants.<name>.*):
VARIANT_PARAMS = (
    "corpus.name", "corpus.kind", "preprocess.max_stories", "model.size", "model.init", "model.num_states",
    "model.state_dim", "model.state_space.recipe", "tokenizer.vocab_size", "train.max_steps", "train.epochs",
    "train.micro_batch_size", "train.grad_accum_steps", "train.lr", "train.max_train_examples",
    "sample.num_inputs", "evaluate.mauve", "seed",
)
EXECUTION_TAG = "eric.execution"  # on variant runs: their pipeline run's name and start
VARIANT_TAG = "eric.variant"  # on variant runs: the variant's name (the shared view's groups)
RANDOM_STATES = " (random states)"  # the evaluate stage's label of the random-state coherence


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


def corpus_experiment(params: Mapping[str, Any]) -> str:
    """The MLflow experiment of a run: one per corpus, as eric/tracking.py logs the stages."""
    return str((params.get("corpus") or {}).get("name") or "eric")


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
        flat = numeric(flatten(same_names(owner, values) if owner else values, f"{label}."))
        (per_variant[owner] if owner else shared).update(flat)
    return shared, per_variant


def _params(flat: Mapping[str, Any]) -> list:
    from mlflow.entities import Param

    return [Param(k, param_text(v)) for k, v in flat.items()]


def _metrics(values: Mapping[str, float]) -> list:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [Metric(k, v, now, 0) for k, v in values.items()]


def _log(client, run_id: str, params: list | None = None, metrics: list | None = None) -> None:
    params, metrics = params or [], metrics or []
    for i in range(0, max(len(params), len(metrics)), BATCH):
        client.log_batch(run_id, params=params[i : i + BATCH], metrics=metrics[i : i + BATCH])


def variant_params(params: Mapping[str, Any], variant: str) -> dict[str, str]:
    """The params that define a variant run: the same names for every variant."""
    flat = flatten(params)
    switches = ((params.get("model") or {}).get("variants") or {}).get(variant) or {}
    out = {"variant": variant, **{f"model.{k}": v for k, v in switches.items()}}
    for key in VARIANT_PARAMS:
        out[key] = flat.get(key)
    if switches and not switches.get("state", True):
        out["model.state_space.recipe"] = "none"  # no state space to learn
    elif out.get("model.state_space.recipe"):
        out["model.state_space.recipe"] = effective_recipe(out["model.state_space.recipe"], flat.get("model.init"))
    return {k: str(v) for k, v in out.items()}


def open_pipeline_run(
    uri: str, experiment: str, name: str, tags: Mapping[str, str], params: Mapping[str, Any], variants: list[str],
    start_time: int | None = None,
) -> tuple[str, str, dict[str, str]]:
    """Create the parent run and its variant runs (RUNNING) before DVC starts, so that
    the stages nest under them; -> (experiment id, run id, {variant: run id}). `start_time`
    (ms): when the execution began, where the runs are made after it (a plain `dvc repro`)."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    exp_id = experiment_id(client, experiment, uri)
    run = client.create_run(exp_id, run_name=name, tags={"eric.role": "pipeline", "stage": "pipeline", **tags},
                            start_time=start_time)
    run_id = run.info.run_id
    inherited = {k: v for k, v in tags.items() if k in GIT_TAGS or k.startswith(("dvc.", "prefect."))}
    execution = f"{name}, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC"  # the shared view's group label
    children = {}
    for variant in variants:
        child_tags = {
            **inherited, "mlflow.parentRunId": run_id, "eric.role": "variant", VARIANT_TAG: variant,
            "variant": variant, "eric.pipeline_run_id": run_id, EXECUTION_TAG: execution,
        }  # fmt: skip
        child = client.create_run(exp_id, run_name=variant, tags=child_tags, start_time=start_time)
        _log(client, child.info.run_id, _params(variant_params(params, variant)))
        children[variant] = child.info.run_id
    return exp_id, run_id, children


def same_names(variant: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Key segments named after the variant get a common name: coherence.eric ->
    coherence.model, coherence.eric (random states) -> coherence.random_states."""
    out = {}
    for key, value in values.items():
        name = "model" if key == variant else "random_states" if key == variant + RANDOM_STATES else key
        out[name] = same_names(variant, value) if isinstance(value, Mapping) else value
    return out


def aligned(per_variant: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Every variant gets every metric name (NaN where it has none)."""
    names = sorted({k for values in per_variant.values() for k in values})
    return {v: {k: values.get(k, math.nan) for k in names} for v, values in per_variant.items()}


def close_pipeline_run(
    uri: str,
    exp_id: str,
    run_id: str,
    variant_runs: Mapping[str, str],
    checkout: Path | None,
    params: Mapping[str, Any],
    metrics: Mapping[str, dict],
    report: Mapping[str, Any],
    ok: bool,
) -> dict[str, str]:
    """Log params, shared metrics and the report on the parent; final metrics, curves
    and the model (registered) on each variant run; close them all."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    variants = list(variant_runs)
    shared, per_variant = split_by_variant(metrics, variants)
    _log(client, run_id, _params(flatten(params)), _metrics(shared))
    if report.get("dvc_experiment"):
        client.set_tag(run_id, "dvc.experiment", report["dvc_experiment"])
    client.log_dict(run_id, dict(report), "pipeline_report.json")
    if checkout is not None:
        log_report(client, run_id, checkout, params, variants)
    trained = training_run_ids(metrics, variants)
    curves = {v: stage_curves(client, exp_id, run_id, v, trained.get(v)) for v in variants}
    finals = aligned(per_variant)
    curve_names = sorted({k for c in curves.values() for k in c})
    experiment = client.get_experiment(exp_id).name
    mentions = log_mentions_model(client, run_id, checkout, params, experiment) if checkout is not None and ok else None
    for variant, child in variant_runs.items():
        history = curves[variant]
        steps = [m for k in curve_names for m in history.get(k, [])]
        steps += [_metric(k, math.nan, 0) for k in curve_names if k not in history]  # the same names everywhere
        _log(client, child, metrics=_metrics(finals[variant]) + steps)
        if checkout is not None and ok:
            log_model(client, child, checkout, params, variant, experiment, mentions)
        client.set_terminated(child, "FINISHED" if ok else "FAILED")
    client.set_terminated(run_id, "FINISHED" if ok else "FAILED")
    share_variant_view(client, exp_id)
    return dict(variant_runs)


VIEW_KEY = "variants"  # MLflow's shared view: <ui>/#/experiments/<id>/runs?viewStateShareKey=variants
VIEW_PARAMS = ("model.state_attention", "model.state", "model.entity", "model.size", "train.max_steps")


def share_variant_view(client, exp_id: str) -> None:
    """The runs table a reviewer wants first, saved as MLflow's shared view `variants`:
    the variant runs grouped by variant, each execution's run a row of its group (newest
    first, its execution a column), the headline figures and the switches as columns (MLflow
    otherwise opens with no metric column and about 150 to tick). A group's summary row is
    MLflow's average over the group's runs: grouped by variant it is one variant's mean over
    executions (seeds, reruns), never ERIC averaged with BART, as grouping by execution made it."""
    import json

    from eric.evaluate.headline import HEADLINE_NAMES

    columns = [f"tags.`{EXECUTION_TAG}`", *(f"metrics.`headline.{name}`" for name in HEADLINE_NAMES)]
    columns += [f"params.`{name}`" for name in VIEW_PARAMS]
    group = [{"mode": "tag", "groupByData": VARIANT_TAG}]
    state = {"searchFilter": "tags.`eric.role` = 'variant'", "orderByKey": "attributes.start_time",
             "orderByAsc": False, "selectedColumns": columns, "columnOrder": columns,
             "groupBy": {"aggregateFunction": "average", "groupByKeys": group}}
    client.set_experiment_tag(exp_id, f"mlflow.sharedViewState.{VIEW_KEY}", json.dumps(state))


def view_url(ui: str, exp_id: str) -> str:
    """The shared view, on the UI's "Model training" side (MLflow 3 starts on its GenAI side)."""
    return f"{ui.rstrip('/')}/#/experiments/{exp_id}/runs?viewStateShareKey={VIEW_KEY}&workflowType=machine_learning"


def _metric(key: str, value: float, step: int, timestamp: int | None = None):
    from mlflow.entities import Metric

    return Metric(key, value, timestamp or int(time.time() * 1000), step)


def training_run_ids(metrics: Mapping[str, dict], variants: list[str]) -> dict[str, str]:
    """variant -> the MLflow run that trained its model (metrics/train/<variant>.json records it)."""
    found = {}
    for path, values in metrics.items():
        parts = PurePosixPath(path).with_suffix("").parts
        if values.get("stage") == "train_stage_one" and parts[-1] in variants and values.get("mlflow_run_id"):
            found[parts[-1]] = str(values["mlflow_run_id"])
    return found


def stage_curves(client, exp_id: str, pipeline_run: str, variant: str, trained: str | None = None) -> dict[str, list]:
    """The step metrics (loss curves, ...) of the train_stage_one run of `variant`, as
    `curve.<name>` histories: the run of this execution, else `trained` (the run that made
    the model, when DVC skipped the training in this execution)."""
    runs = client.search_runs(
        [exp_id],
        f"tags.`eric.pipeline_run_id` = '{pipeline_run}' and tags.stage = 'train_stage_one' "
        f"and tags.variant = '{variant}'",
        order_by=["attributes.start_time DESC"], max_results=1,
    )  # fmt: skip
    if not runs and trained:
        try:
            runs = [client.get_run(trained)]
        except Exception:  # a run of another tracking store
            runs = []
    if not runs:
        return {}
    run = runs[0]
    out = {}
    for key in run.data.metrics:
        if key.startswith("summary."):
            continue  # finals, logged from the DVC metrics files
        history = client.get_metric_history(run.info.run_id, key)
        out[f"curve.{key}"] = [_metric(f"curve.{key}", m.value, m.step, m.timestamp) for m in history]
    return out


def _setting(params: Mapping[str, Any], dotted: str, default: str) -> str:
    return str(flatten(params).get(dotted) or default)


def _two_stage(params: Mapping[str, Any], variant: str) -> bool:
    """Whether the variant writes placeholders for the mention model (params.yaml's variant
    entry as eric.config reads it: a variant without entities is one-stage)."""
    spec = ((params.get("model") or {}).get("variants") or {}).get(variant)
    return VariantParams.model_validate(spec).two_stage if isinstance(spec, Mapping) else True


def log_report(client, run_id: str, checkout: Path, params: Mapping[str, Any], variants: list[str]) -> None:
    """The report (HTML, Markdown, plots), each variant's analysis (state explorer,
    CSVs) and samples, from the execution's checkout, as the pipeline run's artifacts."""
    report = checkout / _setting(params, "evaluate.report_dir", "reports")
    if report.is_dir():
        client.log_artifacts(run_id, str(report), "report")
    analysis = checkout / _setting(params, "evaluate.analysis_dir", "outputs/analysis")
    samples = checkout / _setting(params, "sample.out_dir", "outputs/samples")
    for variant in variants:
        if (analysis / variant).is_dir():
            client.log_artifacts(run_id, str(analysis / variant), f"analysis/{variant}")
        if (samples / f"{variant}.parquet").is_file():
            client.log_artifact(run_id, str(samples / f"{variant}.parquet"), "samples")
            log_preview(client, run_id, samples / f"{variant}.parquet", variant)


def log_preview(client, run_id: str, samples: Path, variant: str) -> None:
    """samples/<variant>.preview.md beside the Parquet file: its first stories as text."""
    from eric.evaluate.case_study import samples_preview
    from eric.generate.schema import read_samples

    preview = samples_preview(variant, read_samples(samples), variant)
    client.log_text(run_id, preview, f"samples/{variant}.preview.md")


def registered_name(experiment: str, variant: str) -> str:
    return metric_name(f"{experiment}-{variant}").replace("/", "_").replace(":", "_")


def log_model(client, run_id: str, checkout: Path, params: Mapping[str, Any], variant: str, experiment: str,
              mentions: str | None = None):
    """The variant's trained model (HF format) under model/, registered in the Model
    Registry as `<experiment>-<variant>`, one version per execution; `mentions` (the mention
    model's `models:/` URI) is tagged on a two-stage variant's version, so its final text can
    be rebuilt from the registry alone."""
    folder = checkout / _setting(params, "train.out_dir", "models/stage_one") / variant
    if not folder.is_dir():
        return None
    tags = {"variant": variant, **({"mentions_model": mentions} if mentions and _two_stage(params, variant) else {})}
    uri = _register(client, run_id, folder, "model", registered_name(experiment, variant),
                    f"ERIC stage-one model, variant {variant}, corpus {experiment}", tags)
    client.set_tag(run_id, "eric.registered_model", uri)
    if "mentions_model" in tags:
        client.set_tag(run_id, "eric.mentions_model", mentions)
    return uri


def log_mentions_model(client, run_id: str, checkout: Path, params: Mapping[str, Any], experiment: str) -> str | None:
    """The mention writer (stage two, shared by every two-stage variant) under mentions_model/
    of the pipeline run, registered as `<experiment>-mentions`; its `models:/` URI, or None."""
    folder = checkout / _setting(params, "mentions.out_dir", "models/mentions")
    if not folder.is_dir():
        return None
    uri = _register(client, run_id, folder, "mentions_model", registered_name(experiment, "mentions"),
                    f"ERIC mention writer (stage two), corpus {experiment}", {"stage": "train_mentions"})
    client.set_tag(run_id, "eric.mentions_model", uri)
    return uri


def _register(client, run_id: str, folder: Path, artifact: str, name: str, description: str, tags: dict) -> str:
    """`folder` logged under `artifact`/ of the run and registered as a new version of `name`."""
    from mlflow.exceptions import MlflowException

    client.log_artifacts(run_id, str(folder), artifact)
    try:
        client.create_registered_model(name, description=description)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    source = f"{client.get_run(run_id).info.artifact_uri}/{artifact}"
    version = client.create_model_version(name, source, run_id=run_id, tags=tags)
    return f"models:/{name}/{version.version}"


# ---------------------------------------------------------------- after a plain `dvc repro`
STAGE_ROLES = ("train_stage_one", "train_mentions", "evaluate", "report")  # the stages' own runs (eric/tracking.py)


def result_files(params: Mapping[str, Any]) -> list[str]:
    """Every JSON a pipeline run writes for review, relative to the project: the headline
    metrics DVC declares and the full figures beside them (train, evaluate, tokenizer,
    preprocess statistics), of the run's `variants` only: a checkout also holds the files
    git keeps of the embedded default's variants, which this run did not write."""
    flat, variants = flatten(params), list(params.get("variants", []))
    written = {flat.get("evaluate.headline_dir"): variants, flat.get("evaluate.metrics_dir"): variants,
               flat.get("train.metrics_dir"): [*variants, "mentions"]}
    files = [flat.get("tokenizer.metrics_path"), f"{flat.get('preprocess.out_dir') or 'data/processed'}/stats.json"]
    return [f"{folder}/{name}.json" for folder, names in written.items() if folder for name in names] + \
        [str(x) for x in files if x]


def read_results(root: Path, params: Mapping[str, Any]) -> dict[str, dict]:
    """{relative path: values} of result_files() that exist under `root` (the project or
    an execution's checkout); a file that is not a JSON object is left out."""
    import json

    found: dict[str, dict] = {}
    for rel in result_files(params):
        try:
            values = json.loads((root / rel).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(values, dict):
            found[rel] = values
    return found


def unclaimed_stage_runs(client, exp_id: str) -> list:
    """The stage runs no execution holds yet (those of this `dvc repro`: the latest per stage
    and variant); stages DVC skipped keep the execution that ran them."""
    runs = client.search_runs([exp_id], "tags.stage != 'pipeline'", order_by=["attributes.start_time DESC"],
                              max_results=2000)  # fmt: skip
    found, seen = [], set()
    for run in runs:
        tags = run.data.tags
        key = (tags.get("stage"), tags.get("variant"))
        if key[0] not in STAGE_ROLES or key in seen:
            continue
        seen.add(key)
        if not tags.get("eric.pipeline_run_id"):  # else its execution recorded it (a deployment, an earlier repro)
            found.append(run)
    return found


def adopt_stage_runs(client, runs: list, pipeline_run: str, variant_runs: Mapping[str, str]) -> list[str]:
    """Nest `runs` (unclaimed_stage_runs) under the new pipeline run's variant runs, or under
    the pipeline run for the shared stages."""
    for run in runs:
        parent = variant_runs.get(run.data.tags.get("variant"), pipeline_run)
        client.set_tag(run.info.run_id, "mlflow.parentRunId", parent)
        client.set_tag(run.info.run_id, "eric.pipeline_run_id", pipeline_run)
    return [run.info.run_id for run in runs]


def record_repro(root: Path, params: Mapping[str, Any], uri: str, git: Mapping[str, str]) -> dict[str, Any]:
    """The review of a plain `dvc repro`, as the pipeline flow records its executions: a
    pipeline run with one run per variant (params, final metrics, curves, registered
    model), the report as artifacts, and this repro's stage runs nested under them."""
    from mlflow import MlflowClient

    experiment = corpus_experiment(params)
    variants = variant_names(params)
    commit = git.get("git_commit", "unknown")
    dvc_experiment = os.environ.get("DVC_EXP_NAME")  # set by DVC for the stages of a `dvc exp run`
    command = "dvc exp run" if dvc_experiment else "dvc repro"
    tags = {"mlflow.source.git.commit": commit, "git_commit": commit, "git_dirty": git.get("git_dirty", "unknown"),
            "mlflow.source.name": command, "dvc.command": command,
            **({"dvc.experiment": dvc_experiment} if dvc_experiment else {})}  # fmt: skip
    name = f"pipeline {command} {dvc_experiment or commit[:7]}"
    client = MlflowClient(uri)
    stage_runs = unclaimed_stage_runs(client, experiment_id(client, experiment, uri))
    began = min((run.info.start_time for run in stage_runs), default=None)  # the repro's, not this review's
    exp_id, run_id, variant_runs = open_pipeline_run(uri, experiment, name, tags, params, variants, began)
    adopted = adopt_stage_runs(client, stage_runs, run_id, variant_runs)
    summary = {"command": command, "git": dict(git), "adopted_stage_runs": adopted}
    close_pipeline_run(uri, exp_id, run_id, variant_runs, root, params, read_results(root, params), summary, ok=True)
    return {"experiment_id": exp_id, "run_id": run_id, "variant_runs": dict(variant_runs), "adopted": adopted}
