"""DVC stage `train_stage_one@<variant>`: the stage-one model of one variant, trained with
DeepSpeed on data/processed/stage_one.

    python stages/train_stage_one.py <variant> [params.yaml]
    torchrun --nproc_per_node 2 stages/train_stage_one.py <variant>   # several ranks / GPUs

Outputs: models/stage_one/<variant>/ (HF format + tokenizer), metrics/train/<variant>.json,
plots/train/<variant>.csv and <variant>_val.csv. A killed run resumes from
models/checkpoints/train_stage_one/<variant>/ when rerun with the same settings.
A Prefect flow (`stage-train_stage_one`) of three tasks; under a multi-rank launcher
only rank 0 is a flow run, the other ranks call the same function without Prefect.
"""

from __future__ import annotations

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, load_variant_params, resolve_path
from eric.train.data_order import lengths
from eric.train.errors import TrainError
from eric.train.job import TrainingJob, check_split, read_rows, run_job

COLUMNS = ["id", "source", "target", "unit_entities"]


@stage_task
def read_params(params_path: str, variant: str) -> Params:
    return load_variant_params(params_path, variant)


@stage_task
def prepare(params: Params, variant: str) -> TrainingJob:
    """Data, tokenizer, collator and a freshly initialized model of the variant."""
    import torch

    from eric.data.collate import StageOneCollator
    from eric.data.one_stage import COLUMNS as ONE_STAGE_COLUMNS
    from eric.data.one_stage import one_stage_row
    from eric.data.tokenizer import load_tokenizer
    from eric.model.variants import build_model, resolve_variant
    from eric.train.engine import COMPILED_PAD_MULTIPLE

    m, t = params.model, params.train
    data = resolve_path(params.preprocess.out_dir) / "stage_one"
    for split in ("train", "val"):  # an unusable split fails here, before any model is built
        check_split(data / f"{split}.parquet")
    tokenizer_dir = resolve_path(params.tokenizer.out_dir)
    try:
        tokenizer = load_tokenizer(tokenizer_dir, m.max_entities)
    except (FileNotFoundError, ValueError) as exc:
        raise TrainError(str(exc)) from None
    torch.manual_seed(params.seed)
    try:
        resolved = resolve_variant(m, variant)  # name, spec, class, options: once
        model = build_model(m, resolved, tokenizer)
    except (FileNotFoundError, ValueError) as exc:
        raise TrainError(str(exc)) from None
    architecture, two_stage = resolved.cls, resolved.two_stage
    columns = [*COLUMNS, *architecture.extra_columns, *(() if two_stage else ONE_STAGE_COLUMNS)]
    targets = resolve_path(t.targets_dir)  # baselines' cached targets (HINT)

    def rows(split: str, limit: int | None) -> list[dict]:
        found = read_rows(data / f"{split}.parquet", columns, limit)
        found = found if two_stage else [one_stage_row(row) for row in found]  # real names (the paper's BART)
        return architecture.join_targets(found, targets, variant, split)

    try:
        train, val = rows("train", t.max_train_examples), rows("val", t.max_val_examples)
    except (FileNotFoundError, ValueError) as exc:
        raise TrainError(str(exc)) from None
    # extras: a baseline's own batch inputs (training-split statistics counted once, e.g. PlanAhead's IDF)
    collator = StageOneCollator.for_training(tokenizer, m, params.seed,
                                             extras=architecture.collator_extras(model.config, tokenizer, train),
                                             pad_multiple=COMPILED_PAD_MULTIPLE if t.compile else 1)
    model_params = m.model_dump(exclude={"variants"}) | {"switches": resolved.spec.model_dump()}
    return TrainingJob(
        stage="train_stage_one", variant=variant, params=params,
        settings=t.loop(), model=model, tokenizer=tokenizer,
        collate_fn=collator, train_set=train, val_set=val,
        train_lengths=lengths(tokenizer, train, m.max_source_length, m.max_target_length),
        val_lengths=lengths(tokenizer, val, m.max_source_length, m.max_target_length),
        model_dir=resolve_path(t.out_dir) / variant,
        snapshots_dir=resolve_path(t.snapshots_dir) / variant,
        metrics_path=resolve_path(t.metrics_dir) / f"{variant}.json",
        plots_path=resolve_path(t.plots_dir) / f"{variant}.csv",
        inputs=[data / "train.parquet", data / "val.parquet", tokenizer_dir],
        model_params=model_params,
    )


@stage_task
def train(job: TrainingJob) -> dict:
    return run_job(job)


@stage_flow("train_stage_one")
def run(variant: str, params_path: str = "params.yaml") -> dict:
    params = read_params(params_path, variant)
    return train(prepare(params, variant))


if __name__ == "__main__":
    run_stage(run, ParamsError, TrainError)  # argv: <variant> [params.yaml]; under a launcher rank 0 is the flow run
