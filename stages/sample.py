"""DVC stage `sample@<variant>`: stories from the trained models of one variant.

    python stages/sample.py <variant> [params.yaml]

Stage one (models/stage_one/<variant>) samples each story with placeholders, planning
an entity and a state at every sentence token; stage two (models/mentions) writes the
mentions; the merge puts them in, falling back on the entity's last mention or on a
training name (counted). A one-stage variant (`two_stage: false`: BART and the baselines,
as in the paper) writes the names itself, and the mention model is not loaded. Output:
outputs/samples/<variant>.parquet (eric/generate/schema.py), its metadata recording the
options, models and seed. A Prefect flow (`stage-sample`).
"""

from __future__ import annotations

import time

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, form_label, load_variant_params, resolve_path
from eric.generate.errors import SampleError


@stage_task
def read_params(params_path: str, variant: str) -> Params:
    return load_variant_params(params_path, variant)


@stage_task
def read_data(params: Params) -> tuple[list, list[str]]:
    """The inputs (with references) and the training names the merge falls back on."""
    import pyarrow.parquet as pq

    from eric.generate.inputs import read_inputs

    data = resolve_path(params.preprocess.out_dir) / "stage_one"
    inputs = read_inputs(data / f"{params.sample.split}.parquet", params.sample.num_inputs)
    train = data / "train.parquet"
    if not train.is_file():
        raise SampleError(f"{train}: no training split (run the preprocess stage first)")
    mentions = pq.read_table(train, columns=["mentions"]).column("mentions").to_pylist()
    names = [m["mention"] for row in mentions for m in row or []]
    return inputs, names


@stage_task
def sample(params: Params, variant: str, inputs: list, names: list[str]) -> dict:
    import torch

    from eric.generate.loading import is_two_stage, load_for_sampling
    from eric.generate.merge import NamePool
    from eric.generate.sampler import SamplingOptions, sample_stories, stage_one_decoding
    from eric.generate.schema import fallback_summary, write_samples

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model_dir = resolve_path(params.train.out_dir) / variant
    mentions_dir = resolve_path(params.mentions.out_dir)
    model, tokenizer, mention_model, mention_tokenizer = load_for_sampling(model_dir, mentions_dir, device, variant)
    options = SamplingOptions.from_params(params)
    started = time.perf_counter()
    rows = sample_stories(inputs, model, tokenizer, options, mention_model, mention_tokenizer,
                          NamePool(names, seed=options.seed))
    seconds = time.perf_counter() - started
    tokens = sum(r["stage_one_tokens"] for r in rows)
    summary = {"variant": variant, "form": form_label(is_two_stage(model)), "stories": len(rows),
               "stage_one_tokens": tokens, "seconds": round(seconds, 1),
               "tokens_per_s": round(tokens / seconds, 1) if seconds else None, **fallback_summary(rows)}
    path = resolve_path(params.sample.out_dir) / f"{variant}.parquet"
    write_samples(rows, path, {"variant": variant, "model_dir": str(model_dir), "mentions_dir": str(mentions_dir),
                               "split": params.sample.split, "options": options.as_dict(), "device": device,
                               "stage_one_decoding": stage_one_decoding(model, options), "summary": summary})
    print(f"{variant}: {len(rows)} stories, {tokens} stage-one tokens in {seconds:.0f} s "
          f"({summary['tokens_per_s']} tokens/s); fallbacks: {summary['reused_last']} reused, "
          f"{summary['random_name']} random names of {summary['occurrences']} placeholders -> {path}")
    return summary


@stage_flow("sample")
def run(variant: str, params_path: str = "params.yaml") -> dict:
    params = read_params(params_path, variant)
    inputs, names = read_data(params)
    return sample(params, variant, inputs, names)


if __name__ == "__main__":
    run_stage(run, ParamsError, SampleError)  # argv: <variant> [params.yaml]
