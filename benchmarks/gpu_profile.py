"""Where GPU time goes: sampling ops per token, and the DeepSpeed recipe's training cost.

    python benchmarks/gpu_profile.py [--size base] [--sample-tokens 64] [--train-steps 20] [--steps 10]
                                     [--configs zero2_bf16 zero1_bf16 zero0_bf16 zero0_autocast]

Companion of gpu_check.py (same synthetic batches and models), for diagnosis:

  sampling   ERIC and BART `generate` at batch 1 (top-p 0.9, KV cache, bf16 autocast), after
             --train-steps plain steps (a random model hardly ever opens a unit): milliseconds
             per token and new tokens per <sent>, then one profiled call: host syncs
             (cudaStreamSynchronize, device-to-host copies) per token and the heaviest
             operators by host time
  training   our Trainer's tokens/s with each DeepSpeed recipe in --configs: infra/deepspeed's
             gpu_bf16_zero2.json (`zero2_bf16`) and gpu_bf16.json (`zero0_autocast`: fp32
             weights with bf16 autocast, like a plain loop), and the first at ZeRO 1 and 0

On CPU it runs at a toy size (the test does), without device tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model import generate  # noqa: E402
from gpu_check import (  # noqa: E402
    build, collate, deepspeed_loop, examples, median_rate, plain_loop, sampling_speed, synchronize,
)

from eric.train.ds_config import read_config  # noqa: E402
from eric.train.runtime import device_kind  # noqa: E402

ZERO2 = read_config("infra/deepspeed/gpu_bf16_zero2.json")  # the project's recipes, and two stages between
CONFIGS = {
    "zero2_bf16": ZERO2,
    "zero1_bf16": {**ZERO2, "zero_optimization": {"stage": 1}},
    "zero0_bf16": {**ZERO2, "zero_optimization": {"stage": 0}},
    "zero0_autocast": read_config("infra/deepspeed/gpu_bf16.json"),
}
SYNC_EVENTS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "Memcpy DtoH", "cudaMemcpy ")


def profile_sampling(name: str, args, bf16: bool) -> dict:
    device = device_kind()
    model = build(name, args.size, args.vocab).to(device)
    if args.train_steps:  # a trained model opens units at the data's rate; a random one hardly ever
        plain_loop(name, examples(name, args.train_steps * args.batch, args),
                   argparse.Namespace(**{**vars(args), "steps": args.train_steps}), bf16, model)
    tokens_per_s, tokens_per_unit = sampling_speed(model, 1, args, bf16)
    source = collate(examples("bart", 1, args))["input_ids"].to(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        generate(model, source, args.sample_tokens, bf16=bf16)
        synchronize()
    events = prof.key_averages()
    syncs = sum(e.count for e in events if any(s in e.key for s in SYNC_EVENTS))
    calls = sum(e.count for e in events if e.key.startswith("aten::"))
    ms_per_token = 1000 / tokens_per_s
    print(f"\n== sampling {name}: {ms_per_token:.2f} ms/token (median of {args.sample_repeats} x "
          f"{args.sample_tokens}), {tokens_per_unit:.1f} tokens per <sent>, aten calls/token "
          f"{calls / args.sample_tokens:.0f}, host syncs/token {syncs / args.sample_tokens:.2f}")
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=60))
    if device == "cuda":
        print(events.table(sort_by="self_cuda_time_total", row_limit=10, max_name_column_width=60))
    return {"ms_per_token": ms_per_token, "tokens_per_unit": tokens_per_unit,
            "aten_calls_per_token": calls / args.sample_tokens, "syncs_per_token": syncs / args.sample_tokens}


def train_rate(name: str, config_name: str, args, folder: Path) -> float:
    """Tokens/s of our Trainer with one recipe of CONFIGS (median of the steps after --warmup)."""
    path = folder / f"{config_name}.json"
    path.write_text(json.dumps(CONFIGS[config_name]))
    run = argparse.Namespace(**{**vars(args), "steps": args.steps + args.warmup})
    figures, trainer = deepspeed_loop(name, examples(name, run.steps * args.batch, args), run, folder, str(path))
    del trainer
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return median_rate(figures["seconds"], args.warmup, args.batch * (args.src + args.tgt))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="base")
    parser.add_argument("--vocab", type=int, default=50265 + 101)
    parser.add_argument("--models", nargs="+", default=["eric", "bart"])
    parser.add_argument("--sample-tokens", type=int, default=64)
    parser.add_argument("--sample-repeats", type=int, default=3)
    parser.add_argument("--train-steps", type=int, default=20, help="plain bf16 steps before sampling (0: random)")
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--src", type=int, default=128)
    parser.add_argument("--tgt", type=int, default=256)
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    bf16 = torch.cuda.is_available()
    figures: dict = {"device": torch.cuda.get_device_name() if bf16 else "cpu", "sampling": {}, "training": {}}
    for name in args.models:
        figures["sampling"][name] = profile_sampling(name, args, bf16)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            for config_name in args.configs:
                try:
                    rate = train_rate(name, config_name, args, Path(tmp))
                except Exception as exc:  # one recipe failing should not lose the others' figures
                    print(f"training {name} {config_name}: FAILED {type(exc).__name__}: {exc}")
                    continue
                figures["training"][f"{name}/{config_name}"] = rate
                print(f"training {name:5s} {config_name:15s} {rate:12,.0f} tokens/s", flush=True)
    print(json.dumps(figures, indent=1))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))
    return figures


if __name__ == "__main__":
    main()
