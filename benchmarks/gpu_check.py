"""The GPU path, ERIC and BART side by side: training, memory, MFU, DeepSpeed, sampling, CPU reload.

    python benchmarks/gpu_check.py [--size base] [--steps 20] [--warmup 5] [--batch 16]
                                   [--sample-batches 1 32] [--sample-tokens 128]
                                   [--decode-steps dynamic compiled] [--out FILE.json]

(benchmarks/gpu_check.sh runs it with the figures README asks for.) On a CUDA machine
it trains with DeepSpeed twice: the recipe `deepspeed_config: auto` picks for one GPU
(`infra/deepspeed/gpu_bf16.json`: ZeRO 0, fp32 weights, bf16 autocast) and ZeRO-2 with bf16
weights (`gpu_bf16_zero2.json`, what `auto` picks for several ranks); on CPU the same code
runs with the CPU configs (that is how the test runs it, at a toy size). For ERIC (every mechanism) and BART
(transformers' BartForConditionalGeneration of the same dimensions), on bench_model.py's
synthetic batches (128 source + 256 target tokens, a unit every 17 tokens, 73% of units
with an entity):

  train        tokens/s (source + target) of our DeepSpeed Trainer (both recipes) and of a
               plain torch loop (AdamW, bf16 autocast, clipping) on the same batches: medians
               of the steps after --warmup; each recipe / plain as a ratio
  memory       peak CUDA memory of each loop (torch.cuda.max_memory_allocated)
  MFU          model FLOPs per step (forward + backward, counted by torch's FlopCounterMode
               on one batch) x steps/s / the card's peak dense bf16 FLOP/s (--peak-tflops,
               else a table of known cards; none on CPU)
  sampling     tokens/s of `generate` (top-p 0.9, KV cache, exactly --sample-tokens new
               tokens) at each --sample-batches size, bf16 autocast on CUDA: the median of
               --sample-repeats calls after one call of the same length (cuDNN builds an
               attention plan for each new key length: a short warm-up leaves that cost in
               whichever model is timed first; it made ERIC look 7x slower on an H100),
               on each of --decode-steps (sample.decode_step: `dynamic`, the growing KV
               cache; `compiled`, fixed-shape caches and a torch.compile'd step with CUDA
               graphs: ERIC's eric/model/static_decoding.py, transformers' static cache
               and compiled forward for BART); keys `..._batch32` and `..._batch32_compiled`
  reload       the DeepSpeed-trained weights saved with `Trainer.save_pretrained` (fp32
               masters, safetensors), loaded in fp32 on the training device and on CPU:
               the two give the same loss on a batch (1e-3 relative), close to the trained
               module's own (bf16 on GPU; 5e-2), and the CPU model samples

Prints one table and, with --out, writes every figure as JSON. Exit status 1 if a
reload check fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import BartForConditionalGeneration

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model import (  # noqa: E402
    SENT, bart_config, eric_config, generate, plain_step, sample_key, synthetic_batch)

from eric.model import EricForConditionalGeneration  # noqa: E402
from eric.config import DECODE_STEPS  # noqa: E402
from eric.train.engine import build_optimizer  # noqa: E402
from eric.train.codebook import codebook_hooks  # noqa: E402
from eric.train.loop import LoopSettings, Trainer  # noqa: E402
from eric.train.runtime import device_kind  # noqa: E402

# peak dense bf16 tensor FLOP/s by device name (vendor data sheets, no sparsity)
PEAK_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H100": 756.0,
               "A100": 312.0, "L40S": 362.0, "A10G": 70.0, "L4": 121.0}
BART_KEYS = ("input_ids", "attention_mask", "labels")


def build(name: str, size: str, vocab: int) -> torch.nn.Module:
    torch.manual_seed(0)
    config = eric_config(size, vocab)
    if name == "eric":
        return EricForConditionalGeneration(config)
    return BartForConditionalGeneration(bart_config(config))


def examples(name: str, n: int, args) -> list[dict]:
    """`n` rows of one synthetic batch (padded alike, so any slice stacks)."""
    batch = synthetic_batch(n, args.src, args.tgt, args.vocab)
    keys = BART_KEYS if name == "bart" else batch.keys()
    return [{k: batch[k][i] for k in keys} for i in range(n)]


def collate(rows: list[dict]) -> dict:
    return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def reset_peak() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib() -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None


def step_flops(model: torch.nn.Module, batch: dict, bf16: bool) -> int:
    """FLOPs of one forward + backward (matmuls and attention, as FlopCounterMode counts them)."""
    device = device_kind()
    with FlopCounterMode(display=False) as counter:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def plain_loop(name: str, data: list[dict], args, bf16: bool, model: torch.nn.Module | None = None) -> dict:
    """Hand-written loop (`args.steps` steps, of a fresh model unless given one): seconds per
    step, peak memory, FLOPs per step."""
    device = device_kind()
    model = (model or build(name, args.size, args.vocab)).to(device).train()
    optimizer, scheduler = build_optimizer(model, 1e-4, 0.01, total_steps=args.steps)
    batches = [{k: v.to(device) for k, v in collate(data[i * args.batch:(i + 1) * args.batch]).items()}
               for i in range(args.steps)]
    flops = step_flops(model, batches[0], bf16)
    reset_peak()
    durations = []
    for batch in batches:
        synchronize()
        start = time.perf_counter()
        plain_step(model, batch, optimizer, scheduler, device, bf16)
        synchronize()
        durations.append(time.perf_counter() - start)
    return {"seconds": durations, "peak_gib": peak_gib(), "flops": flops}


def deepspeed_loop(name: str, data: list[dict], args, folder: Path, config: str = "auto") -> tuple[dict, Trainer]:
    """Our Trainer (DeepSpeed, `deepspeed_config` = `config`): seconds per step, peak memory."""
    settings = LoopSettings(micro_batch_size=args.batch, max_steps=args.steps, checkpoint_every=10**9,
                            log_every=10**9, eval_at_start=False, length_grouping=False, progress=False, lr=1e-4,
                            deepspeed_config=config)
    marks: list[float] = []

    def mark(_trainer) -> None:
        synchronize()
        marks.append(time.perf_counter())

    reset_peak()
    model = build(name, args.size, args.vocab)
    trainer = Trainer(model, settings, train_set=data, collate_fn=collate, hooks=codebook_hooks(model),
                      checkpoint_dir=folder / f"{name}-{Path(config).stem}-checkpoints", on_step_end=mark)
    synchronize()
    marks.append(time.perf_counter())
    trainer.fit()
    return {"seconds": [b - a for a, b in zip(marks, marks[1:])], "peak_gib": peak_gib()}, trainer


def sampling_speed(model, batch_size: int, args, bf16: bool, decode_step: str = "dynamic") -> tuple[float, float]:
    """(new tokens/s, new tokens per <sent>) of `generate` at one batch size on one decoding step:
    the median of --sample-repeats calls after one warm-up call of the same length (which also
    compiles a compiled step)."""
    source = synthetic_batch(batch_size, args.src, args.tgt, args.vocab)["input_ids"].to(device_kind())
    model.eval()

    def run() -> float:
        synchronize()
        start = time.perf_counter()
        run.sequences = generate(model, source, args.sample_tokens, bf16=bf16, decode_step=decode_step)
        synchronize()
        return time.perf_counter() - start

    run()  # warm-up at full length: cuDNN builds an attention plan per new key length
    seconds = statistics.median(run() for _ in range(args.sample_repeats))
    units = int((run.sequences == SENT).sum())  # ERIC's planning cost grows with the units it opens
    return batch_size * args.sample_tokens / seconds, batch_size * args.sample_tokens / max(units, 1)


def reload_on_cpu(name: str, trainer: Trainer, data: list[dict], folder: Path) -> dict:
    """Save the trained weights; the file loaded on the training device (fp32) and on CPU
    gives the same loss, close to the trained module's own (bf16 on GPU); the CPU model samples."""
    out = trainer.save_pretrained(folder / f"{name}-final")
    cls = EricForConditionalGeneration if name == "eric" else BartForConditionalGeneration
    device = device_kind()
    batch = collate(data[:2])
    losses = {}
    with torch.no_grad():
        module = trainer.engine.module.eval()
        losses["trained"] = module(**{k: v.to(module.device) for k, v in batch.items()}).loss.item()
        for where in dict.fromkeys([device, "cpu"]):
            model = cls.from_pretrained(out, local_files_only=True).to(where).eval()
            losses[where] = model(**{k: v.to(where) for k, v in batch.items()}).loss.item()
        tokens = 8
        sample = generate(model, batch["input_ids"][:1], tokens)
    close = lambda a, b, rel: abs(a - b) <= rel * max(1.0, abs(a))  # noqa: E731
    return {"trained_loss": losses["trained"], "device_loss": losses[device], "cpu_loss": losses["cpu"],
            "loss_ok": close(losses[device], losses["cpu"], 1e-3) and close(losses["trained"], losses["cpu"], 5e-2),
            "samples_ok": sample.shape[1] >= tokens}


