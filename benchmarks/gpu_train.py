"""Training throughput at the data's real shape: token-budget batches, eager vs compiled.

    python benchmarks/gpu_train.py [--size base] [--micro-tokens 16384] [--accum 2]
                                   [--steps 12] [--warmup 4] [--modes eager compiled] [--out FILE.json]

gpu_check.py times full-length synthetic rows (16 x (128 + 256) tokens); this script times
what a run on the corpus does. It encodes the processed training split
(`data/processed/stage_one/train.parquet`) with the project's tokenizer and collator
(`models/tokenizer`, lengths 128 + 512, the paper's), sorts the rows by length, and packs
micro-batches up to --micro-tokens padded tokens (source + target), --accum of them a step.
For ERIC and BART (transformers' BartForConditionalGeneration of the same dimensions) it
runs a plain loop (AdamW, fused on CUDA; bf16 autocast on CUDA; clipping) eagerly and with
`nn.Module.compile` (what `train.compile: true` does), and reports:

  tokens/s      real (non-padding) source + target tokens per second: median over the steps
                after --warmup (compilation happens in the warm-up)
  padding       padded tokens that are padding, over the timed steps
  MFU (count)   FLOPs of the timed steps' forward + backward, counted by torch's
                FlopCounterMode on every micro-batch shape, x steps/s / the card's peak
  MFU (6N)      the rule of thumb: 6 x parameters x real tokens per second / the card's peak
  ops, syncs    operators and host syncs of one eager training step (forward + backward) on
                one micro-batch of a step whose row is not logged, counted below autograd
                (benchmarks/op_count.py): the CPU proxy of host overhead
  graph breaks  where `compiled` runs: the graph breaks torch.compile recorded (0 = one graph)
  graphs        graphs compiled over the run's distinct micro-batch shapes: the batches go
                through `symbolic_shapes` (eric/train/engine.py), as the Trainer's do, so one
                graph serves every shape (two where a lone-row batch comes up)

With --compile-cap S each compiled model runs in a child process stopped after S seconds,
and its figures read "did not finish" rather than the run being lost.

Figures are written to --out after each model and mode (eager ones first), so a run cut
short keeps what it measured. On CPU it runs at a toy size (that is how the test runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import torch
import torch._dynamo
from torch.utils.flop_counter import FlopCounterMode
from transformers import BartForConditionalGeneration

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model import bart_config  # noqa: E402
from gpu_check import BART_KEYS, peak_gib, peak_tflops, reset_peak, synchronize  # noqa: E402
from op_count import OpCounter  # noqa: E402

from eric.config import ModelParams  # noqa: E402
from eric.data.collate import StageOneCollator  # noqa: E402
from eric.data.tokenizer import load_tokenizer, special_token_ids  # noqa: E402
from eric.model import EricForConditionalGeneration  # noqa: E402
from eric.model.variants import build_config  # noqa: E402
from eric.train.data_order import token_budget_batches  # noqa: E402
from eric.train.engine import COMPILED_PAD_MULTIPLE, build_optimizer, compile_in_place, symbolic_shapes  # noqa: E402
from eric.train.runtime import avoid_per_shape_attention_plans, device_kind  # noqa: E402



def encode_split(split: Path, tokenizer, max_source: int, max_target: int, limit: int | None,
                 pad_multiple: int = 1) -> list:
    """The split's rows as the collator encodes them (EncodedRow), in file order."""
    rows = pq.read_table(split).to_pylist()[:limit]
    collator = StageOneCollator(tokenizer, max_source, max_target, pad_multiple=pad_multiple)
    return [collator.encode(row) for row in rows], collator


def token_batches(encoded: list, micro_tokens: int) -> list[list[int]]:
    """Row indices per micro-batch, packed to at most `micro_tokens` padded tokens."""
    return token_budget_batches([(len(r.source), len(r.labels)) for r in encoded], micro_tokens)


def steps_of(batches: list[list[int]], accum: int, n_steps: int, seed: int = 0) -> list[list[list[int]]]:
    """`n_steps` optimizer steps of `accum` micro-batches, drawn in a seeded order (cycling)."""
    order = torch.randperm(len(batches), generator=torch.Generator().manual_seed(seed)).tolist()
    picks = [batches[order[k % len(order)]] for k in range(n_steps * accum)]
    return [picks[s * accum:(s + 1) * accum] for s in range(n_steps)]


