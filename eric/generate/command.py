"""What `eric sample` does, kept out of cli.py: settings, models, sampling, output."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from eric.config import Params, ParamsError, SampleParams, load_params, resolve_path
from eric.generate.errors import SampleError


def load_settings(params: Path, overrides: dict) -> Params:
    """params.yaml (defaults when there is none) with `sample.*` overrides."""
    if params.is_file():
        return load_params(params, {f"sample.{k}": v for k, v in overrides.items()})
    try:
        return Params(sample=SampleParams(**overrides))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ParamsError(f"sample.{first['loc'][0]}: {first['msg']}") from None


def training_names(path: Path | None, settings: Params) -> list[str]:
    """Fallback names: the mentions of a stage_one split (default: the processed training split)."""
    import pyarrow.parquet as pq

    path = path or resolve_path(settings.preprocess.out_dir) / "stage_one" / "train.parquet"
    if not path.is_file():
        return []
    try:
        column = pq.read_table(path, columns=["mentions"]).column("mentions").to_pylist()
    except Exception as exc:  # not Parquet, or no mentions column
        raise SampleError(f"{path}: cannot read training mentions ({exc.__class__.__name__})") from None
    return [m["mention"] for row in column for m in row or []]


def sample_file(model_dir: Path, inputs: Path, out: Path, settings: Params, mentions_dir: Path | None = None,
                names: Path | None = None) -> list[dict]:
    """Sample one story per input with the models in the given folders; write Parquet to `out`."""
    import torch

    from eric.generate.inputs import read_inputs
    from eric.generate.loading import load_mentions, load_stage_one
    from eric.generate.merge import NamePool
    from eric.generate.sampler import SamplingOptions, sample_stories
    from eric.generate.schema import fallback_summary, write_samples

    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows_in = read_inputs(inputs, settings.sample.num_inputs)
    model, tokenizer = load_stage_one(model_dir, device)
    mention_model, mention_tokenizer = load_mentions(mentions_dir, device) if mentions_dir else (None, None)
    options = SamplingOptions.from_params(settings)
    pool = NamePool(training_names(names, settings), seed=options.seed)
    rows = sample_stories(rows_in, model, tokenizer, options, mention_model, mention_tokenizer, pool)
    write_samples(rows, out, {"model_dir": str(model_dir), "mentions_dir": str(mentions_dir or ""),
                              "inputs": str(inputs), "options": options.as_dict(), "device": device,
                              "summary": fallback_summary(rows)})
    return rows
