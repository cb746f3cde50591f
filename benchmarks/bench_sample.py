"""Sampling speed of the sample stage: ERIC vs the BART variant of the same size.

    python benchmarks/bench_sample.py [--size tiny] [--new-tokens 128] [--runs 3] [--threads 1] [--unit-rate real]
                                      [--decode-steps dynamic static compiled]

Both models are what `train_stage_one` builds for the variants `eric` and `bart`
(EricForConditionalGeneration, the `tiny` preset: d_model 256, 3+3 layers, K=512),
random weights, with the BPE tokenizer trained on the processed training split
(data/processed/stage_one/train.parquet; synthetic text if it is missing). Timed:
`eric.generate.sampler.sample_stage_one` (top-p 0.9, KV cache, tokenization and
decoding included) on test inputs, at batch 8 (16 inputs) and batch 1 (4 inputs).
The unit rate (`--unit-rate`): `real` (default) calibrates each model's logit bias on
<sent> so that it opens a unit every 17 tokens, the unit length of wikiplots-mini's
targets (and bench_model.py's synthetic training batches): a few sampling runs on the
batch-8 inputs with other seeds, each moving the bias by log(measured / wanted tokens
per unit), damped. `legacy`
is the earlier fixed bias for both models, log(V / 16) (P = 1/17 under uniform
logits; random logits are not uniform, so ERIC opens a unit about every 8 tokens,
twice the real rate, and plans twice as often). ERIC plans an entity and a state at
each unit, so more units are harder on ERIC. Tokens/s = generated stage-one tokens /
seconds; `tok/unit` = ERIC's generated tokens per unit in the timed runs; `ops/token` and
`syncs/token` = operators and host syncs dispatched per generated token in one more,
untimed call (not for the compiled step: torch.compile does not trace under the counter) (benchmarks/op_count.py: what a decoding step at this size is bound by, and
what no host noise moves).
Goal (issue 17): ERIC / BART >= 0.95 at both batch sizes. `--decode-steps` times each
`sample.decode_step` (dynamic: growing KV cache; static: fixed shapes; compiled: the static
step through torch.compile, whose first call, the warm-up, compiles); the dynamic step's
figures keep their names (`eric_tokens_per_s_batch8`), the others gain the step's
(`eric_tokens_per_s_batch8_compiled`).

Stage overhead (`--stage`, on by default): what `stages/sample.py` does around the
model calls, for the eric variant: read the test inputs and the training names
(Parquet), load both models from disk (saved here to a temporary folder; the mention
model is a random BART at the same preset), `sample_stories` (tokenization, stage one,
stage two, decoding, merge) and write the samples Parquet. Both models' `generate`
methods are wrapped to time the raw calls; the rest is the stage's own overhead.
Model loading is shown apart (a fixed cost, amortized over the whole split).
Goal: stage / raw generate calls <= 1.10.

Medians over --runs after one warm-up, the two models alternating so that host noise
hits both alike. `--clock process` (CPU time) is steadier on a shared host; on 2 busy
cores one thread ran ~5x faster than two (spin-waits), hence the default.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

from eric.config import DECODE_STEPS, ModelParams, PROJECT_ROOT
from eric.data.tokenizer import special_token_ids, train_bpe
from eric.config import MentionsParams
from eric.generate.inputs import read_inputs
from eric.generate.loading import load_mentions, load_stage_one
from eric.generate.merge import NamePool
from eric.generate.sampler import SamplingOptions, sample_stage_one, sample_stories
from eric.generate.schema import write_samples
from eric.model.variants import build_model
from eric.train.mentions import build_mentions_model
from bench_model import sample_key
from op_count import OpCounter
from record import record

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


def calibrate(model, tokenizer, inputs: list[str], unit_length: int, new_tokens: int, rounds: int = 6) -> float:
    """Move the <sent> bias until the model opens a unit about every `unit_length` tokens.

    Rates are small, so P(<sent>) ~ exp(bias) x const: each round (fresh seed) adds
    log(measured / wanted tokens per unit), damped, as sampling noise is ~10% a round.
    Returns the tokens per unit of a last run with the final bias."""
    sent = special_token_ids(tokenizer, 100).sent
    enc = tokenizer(inputs, return_tensors="pt", padding=True, truncation=True, max_length=128)

    def tokens_per_unit(seed: int) -> float:
        out = model.generate(enc["input_ids"], enc["attention_mask"], max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, top_p=0.9, generator=torch.Generator().manual_seed(seed))
        generated = out.sequences[:, 3:]  # after </s> <s> <sent>
        return generated.numel() / max(int((generated == sent).sum()), 0.25)  # no unit: push hard

    for seed in range(rounds):
        step = math.log(tokens_per_unit(100 + seed) / unit_length)
        with torch.no_grad():
            model.final_logits_bias[0, sent] += step if seed < 2 else 0.5 * step
    return tokens_per_unit(100 + rounds)


def timed(clock, fn):
    start = clock()
    result = fn()
    return clock() - start, result


class GenerateTimer:
    """Stands in for a model's `generate` and adds up the clock time spent inside it."""

    def __init__(self, model, clock):
        self.inner, self.clock, self.seconds = model.generate, clock, 0.0
        model.generate = self  # an instance attribute shadows the method

    def __call__(self, *args, **kwargs):
        start = self.clock()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.seconds += self.clock() - start