def peak_tflops(args) -> float | None:
    if args.peak_tflops:
        return args.peak_tflops
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def median_rate(seconds: list[float], warmup: int, tokens: int) -> float:
    return tokens / statistics.median(seconds[warmup:] or seconds)


def check(name: str, args, folder: Path, bf16: bool, peak: float | None) -> dict:
    data = examples(name, args.steps * args.batch, args)
    tokens = args.batch * (args.src + args.tgt)
    loops = {"plain": plain_loop(name, data, args, bf16)}
    loops["zero2"], zero2 = deepspeed_loop(name, data, args, folder, args.zero2_config)
    del zero2
    loops["deepspeed"], trainer = deepspeed_loop(name, data, args, folder)  # `auto`, kept for the checks below
    flops = loops["plain"]["flops"]
    result = {"params_m": sum(p.numel() for p in trainer.engine.module.parameters()) / 1e6,
              "step_tflop": flops / 1e12}
    for loop, figures in loops.items():
        result[f"{loop}_tokens_per_s"] = median_rate(figures["seconds"], args.warmup, tokens)
        result[f"{loop}_peak_gib"] = figures["peak_gib"]
        steps_per_s = result[f"{loop}_tokens_per_s"] / tokens
        result[f"{loop}_mfu"] = flops * steps_per_s / (peak * 1e12) if peak else None
    result["deepspeed_vs_plain"] = result["deepspeed_tokens_per_s"] / result["plain_tokens_per_s"]
    result["zero2_vs_plain"] = result["zero2_tokens_per_s"] / result["plain_tokens_per_s"]
    model = trainer.engine.module
    for step in args.decode_steps:
        for size in args.sample_batches:
            key = sample_key(size, step)
            result[f"sample_tokens_per_s_{key}"], result[f"sample_tokens_per_unit_{key}"] = \
                sampling_speed(model, size, args, bf16, step)
    result["reload"] = reload_on_cpu(name, trainer, data, folder)
    del trainer
    return result


