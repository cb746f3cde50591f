"""Where ERIC's training step goes beyond BART's: torch.profiler, per module.

    python benchmarks/profile_model.py [--size tiny] [--steps 3] [--threads 1] [--rows 25]

Runs `--steps` ERIC training steps (forward + backward + AdamW) on bench_model.py's
synthetic batch under torch.profiler. Every module down to `--depth` is wrapped in a
`record_function` range, so the first table gives the CPU time of each module's
forward (children included); the second lists the heaviest operators (forward and
backward together), which is where the backward time shows.
"""

from __future__ import annotations

import argparse
import contextlib

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from bench_model import eric_config, synthetic_batch, train_step
from eric.model import EricForConditionalGeneration


def label_modules(model: torch.nn.Module, depth: int) -> None:
    """Open a profiler range named after each module (up to `depth` dots) around its forward."""
    for name, module in model.named_modules():
        if not name or name.count(".") >= depth:
            continue
        ranges: list[contextlib.AbstractContextManager] = []

        def enter(_module, _args, name=name, ranges=ranges):
            ranges.append(record_function(f"module::{name}"))
            ranges[-1].__enter__()

        def leave(_module, _args, _out, ranges=ranges):
            ranges.pop().__exit__(None, None, None)

        module.register_forward_pre_hook(enter)
        module.register_forward_hook(leave)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--vocab", type=int, default=8000 + 101)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = EricForConditionalGeneration(eric_config(args.size, args.vocab)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = synthetic_batch(8, 128, 256, args.vocab)
    train_step(model, optimizer, batch, False)  # warm-up
    label_modules(model, args.depth)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            with record_function("step::forward"):
                loss = model(**batch).loss
            with record_function("step::backward"):
                loss.backward()
            with record_function("step::optimizer"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    events = prof.key_averages()
    ranges = sorted((e for e in events if e.key.startswith(("module::", "step::"))),
                    key=lambda e: -e.cpu_time_total)
    print(f"per module forward (and step phases), CPU ms per step, {args.steps} steps:")
    for e in ranges:
        print(f"  {e.cpu_time_total / 1e3 / args.steps:9.1f}  {e.key}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
