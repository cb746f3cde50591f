"""Where ERIC's training step goes beyond BART's: torch.profiler, per module.

    python benchmarks/profile_model.py [--size tiny] [--steps 3] [--threads 1] [--rows 25]
    python benchmarks/profile_model.py --generate [--batch 8] [--new-tokens 256] [--variant eric]

Runs `--steps` ERIC training steps (forward + backward + AdamW) on bench_model.py's
synthetic batch under torch.profiler. Every module down to `--depth` is wrapped in a
`record_function` range, so the first table gives the CPU time of each module's
forward (children included); the second lists the heaviest operators (forward and
backward together), which is where the backward time shows.

`--generate`: one sampling call instead (top-p 0.9, KV cache, `--new-tokens` forced,
the <sent> bias of bench_model.py's sampling), with ranges also around generate's own
steps that no module covers (`plan` = `_plan_units`, `state inputs` = the state-attention
masks, `planner memory` = its per-token update). `--variant bart` profiles the BART
variant through the same `generate`. The profiler's per-call overhead inflates small
operators: compare pieces within one run, and time whole runs with bench_sample.py.
`--depth 5` shows each decoder layer's state_attn and its BART sub-layers.
"""

from __future__ import annotations

import argparse
import contextlib
import math

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from bench_model import SENT, UNIT_LENGTH, eric_config, synthetic_batch, train_step
from eric.model import EricForConditionalGeneration
from eric.model import generation, state_attention


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


def label_functions() -> None:
    """Profiler ranges around generate's own per-step work that is no module's forward."""
    targets = ((generation.EricGenerationMixin, "_plan_units", "plan"),
               (state_attention.StateAttentionInputs, "build", "state inputs"),
               (generation.PlannerMemory, "update", "planner memory"))
    for owner, name, label in targets:
        inner = getattr(owner, name)

        def wrapped(*args, inner=inner, label=label, **kwargs):
            with record_function(f"module::{label}"):
                return inner(*args, **kwargs)

        setattr(owner, name, wrapped)


def profile_generation(args) -> None:
    torch.manual_seed(0)
    model = EricForConditionalGeneration(eric_config(args.size, args.vocab, args.variant)).eval()
    with torch.no_grad():
        model.final_logits_bias[0, SENT] = math.log(args.vocab / (UNIT_LENGTH - 2))
    source = synthetic_batch(args.batch, 128, 256, args.vocab)["input_ids"]

    def sample():
        return model.generate(source, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, top_p=0.9,
                              generator=torch.Generator().manual_seed(0))

    sample()  # warm-up
    label_modules(model, args.depth)
    label_functions()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = sample()
    units = (out.sequences == SENT).sum(1).float().mean()
    print(f"{args.variant} generate, batch {args.batch}, {args.new_tokens} tokens, {units:.1f} units a row:")
    report(prof, 1, args.rows, "CPU ms in the call")


def report(prof, steps: int, rows: int, unit: str) -> None:
    events = prof.key_averages()
    ranges = sorted((e for e in events if e.key.startswith(("module::", "step::"))),
                    key=lambda e: -e.cpu_time_total)
    print(f"per module forward (and phases), {unit}:")
    for e in ranges:
        print(f"  {e.cpu_time_total / 1e3 / steps:9.1f}  {e.key}")
    print(events.table(sort_by="self_cpu_time_total", row_limit=rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--vocab", type=int, default=8000 + 101)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--generate", action="store_true", help="profile one sampling call instead")
    parser.add_argument("--batch", type=int, default=8, help="--generate: rows")
    parser.add_argument("--new-tokens", type=int, default=256, help="--generate: tokens a row")
    parser.add_argument("--variant", default="eric", choices=["eric", "bart"], help="--generate: which model")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.generate:
        return profile_generation(args)
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
    report(prof, args.steps, args.rows, f"CPU ms per step, {args.steps} steps")


if __name__ == "__main__":
    main()
