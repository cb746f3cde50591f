"""What `eric sample` does, kept out of cli.py: settings, models, sampling, output."""

from __future__ import annotations

from pathlib import Path


from eric.config import Params, params_here_or_defaults, resolve_path
from eric.generate.errors import SampleError


def load_settings(params: Path, overrides: dict) -> Params:
    """params.yaml (defaults when there is none) with `sample.*` overrides; its relative paths (the
    training names' split) resolve beside it."""
    return params_here_or_defaults(params, "sample", overrides)


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


def check_out(out: Path, inputs: Path, overwrite: bool = False) -> Path:
    """Where `eric sample` may write: never its own inputs or a folder, and an existing file
    only when an earlier `eric sample` wrote it (its metadata says so) or with `overwrite`."""
    from eric.generate.schema import is_samples_file

    if out.is_dir():
        raise SampleError(f"--out {out} is a folder; give a file, e.g. {out / 'samples.parquet'}")
    if out.exists() and inputs.exists() and out.resolve() == inputs.resolve():
        raise SampleError(f"--out {out} is the --inputs file; choose another path")
    if out.exists() and not overwrite and not is_samples_file(out):
        raise SampleError(f"--out {out} exists and `eric sample` did not write it; choose another path, "
                          "or --overwrite to replace it")
    return out


def sample_file(model_dir: Path, inputs: Path, out: Path, settings: Params, mentions_dir: Path | None = None,
                names: Path | None = None, overwrite: bool = False) -> list[dict]:
    """Sample one story per input with the models in the given folders; write Parquet to `out`
    (checked first: check_out)."""
    from eric.data.outdir import output_lock
    from eric.generate.inputs import read_inputs
    from eric.generate.loading import load_for_sampling
    from eric.generate.merge import NamePool
    from eric.generate.sampler import SamplingOptions, sample_stories, stage_one_decoding
    from eric.generate.schema import fallback_summary, write_samples
    from eric.train.runtime import device_kind

    device = device_kind()
    with output_lock(out):  # a second `eric sample --out` of this file refuses
        check_out(out, inputs, overwrite)
        rows_in = read_inputs(inputs, settings.sample.num_inputs)
        model, tokenizer, mention_model, mention_tokenizer = load_for_sampling(model_dir, mentions_dir, device)
        options = SamplingOptions.from_params(settings)
        pool = NamePool(training_names(names, settings), seed=options.seed)
        rows = sample_stories(rows_in, model, tokenizer, options, mention_model, mention_tokenizer, pool)
        write_samples(rows, out, {"model_dir": str(model_dir), "mentions_dir": str(mentions_dir or ""),
                                  "inputs": str(inputs), "options": options.as_dict(), "device": device,
                                  "stage_one_decoding": stage_one_decoding(model, options),
                                  "summary": fallback_summary(rows)})
    return rows