def build(name: str, size: str, vocab: int, ids) -> torch.nn.Module:
    """The model as the Trainer steps it between logged rows (ERIC: no diagnostic that syncs)."""
    torch.manual_seed(0)
    config = build_config(ModelParams(size=size), "eric", vocab, ids)
    if name != "eric":
        return BartForConditionalGeneration(bart_config(config))
    return EricForConditionalGeneration(config)


def to_device(batch: dict, name: str) -> dict:
    keys = BART_KEYS if name == "bart" else batch
    return {k: batch[k].to(device_kind(), non_blocking=True) for k in keys}


def micro_flops(model, batch: dict, bf16: bool) -> Counter:
    """FLOPs of one micro-step (forward + backward): `total`, the `sentence_encoder`'s and
    its self-attention's alone (`sentence_attention`: the block-diagonal attention over the
    whole target, projections excluded). Works on the meta device (benchmarks/bench_flops.py)."""
    with FlopCounterMode(display=False) as counter:
        with torch.autocast(device_kind(), dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
    model.zero_grad(set_to_none=True)
    per_module = counter.get_flop_counts()
    encoder = next((m for m in per_module if m.endswith(".sentence_encoder")), None)
    attention = sum(flops for module, ops in per_module.items()
                    if encoder and module.startswith(f"{encoder}.layers.") and module.endswith(".self_attn")
                    for op, flops in ops.items() if "scaled_dot_product" in str(op) or "bmm" in str(op))
    return Counter(total=counter.get_total_flops(), sentence_encoder=sum(per_module.get(encoder, {}).values()),
                   sentence_attention=attention)


def step_flops(model, batches: list[list[dict]], bf16: bool) -> dict:
    """Mean FLOPs of an optimizer step over `batches` (steps of micro-batches), and the
    sentence encoder's shares of them (ERIC's)."""
    flops = sum((micro_flops(model, micro, bf16) for step in batches for micro in step), Counter())
    out = {"step_flops": flops["total"] / len(batches)}
    if flops["sentence_encoder"]:
        out["sentence_encoder_flop_share"] = flops["sentence_encoder"] / flops["total"]
        out["sentence_attention_flop_share"] = flops["sentence_attention"] / flops["total"]
    return out


def eager_step_counts(model, batch: dict) -> dict:
    with OpCounter() as counter:
        model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)
    return {"ops_per_micro_step": counter.total, "syncs_per_micro_step": counter.syncs}


def graph_breaks() -> int:
    return sum(torch._dynamo.utils.counters["graph_break"].values())


def graphs_compiled() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def run_mode(name: str, mode: str, steps: list, collator, encoded: list, args, bf16: bool) -> dict:
    model = build(name, args.size, args.vocab, collator.ids).to(device_kind()).train()
    optimizer, _ = build_optimizer(model, 1e-4, 0.0, total_steps=len(steps))
    batches = [[to_device(collator.pad([encoded[i] for i in micro]), name) for micro in step]
               for step in steps]
    result = {}
    if mode == "eager":
        result.update(eager_step_counts(model, batches[0][0]))
    else:
        torch._dynamo.reset()
        breaks_before, graphs_before = graph_breaks(), graphs_compiled()  # counters outlive reset(): this run's own
        compile_in_place(model, args.backend)
        batches = [[symbolic_shapes(b) for b in step] for step in batches]
    reset_peak()
    durations = []
    for step in batches:
        synchronize()
        start = time.perf_counter()
        for batch in step:
            with torch.autocast(device_kind(), dtype=torch.bfloat16, enabled=bf16):
                loss = model(**batch).loss / len(step)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize()
        durations.append(time.perf_counter() - start)
    timed = steps[args.warmup:] or steps
    real = sum(int((b["attention_mask"] != 0).sum()) + int((b["labels"] != -100).sum())
               for step in batches[args.warmup:] or batches for b in step)
    slots = sum(int(b["input_ids"].numel() + b["labels"].numel()) for step in batches[args.warmup:] or batches
                 for b in step)
    seconds = statistics.median(durations[args.warmup:] or durations)
    result.update({"step_seconds": seconds, "tokens_per_step": real / len(timed),
                   "tokens_per_s": real / len(timed) / seconds, "padding": 1 - real / slots,
                   "peak_gib": peak_gib(), "first_step_seconds": durations[0]})
    if mode == "compiled":
        result["graph_breaks"] = graph_breaks() - breaks_before
        result["graphs_compiled"] = graphs_compiled() - graphs_before
        result["micro_batch_shapes"] = len({tuple(b["labels"].shape) + tuple(b["input_ids"].shape)
                                            for step in batches for b in step})
    return result, model