def stage_inputs(folder: Path, inputs: list[str]) -> tuple[Path, Path | None]:
    """(the inputs file, the training split for the names) as the stage reads them."""
    if (DATA / "test.parquet").is_file() and (DATA / "train.parquet").is_file():
        return DATA / "test.parquet", DATA / "train.parquet"
    path = folder / "inputs.txt"
    path.write_text("\n".join(inputs) + "\n", encoding="utf-8")
    return path, None


def stage_run(folder: Path, inputs_path: Path, train: Path | None, n: int, options, clock) -> dict[str, float]:
    """One run of the sample stage's work; seconds per part."""
    start = clock()
    inputs = read_inputs(inputs_path, n)
    names = []
    if train is not None:
        mentions = pq.read_table(train, columns=["mentions"]).column("mentions").to_pylist()
        names = [m["mention"] for row in mentions for m in row or []]
    loading = clock()
    model, tokenizer = load_stage_one(folder / "stage_one")
    mention_model, mention_tokenizer = load_mentions(folder / "mentions")
    loaded = clock()
    timers = [GenerateTimer(model, clock), GenerateTimer(mention_model, clock)]
    rows = sample_stories(inputs, model, tokenizer, options, mention_model, mention_tokenizer,
                          NamePool(names, seed=options.seed))
    write_samples(rows, folder / "samples.parquet", {"options": options.as_dict()})
    end = clock()
    generate = sum(t.seconds for t in timers)
    return {"stage": (loading - start) + (end - loaded), "load": loaded - loading, "generate": generate,
            "stage_one": timers[0].seconds, "stage_two": timers[1].seconds}


def stage_overhead(size: str, eric, tokenizer, inputs: list[str], runs: int, new_tokens: int, clock) -> None:
    torch.manual_seed(0)
    mentions = build_mentions_model(MentionsParams(size=size), tokenizer).eval()
    options = SamplingOptions(batch_size=8, max_length=new_tokens, mention_max_length=new_tokens,
                              progress=False, seed=1)
    n = 16
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, m in (("stage_one", eric), ("mentions", mentions)):
            m.save_pretrained(folder / name)
            tokenizer.save_pretrained(folder / name)
        inputs_path, train = stage_inputs(folder, inputs)
        results = [stage_run(folder, inputs_path, train, n, options, clock) for _ in range(runs + 1)][1:]
    part = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(f"sample stage, eric variant, {n} inputs, batch 8, {new_tokens} + {new_tokens} new tokens "
          f"(median of {runs}): stage {part['stage']:.2f}s, of it raw generate {part['generate']:.2f}s "
          f"(stage one {part['stage_one']:.2f}s, stage two {part['stage_two']:.2f}s); "
          f"overhead (I/O, tokenization, decoding, merge) {part['stage'] - part['generate']:.2f}s, "
          f"stage / generate {part['stage'] / part['generate']:.3f} (goal <= 1.10); "
          f"loading both models {part['load']:.2f}s apart")


