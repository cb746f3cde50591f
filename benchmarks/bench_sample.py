"""Sampling speed of the sample stage: ERIC vs the BART variant of the same size.

    python benchmarks/bench_sample.py [--size tiny] [--new-tokens 128] [--runs 3] [--threads 1]

Both models are what `train_stage_one` builds for the variants `eric` and `bart`
(EricForConditionalGeneration, the `tiny` preset: d_model 256, 3+3 layers, K=512),
random weights, with the BPE tokenizer trained on the processed training split
(data/processed/stage_one/train.parquet; synthetic text if it is missing). Timed:
`eric.generate.sampler.sample_stage_one` (top-p 0.9, KV cache, tokenization and
decoding included) on test inputs, at batch 8 (16 inputs) and batch 1 (4 inputs).
Both models get the same logit bias on <sent> (P = 1/17 under uniform logits, the unit
length of wikiplots-mini's targets; random logits are not uniform, and the models
open a unit about every 8 tokens, the `units/text` column): ERIC plans an entity and
a state at each, so this is harder on ERIC than real text. Tokens/s = generated
stage-one tokens / seconds.
Goal: ERIC / BART >= 0.9 at both batch sizes.

Medians over --runs after one warm-up, the two models alternating so that host noise
hits both alike. `--clock process` (CPU time) is steadier on a shared host; on 2 busy
cores one thread ran ~5x faster than two (spin-waits), hence the default.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import pyarrow.parquet as pq
import torch

from eric.config import ModelParams, PROJECT_ROOT
from eric.data.tokenizer import special_token_ids, train_bpe
from eric.generate.sampler import SamplingOptions, sample_stage_one
from eric.model.variants import build_model

DATA = PROJECT_ROOT / "data" / "processed" / "stage_one"
UNIT_LENGTH = 17


def texts() -> tuple[list[str], list[str]]:
    """(training texts for the tokenizer, inputs to sample from)."""
    if (DATA / "train.parquet").is_file() and (DATA / "test.parquet").is_file():
        train = pq.read_table(DATA / "train.parquet", columns=["source", "target"]).to_pylist()
        test = pq.read_table(DATA / "test.parquet", columns=["source"]).column("source").to_pylist()
        return [r["source"] for r in train] + [r["target"] for r in train], test
    words = "the film opens with a young man who travels to the city and meets an old friend there".split()
    lines = [" ".join(words[i % 7 :] + words[: i % 7]) + "." for i in range(400)]
    return lines, lines[:32]


def model(size: str, variant: str, tokenizer, sent_bias: float):
    torch.manual_seed(0)
    built = build_model(ModelParams(size=size), variant, tokenizer).eval()
    with torch.no_grad():
        built.final_logits_bias[0, special_token_ids(tokenizer, 100).sent] += sent_bias
    return built


def timed(clock, fn):
    start = clock()
    result = fn()
    return clock() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny", choices=["tiny", "base"])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)  # 2 busy cores: 1 thread is ~5x faster
    parser.add_argument("--clock", default="wall", choices=["wall", "process"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.perf_counter if args.clock == "wall" else time.process_time

    corpus, inputs = texts()
    tokenizer = train_bpe(corpus, vocab_size=8000, max_entities=100)
    sent_bias = math.log(len(tokenizer) / (UNIT_LENGTH - 1))  # P(<sent>) ~ 1/17 under uniform logits
    models = {v: model(args.size, v, tokenizer, sent_bias) for v in ("eric", "bart")}
    print(f"{args.size} preset, vocab {len(tokenizer)}, {args.new_tokens} new tokens, top-p 0.9, "
          f"{args.threads} threads, {args.clock} clock, median of {args.runs}")
    print(f"{'batch':>5} {'inputs':>6} {'ERIC tok/s':>11} {'BART tok/s':>11} {'units/text':>10} {'ratio':>6}")
    for batch, n in ((8, 16), (1, 4)):
        options = SamplingOptions(batch_size=batch, max_length=args.new_tokens, progress=False, seed=1)
        speeds: dict[str, list[float]] = {v: [] for v in models}
        units = 0.0
        for run in range(args.runs + 1):  # run 0 warms up
            for variant, m in models.items():
                seconds, samples = timed(clock, lambda: sample_stage_one(m, tokenizer, inputs[:n], options))
                if run:
                    speeds[variant].append(sum(s.tokens for s in samples) / seconds)
                if variant == "eric":
                    units = statistics.mean(len(s.unit_entities) for s in samples)
        eric, bart = (statistics.median(speeds[v]) for v in ("eric", "bart"))
        print(f"{batch:>5} {n:>6} {eric:>11.0f} {bart:>11.0f} {units:>10.1f} {eric / bart:>6.2f}")


if __name__ == "__main__":
    main()