def add_mfu(result: dict, flops_per_step: float, params: int, peak: float | None) -> None:
    steps_per_s = 1 / result["step_seconds"]
    result["step_tflop"] = flops_per_step / 1e12
    result["mfu_count"] = flops_per_step * steps_per_s / (peak * 1e12) if peak else None
    result["mfu_6n"] = 6 * params * result["tokens_per_s"] / (peak * 1e12) if peak else None


def check(name: str, mode: str, args, collator, encoded, steps, bf16: bool, figures: dict) -> None:
    """Time one model in one mode and add its figures (MFU from the FLOPs counted once per model)."""
    results = figures["results"].setdefault(name, {})
    result, model = run_mode(name, mode, steps, collator, encoded, args, bf16)
    if "step_flops" not in results:  # counted on the module as built: compiling changes no arithmetic
        timed = steps[args.warmup:] or steps
        results.update(step_flops(model, [[to_device(collator.pad([encoded[i] for i in micro]),
                                                     name) for micro in step] for step in timed], bf16))
        results["params_m"] = sum(p.numel() for p in model.parameters()) / 1e6
    add_mfu(result, results["step_flops"], int(results["params_m"] * 1e6), figures["meta"]["peak_tflops"])
    results[mode] = result
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
    print(f"{name} {mode}: {result['tokens_per_s']:,.0f} tokens/s, padding {result['padding']:.1%}, "
          f"first step {result['first_step_seconds']:.1f} s", flush=True)


def capped(name: str, args, figures: dict) -> None:
    """The compiled run of one model in a child process of its own session, stopped (with the
    compile workers it started) after --compile-cap seconds: "did not finish" is recorded
    instead of losing the figures measured so far."""
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "part.json"
        child = subprocess.Popen([sys.executable, __file__, *child_argv(args, name, part)], start_new_session=True)
        try:
            child.wait(timeout=args.compile_cap)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            result = {"status": "did not finish", "compile_cap_s": args.compile_cap}
            print(f"{name} compiled: did not finish within {args.compile_cap:.0f} s", flush=True)
        else:
            ran = json.loads(part.read_text())["results"][name] if child.returncode == 0 else {}
            figures["results"].setdefault(name, {}).update({k: v for k, v in ran.items() if k != "compiled"})
            result = ran.get("compiled", {"status": f"failed (exit {child.returncode})"})
    figures["results"].setdefault(name, {})["compiled"] = result
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))


def child_argv(args, name: str, out: Path) -> list[str]:
    """This run's settings for one model's compiled run, without the cap."""
    argv = ["--size", args.size, "--vocab", str(args.vocab), "--split", str(args.split), "--tokenizer",
            str(args.tokenizer), "--max-source", str(args.max_source), "--max-target", str(args.max_target),
            "--micro-tokens", str(args.micro_tokens), "--accum", str(args.accum), "--pad-multiple",
            str(args.pad_multiple), "--steps", str(args.steps), "--warmup", str(args.warmup), "--backend",
            args.backend, "--modes", "compiled", "--models", name, "--out", str(out)]
    argv += ["--rows", str(args.rows)] if args.rows is not None else []
    argv += ["--peak-tflops", str(args.peak_tflops)] if args.peak_tflops is not None else []
    return argv + (["--cudnn-attention"] if args.cudnn_attention else [])


