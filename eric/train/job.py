"""One training stage run end to end, shared by `train_stage_one` and `train_mentions`:
fingerprint -> MLflow run (reopened on resume) -> Trainer.fit -> HF model + tokenizer,
metrics JSON, loss-curve CSVs -> checkpoints cleared.

The fingerprint (settings, model section, data and tokenizer file hashes) decides whether
a checkpoint left by a killed run may be resumed: a run with other settings starts afresh.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from eric.config import Params, form_label, resolve_path
from eric.data.errors import OutputError
from eric.data.outdir import output_lock, replace_text
from eric.tracking import NullTracker, RunTracker, start_run
from eric.train.checkpoint import CheckpointManager, save_pretrained_atomic
from eric.train.codebook import codebook_hooks
from eric.train.errors import TrainError
from eric.train.loop import LoopSettings, Trainer, TrainResult
from eric.train.phases import has_phases, merged_history, phase_metrics, run_later_phases
from eric.train.runtime import prepare_environment

# Settings that change how a run is watched, not what it computes.
COSMETIC = {"progress", "log_every", "checkpoint_every", "keep_checkpoints", "snapshot_every"}


@dataclass
class TrainingJob:
    stage: str  # train_stage_one | train_mentions
    variant: str  # eric, bart, ... | mentions
    params: Params
    settings: LoopSettings
    model: torch.nn.Module
    tokenizer: object
    collate_fn: Callable[[list], dict]
    train_set: Sequence
    val_set: Sequence
    model_dir: Path
    metrics_path: Path
    plots_path: Path  # train curve; the validation curve goes beside it as <name>_val.csv
    inputs: list[Path] = field(default_factory=list)  # data/tokenizer files in the fingerprint
    model_params: dict = field(default_factory=dict)  # the model section this run used
    train_lengths: Sequence[int] | None = None
    val_lengths: Sequence[int] | None = None
    snapshots_dir: Path | None = None  # where the snapshots (settings.snapshot_every) go when the run ends


def check_split(path: Path, column: str = "target") -> int:
    """The number of examples in a split file; TrainError (one line, before any model is
    built) when training cannot use it: missing, empty, or examples without `column`."""
    if not path.is_file():
        raise TrainError(f"{path}: no such dataset (run the preprocess stage first)")
    try:
        values = pq.read_table(path, columns=[column]).column(column)
    except (OSError, KeyError, pa.ArrowException) as exc:
        raise TrainError(f"{path}: not a readable example set ({str(exc).splitlines()[0]}); run preprocess again") from None
    if len(values) == 0:
        raise TrainError(f"{path}: the {path.stem} split holds no examples (too few stories for "
                         f"preprocess.split_ratio? {path.parent.parent / 'stats.json'} counts them per split)")
    if values.null_count:
        raise TrainError(f"{path}: {values.null_count} of {len(values)} examples have no {column}; run preprocess again")
    return len(values)


def read_rows(path: Path, columns: list[str], limit: int | None = None) -> list[dict]:
    check_split(path)
    table = pq.read_table(path, columns=columns)
    return table.slice(0, limit).to_pylist() if limit else table.to_pylist()


def file_digest(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file():
                digest.update(file.name.encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()


def fingerprint(job: TrainingJob) -> str:
    settings = job.settings.model_dump(exclude=COSMETIC)
    spec = {"stage": job.stage, "variant": job.variant, "seed": job.params.seed,
            "settings": settings, "model": job.model_params, "inputs": file_digest(job.inputs),
            "examples": [len(job.train_set), len(job.val_set)]}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


def tracked_params(job: TrainingJob) -> dict:
    return {"seed": job.params.seed, "variant": job.variant, "corpus": job.params.corpus.model_dump(),
            "model": job.model_params, "tokenizer": job.params.tokenizer.model_dump(),
            "train": job.settings.model_dump(),
            "parameters": sum(p.numel() for p in job.model.parameters())}


def run_job(job: TrainingJob) -> dict:
    """Train (resuming if possible), save everything, print a summary line (rank 0),
    return the metrics dict."""
    rank = prepare_environment()
    try:  # a second run training the same model refuses in one line (its checkpoints and outputs are shared)
        with output_lock(job.model_dir) if rank.is_main else contextlib.nullcontext():
            return _run_job(job, rank)
    except OutputError as exc:
        raise TrainError(str(exc)) from None


def _run_job(job: TrainingJob, rank) -> dict:
    key = fingerprint(job)
    checkpoint_dir = resolve_path(job.params.train.checkpoint_dir) / job.stage / job.variant
    # snapshots are written beside the checkpoints (a resumed run keeps its earlier ones; DVC empties
    # its outputs before a stage reruns) and moved to job.snapshots_dir, a DVC output, when the run ends
    in_progress = resolve_path(job.params.train.checkpoint_dir) / "snapshots" / job.stage / job.variant
    resume = CheckpointManager(checkpoint_dir, rank, fingerprint=key).peek()
    tracker = open_run(job, rank.is_main, (resume or {}).get("extra", {}).get("mlflow_run_id"))
    if has_phases(job.model):  # a model trained in phases starts in its main one
        job.model.set_training_phase("main")
    try:
        trainer = Trainer(
            job.model, job.settings, train_set=job.train_set, collate_fn=job.collate_fn,
            val_set=job.val_set, checkpoint_dir=checkpoint_dir, seed=job.params.seed,
            fingerprint=key, train_lengths=job.train_lengths, val_lengths=job.val_lengths,
            tracker=tracker, snapshot_dir=in_progress if job.snapshots_dir else None, tokenizer=job.tokenizer,
            hooks=codebook_hooks(job.model),
        )
        if job.snapshots_dir and rank.is_main and resume is None:
            shutil.rmtree(in_progress, ignore_errors=True)  # a fresh run's curve starts empty
        result = trainer.fit(extra_state={"mlflow_run_id": tracker.run_id})
        state_dict, phases = run_later_phases(job, trainer, key, tracker)  # e.g. DiscoDVT's prior
        if state_dict is None:
            trainer.save_pretrained(job.model_dir, job.tokenizer)
        else:
            save_pretrained_atomic(job.model, job.model_dir, rank, job.tokenizer, state_dict)
        metrics = {**summarize(job, result, tracker.run_id), **phase_metrics(phases)}  # the main phase's
        result.history, result.val_history = merged_history(result, phases)  # curves: every phase
        if rank.is_main:
            write_outputs(job, result, metrics)
            publish_snapshots(in_progress, job.snapshots_dir)
            report(tracker, job, metrics)
            print(f"{job.variant}: {metrics['steps']} steps, val loss {metrics['initial_val_loss']} -> "
                  f"{metrics['final_val_loss']}, {metrics['tokens_per_s']:,.0f} tokens/s, "
                  f"model in {metrics['model_dir']}")
        trainer.checkpoints.clear()  # the model is saved: a rerun starts afresh
    except BaseException:
        tracker.finish("FAILED")
        raise
    tracker.finish()
    return metrics


def open_run(job: TrainingJob, main_rank: bool, run_id: str | None) -> RunTracker:
    """The job's MLflow run (`run_id`: reopened on resume); a null one off the main rank or with
    `train.mlflow: false`, for which nothing that only MLflow records is read."""
    if not (job.params.train.mlflow and main_rank):
        return NullTracker()
    tags = {"state_space_recipe": recipe} if (recipe := state_space_recipe(job)) else {}
    two_stage = getattr(job.model.config, "two_stage", None)  # stage-one models only
    if two_stage is not None:
        tags["eric.form"] = form_label(two_stage)
    return start_run(job.params.corpus.name, stage=job.stage, variant=job.variant, params=tracked_params(job),
                     tags=tags, run_id=run_id)


def state_space_recipe(job: TrainingJob) -> str | None:
    """The `model.state_space.recipe` of a variant that learns states (None otherwise)."""
    variant = job.params.model.variants.get(job.variant)
    m = job.params.model
    return m.state_space.effective_recipe(m.init) if variant is not None and variant.state else None


# L_CL and its chance over the batch's and over the entity's candidates, at the last validation
CONTRASTIVE_FINALS = ("contrastive_loss", "contrastive_chance", "contrastive_entity_loss", "contrastive_entity_chance")


def summarize(job: TrainingJob, result: TrainResult, run_id: str | None) -> dict:
    last_val = result.val_history[-1] if result.val_history else {}
    return {
        "stage": job.stage, "variant": job.variant, **result.summary(),
        "state_space_recipe": state_space_recipe(job),
        "final_val_lm_loss": last_val.get("val_lm_loss"),
        **{f"final_val_{k}": last_val[f"val_{k}"] for k in CONTRASTIVE_FINALS if f"val_{k}" in last_val},
        "train_examples": len(job.train_set), "val_examples": len(job.val_set),
        "parameters": sum(p.numel() for p in job.model.parameters()),
        "model_dir": str(job.model_dir), "mlflow_run_id": run_id,
    }


def write_csv(path: Path, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    replace_text(path, text.getvalue())


def val_plot_path(plots_path: Path) -> Path:
    return plots_path.with_name(f"{plots_path.stem}_val{plots_path.suffix}")


def publish_snapshots(written: Path, dest: Path | None) -> None:
    """Move the run's snapshots to `dest` (replaced whole; an empty folder when there are none,
    as DVC expects of a declared output)."""
    if dest is None:
        return
    try:
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if written.is_dir():
            shutil.move(written, dest)
        else:
            dest.mkdir()
    except OSError as exc:
        raise TrainError(f"cannot move the snapshots to {dest}: {exc}") from None


def write_outputs(job: TrainingJob, result: TrainResult, metrics: dict) -> None:
    """The metrics and curves, each file whole or not at all (a full disk: TrainError, earlier files kept)."""
    try:
        replace_text(job.metrics_path, json.dumps(metrics, indent=2) + "\n")
        write_csv(job.plots_path, result.history)
        write_csv(val_plot_path(job.plots_path), result.val_history)
    except OutputError as exc:
        raise TrainError(str(exc)) from None


def report(tracker, job: TrainingJob, metrics: dict) -> None:
    numbers = {f"summary.{k}": v for k, v in metrics.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    tracker.log_metrics(numbers, step=metrics["steps"])
    tracker.set_tags({"model_dir": str(job.model_dir)})
    for path in (job.metrics_path, job.plots_path, val_plot_path(job.plots_path)):
        tracker.log_artifact(path)