def report(results: dict, meta: dict) -> None:
    print(f"device {meta['device']}, size {meta['size']}, batch {meta['batch']} x ({meta['src']} + {meta['tgt']}) "
          f"tokens, bf16 {meta['bf16']}, {meta['steps']} steps (median after {meta['warmup']}), "
          f"peak {meta['peak_tflops']} TFLOP/s")
    fmt = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
    rows = [("params (M)", "params_m", ".1f"), ("train tok/s, plain torch", "plain_tokens_per_s", ",.0f"),
            ("train tok/s, DeepSpeed auto", "deepspeed_tokens_per_s", ",.0f"),
            ("train tok/s, DeepSpeed ZeRO-2", "zero2_tokens_per_s", ",.0f"),
            ("DeepSpeed auto / plain", "deepspeed_vs_plain", ".3f"), ("ZeRO-2 / plain", "zero2_vs_plain", ".3f"),
            ("peak GiB, plain", "plain_peak_gib", ".2f"), ("peak GiB, DeepSpeed auto", "deepspeed_peak_gib", ".2f"),
            ("peak GiB, ZeRO-2", "zero2_peak_gib", ".2f"), ("TFLOP per step", "step_tflop", ".3f"),
            ("MFU, plain", "plain_mfu", ".1%"), ("MFU, DeepSpeed auto", "deepspeed_mfu", ".1%"),
            ("MFU, ZeRO-2", "zero2_mfu", ".1%")]
    for step in meta.get("decode_steps", ["dynamic"]):
        for b in meta["sample_batches"]:
            key = sample_key(b, step)
            rows += [(f"sample tok/s, batch {b}, {step}", f"sample_tokens_per_s_{key}", ",.0f"),
                     (f"  new tokens per <sent>, batch {b}", f"sample_tokens_per_unit_{key}", ",.1f")]
    print(f"{'':28} {'ERIC':>12} {'BART':>12} {'ERIC/BART':>10}")
    for label, key, spec in rows:
        e, b = results["eric"][key], results["bart"][key]
        ratio = fmt(e / b if e is not None and b else None, ".3f")
        print(f"{label:28} {fmt(e, spec):>12} {fmt(b, spec):>12} {ratio:>10}")
    for name, r in results.items():
        reload = r["reload"]
        print(f"{name}: saved on {meta['device']}, loaded on CPU: loss trained {reload['trained_loss']:.5f}, "
              f"reloaded on the device {reload['device_loss']:.5f}, on CPU {reload['cpu_loss']:.5f} "
              f"({'ok' if reload['loss_ok'] else 'MISMATCH'}), "
              f"CPU sample {'ok' if reload['samples_ok'] else 'FAILED'}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="base", choices=["tiny", "base"])
    parser.add_argument("--vocab", type=int, default=50265 + 101, help="bart-base's vocabulary + ERIC's tokens")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--src", type=int, default=128)
    parser.add_argument("--tgt", type=int, default=256)
    parser.add_argument("--sample-batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--sample-tokens", type=int, default=128)
    parser.add_argument("--sample-repeats", type=int, default=3, help="timed calls per batch size (median)")
    parser.add_argument("--decode-steps", nargs="+", default=["dynamic", "compiled"], choices=DECODE_STEPS,
                        help="the sampling steps timed (sample.decode_step; compiled: CUDA graphs on CUDA)")
    parser.add_argument("--zero2-config", default=None,
                        help="the ZeRO-2 recipe timed beside `auto` (default: gpu_bf16_zero2.json on CUDA, "
                             "cpu_zero2.json on CPU)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the card's peak dense bf16 TFLOP/s")
    parser.add_argument("--models", nargs="+", default=["eric", "bart"], choices=["eric", "bart"])
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    bf16 = torch.cuda.is_available()  # the GPU recipe; CPU stays in fp32 (no native bf16 on our CPUs)
    args.zero2_config = args.zero2_config or f"infra/deepspeed/{'gpu_bf16_zero2' if bf16 else 'cpu_zero2'}.json"
    meta = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "size": args.size,
            "batch": args.batch, "src": args.src, "tgt": args.tgt, "bf16": bf16, "steps": args.steps,
            "warmup": args.warmup, "peak_tflops": peak_tflops(args), "sample_batches": args.sample_batches,
            "decode_steps": args.decode_steps, "sample_tokens": args.sample_tokens, "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: check(name, args, Path(tmp), bf16, meta["peak_tflops"]) for name in args.models}
    if set(results) == {"eric", "bart"}:
        report(results, meta)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    return {"meta": meta, "results": results}


if __name__ == "__main__":
    figures = main()
    reloads = [r["reload"] for r in figures["results"].values()]
    sys.exit(0 if all(r["loss_ok"] and r["samples_ok"] for r in reloads) else 1)
