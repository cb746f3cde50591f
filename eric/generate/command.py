"""What `eric sample` does, kept out of cli.py: settings, models, sampling, output."""

from __future__ import annotations

import time
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
    from eric.data.errors import OutputError
    from eric.data.outdir import check_out_file
    from eric.generate.schema import is_samples_file

    try:
        check_out_file(out, {"the --inputs file": inputs}, is_samples_file, overwrite, "eric sample")
    except OutputError as exc:
        raise SampleError(str(exc)) from None
    return out


# the summary's wall-clock figures: printed (the stage log), never written into the samples file,
# whose bytes would then differ on every rerun and rerun both evaluate stages
TIMED = ("seconds", "tokens_per_s")


def sample_to_file(inputs: list, out: Path, settings: Params, model_dir: Path, mentions_dir: Path | None,
                   names: list[str], variant: str | None = None, metadata: dict | None = None) -> tuple[list[dict], dict]:
    """The one body of sampling, for the DVC stage and `eric sample`: load the models (a
    one-stage model without the mention writer; with `variant`, another variant's folder is
    refused), sample a story per input, write Parquet with its metadata; (rows, summary)."""
    from eric.config import form_label
    from eric.generate.loading import is_two_stage, load_for_sampling
    from eric.generate.merge import NamePool
    from eric.generate.sampler import SamplingOptions, sample_stories, stage_one_decoding
    from eric.generate.schema import fallback_summary, write_samples
    from eric.train.runtime import device_kind

    device = device_kind()
    model, tokenizer, mention_model, mention_tokenizer = load_for_sampling(model_dir, mentions_dir, device, variant)
    options = SamplingOptions.from_params(settings)
    started = time.perf_counter()
    rows = sample_stories(inputs, model, tokenizer, options, mention_model, mention_tokenizer,
                          NamePool(names, seed=options.seed))
    seconds = time.perf_counter() - started
    tokens = sum(r["stage_one_tokens"] for r in rows)
    summary = {**({"variant": variant} if variant else {}), "form": form_label(is_two_stage(model)),
               "stories": len(rows), "stage_one_tokens": tokens, "seconds": round(seconds, 1),
               "tokens_per_s": round(tokens / seconds, 1) if seconds else None, **fallback_summary(rows)}
    untimed = {k: v for k, v in summary.items() if k not in TIMED}  # a rerun writes the same file
    write_samples(rows, out, {**(metadata or {}), "model_dir": str(model_dir), "mentions_dir": str(mentions_dir or ""),
                              "options": options.as_dict(), "device": device,
                              "stage_one_decoding": stage_one_decoding(model, options), "summary": untimed})
    return rows, summary


def sample_file(model_dir: Path, inputs: Path, out: Path, settings: Params, mentions_dir: Path | None = None,
                names: Path | None = None, overwrite: bool = False) -> list[dict]:
    """`eric sample`: one story per input of a file, written to `out` (checked first: check_out)."""
    from eric.data.outdir import output_lock
    from eric.generate.inputs import read_inputs

    with output_lock(out):  # a second `eric sample --out` of this file refuses
        check_out(out, inputs, overwrite)
        rows_in = read_inputs(inputs, settings.sample.num_inputs)
        rows, _ = sample_to_file(rows_in, out, settings, model_dir, mentions_dir, training_names(names, settings),
                                 metadata={"inputs": str(inputs)})
    return rows