def report(figures: dict) -> None:
    meta, results = figures["meta"], figures["results"]
    print(f"device {meta['device']}, size {meta['size']}, {meta['micro_tokens']} padded tokens a micro-batch x "
          f"{meta['accum']}, {meta['steps']} steps (median after {meta['warmup']}), peak {meta['peak_tflops']} TFLOP/s")
    fmt = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
    rows = [("tokens/s", "tokens_per_s", ",.0f"), ("real tokens a step", "tokens_per_step", ",.0f"),
            ("padding", "padding", ".1%"), ("MFU (FLOP count)", "mfu_count", ".1%"), ("MFU (6N)", "mfu_6n", ".1%"),
            ("peak GiB", "peak_gib", ".2f"), ("ops / micro step", "ops_per_micro_step", ",.0f"),
            ("syncs / micro step", "syncs_per_micro_step", ",.0f"), ("graph breaks", "graph_breaks", ",.0f"),
            ("graphs compiled", "graphs_compiled", ",.0f"), ("micro-batch shapes", "micro_batch_shapes", ",.0f")]
    print(f"{'':24} {'mode':>9} {'ERIC':>12} {'BART':>12} {'ERIC/BART':>10}")
    for mode in meta["modes"]:
        for label, key, spec in rows:
            e, b = (results.get(n, {}).get(mode, {}).get(key) for n in ("eric", "bart"))
            if e is None and b is None:
                continue
            ratio = fmt(e / b if e is not None and b else None, ".3f")
            print(f"{label:24} {mode:>9} {fmt(e, spec):>12} {fmt(b, spec):>12} {ratio:>10}")
    for name in ("eric", "bart"):
        if status := results.get(name, {}).get("compiled", {}).get("status"):
            print(f"{name} compiled: {status}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="base", choices=["tiny", "base"])
    parser.add_argument("--vocab", type=int, default=50265 + 101, help="bart-base's vocabulary + ERIC's tokens")
    parser.add_argument("--split", type=Path, default=Path("data/processed/stage_one/train.parquet"))
    parser.add_argument("--tokenizer", type=Path, default=Path("models/tokenizer"))
    parser.add_argument("--max-source", type=int, default=128)
    parser.add_argument("--max-target", type=int, default=512)
    parser.add_argument("--rows", type=int, default=None, help="read only the split's first rows")
    parser.add_argument("--micro-tokens", type=int, default=16384, help="padded tokens per micro-batch, at most")
    parser.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
    parser.add_argument("--pad-multiple", type=int, default=COMPILED_PAD_MULTIPLE,
                        help="pad source, target and unit counts to a multiple of this (compiled training's)")
    parser.add_argument("--cudnn-attention", action="store_true",
                        help="let SDPA use cuDNN's kernels (the Trainer keeps it off: a plan per new shape)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--modes", nargs="+", default=["eager", "compiled"], choices=["eager", "compiled"])
    parser.add_argument("--backend", default="inductor", help="torch.compile backend of `compiled`")
    parser.add_argument("--compile-cap", type=float, default=None,
                        help="seconds a compiled model may take in all (compiling included); past it the run "
                             "records 'did not finish' for that model and goes on")
    parser.add_argument("--models", nargs="+", default=["bart", "eric"], choices=["eric", "bart"])
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    bf16 = torch.cuda.is_available()
    if not args.cudnn_attention:
        avoid_per_shape_attention_plans()
    tokenizer = load_tokenizer(args.tokenizer)
    encoded, collator = encode_split(args.split, tokenizer, args.max_source, args.max_target, args.rows,
                                     args.pad_multiple)
    steps = steps_of(token_batches(encoded, args.micro_tokens), args.accum, args.steps)
    figures = {"meta": {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                        "size": args.size, "micro_tokens": args.micro_tokens, "accum": args.accum,
                        "steps": args.steps, "warmup": args.warmup, "modes": args.modes, "backend": args.backend,
                        "pad_multiple": args.pad_multiple, "cudnn_attention": args.cudnn_attention,
                        "bf16": bf16, "fused_adamw": device_kind() == "cuda", "rows": len(encoded),
                        "peak_tflops": peak_tflops(args), "torch": torch.__version__},
               "results": {}}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    for mode in args.modes:  # every eager figure first: compiling ERIC is the longest part
        for name in args.models:
            if mode == "compiled" and args.compile_cap:
                capped(name, args, figures)
            else:
                check(name, mode, args, collator, encoded, steps, bf16, figures)
    report(figures)
    return figures


if __name__ == "__main__":
    main()