def count_operators(models: dict, tokenizer, inputs: list[str], options) -> tuple[dict, dict]:
    """Operators and host syncs per generated token of one untimed sampling call of each model
    (benchmarks/op_count.py: a proxy no host noise moves)."""
    ops, syncs = {}, {}
    if options.decode_step == "compiled":  # torch.compile refuses to trace under a dispatch mode (the counter)
        return {v: math.nan for v in models}, {v: math.nan for v in models}
    for variant, m in models.items():
        with OpCounter() as counter:
            samples = sample_stage_one(m, tokenizer, inputs, options)
        tokens = sum(s.tokens for s in samples)
        ops[variant], syncs[variant] = counter.total / tokens, counter.syncs / tokens
    return ops, syncs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny", choices=["tiny", "base"])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)  # 2 busy cores: 1 thread is ~5x faster
    parser.add_argument("--clock", default="wall", choices=["wall", "process"])
    parser.add_argument("--no-stage", dest="stage", action="store_false", help="skip the stage-overhead run")
    parser.add_argument("--decode-steps", nargs="+", default=["dynamic"], choices=DECODE_STEPS,
                        help="sample.decode_step values to time (the first run of each compiles a compiled step)")
    parser.add_argument("--unit-rate", default="real", choices=["real", "legacy"],
                        help="real: a unit every 17 tokens (calibrated); legacy: the earlier fixed bias (~every 8)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.perf_counter if args.clock == "wall" else time.process_time

    corpus, inputs = texts()
    tokenizer = train_bpe(corpus, vocab_size=8000, max_entities=100)
    sent_bias = math.log(len(tokenizer) / (UNIT_LENGTH - 1))  # P(<sent>) ~ 1/17 under uniform logits
    models = {v: model(args.size, v, tokenizer, sent_bias) for v in ("eric", "bart")}
    if args.unit_rate == "real":  # calibration seeds differ from the timed ones
        reached = {v: calibrate(m, tokenizer, inputs[:16], UNIT_LENGTH, args.new_tokens) for v, m in models.items()}
        print("calibrated <sent> bias (timed inputs, other seeds): tokens per unit "
              + ", ".join(f"{v} {length:.1f}" for v, length in reached.items()))
    print(f"{args.size} preset, vocab {len(tokenizer)}, {args.new_tokens} new tokens, top-p 0.9, "
          f"{args.threads} threads, {args.clock} clock, median of {args.runs}, unit rate {args.unit_rate}")
    print(f"{'step':>9} {'batch':>5} {'inputs':>6} {'ERIC tok/s':>11} {'BART tok/s':>11} {'units/text':>10} {'tok/unit':>8} "
          f"{'ratio':>6} {'ops/token E/B':>14} {'syncs/token E/B':>16}")
    figures: dict = {"size": args.size, "clock": args.clock}
    for step, (batch, n) in itertools.product(args.decode_steps, ((8, 16), (1, 4))):
        options = SamplingOptions(batch_size=batch, max_length=args.new_tokens, progress=False, seed=1,
                                  decode_step=step)
        speeds: dict[str, list[float]] = {v: [] for v in models}
        units, tokens = 0.0, 0.0
        for run in range(args.runs + 1):  # run 0 warms up
            for variant, m in models.items():
                seconds, samples = timed(clock, lambda: sample_stage_one(m, tokenizer, inputs[:n], options))
                if run:
                    speeds[variant].append(sum(s.tokens for s in samples) / seconds)
                if variant == "eric":
                    units = statistics.mean(len(s.unit_entities) for s in samples)
                    tokens = statistics.mean(s.tokens for s in samples)
        eric, bart = (statistics.median(speeds[v]) for v in ("eric", "bart"))
        ops, syncs = count_operators(models, tokenizer, inputs[:n], options)
        print(f"{step:>9} {batch:>5} {n:>6} {eric:>11.0f} {bart:>11.0f} {units:>10.1f} {tokens / max(units, 1):>8.1f} "
              f"{eric / bart:>6.3f} {ops['eric']:>6.0f} / {ops['bart']:<5.0f} {syncs['eric']:>7.2f} / {syncs['bart']:<6.2f}")
        key = sample_key(batch, step)
        figures.update({f"eric_tokens_per_s_{key}": round(eric), f"bart_tokens_per_s_{key}": round(bart),
                        f"ratio_{key}": round(eric / bart, 3)})
    record("bench_sample", figures)
    if args.stage:
        stage_overhead(args.size, models["eric"], tokenizer, inputs, args.runs, args.new_tokens, clock)


if __name__ == "__main__":
    main()
