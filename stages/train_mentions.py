"""DVC stage `train_mentions`: the stage-two mention generator (plain BART seq2seq) on
data/processed/stage_two, trained by the same DeepSpeed engine as stage one.

    python stages/train_mentions.py [params.yaml]

Outputs: models/mentions/ (HF format + tokenizer), metrics/train/mentions.json,
plots/train/mentions.csv and mentions_val.csv. `mentions:` in params.yaml sets the model
and may override train.epochs / max_steps / lr / micro_batch_size.
"""

from __future__ import annotations

from _flow import run_stage, stage_flow, stage_task

from eric.config import LoopSettings, Params, ParamsError, load_params, resolve_path
from eric.train.errors import TrainError
from eric.train.job import TrainingJob, read_rows, run_job

COLUMNS = ["id", "source", "target"]
OVERRIDES = ("epochs", "max_steps", "lr", "micro_batch_size")


@stage_task
def read_params(params_path: str) -> Params:
    return load_params(params_path)


def settings(params: Params) -> LoopSettings:
    """`train` settings with the non-null `mentions` overrides."""
    chosen = {k: getattr(params.mentions, k) for k in OVERRIDES if getattr(params.mentions, k) is not None}
    return params.train.loop(**chosen)


@stage_task
def prepare(params: Params) -> TrainingJob:
    import torch

    from eric.data.tokenizer import load_tokenizer
    from eric.train.mentions import MentionsCollator, build_mentions_model

    mp, t = params.mentions, params.train
    data = resolve_path(params.preprocess.out_dir) / "stage_two"
    tokenizer_dir = resolve_path(params.tokenizer.out_dir)
    try:
        tokenizer = load_tokenizer(tokenizer_dir, params.model.max_entities)
    except (FileNotFoundError, ValueError) as exc:
        raise TrainError(str(exc)) from None
    collator = MentionsCollator(tokenizer, mp.max_source_length, mp.max_target_length)
    train = read_rows(data / "train.parquet", COLUMNS, t.max_train_examples)
    val = read_rows(data / "val.parquet", COLUMNS, t.max_val_examples)
    torch.manual_seed(params.seed)
    return TrainingJob(
        stage="train_mentions", variant="mentions", params=params, settings=settings(params),
        model=build_mentions_model(mp, tokenizer, max(1024, mp.max_source_length)),
        tokenizer=tokenizer, collate_fn=collator, train_set=train, val_set=val,
        train_lengths=collator.lengths(train), val_lengths=collator.lengths(val),
        model_dir=resolve_path(mp.out_dir),
        metrics_path=resolve_path(t.metrics_dir) / "mentions.json",
        plots_path=resolve_path(t.plots_dir) / "mentions.csv",
        inputs=[data / "train.parquet", data / "val.parquet", tokenizer_dir],
        model_params=mp.model_dump(),
    )


@stage_task
def train(job: TrainingJob) -> dict:
    return run_job(job)


@stage_flow("train_mentions")
def run(params_path: str = "params.yaml") -> dict:
    return train(prepare(read_params(params_path)))


if __name__ == "__main__":
    run_stage(run, ParamsError, TrainError)  # under a launcher: rank 0 is the flow run
