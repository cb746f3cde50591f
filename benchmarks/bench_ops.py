"""Where a training step's operators come from: ERIC against BART, eager and compiled.

    python benchmarks/bench_ops.py [--sizes tiny base] [--compiled] [--out-dir DIR]

A small-batch GPU step is bound by its operators (one launch each), so issue 27 asks for ERIC's
operators per training step within 1.5 x BART's. This benchmark splits the ratio into what the
architecture fixes and what the code adds. Per model and size preset, one micro-step (forward
+ backward, synthetic full-length rows, the model as the Trainer steps it between logged rows):

  param_tensors       parameter tensors; each one costs a forward use, a gradient and an update,
                      whatever code surrounds it
  ops                 every operator dispatched (benchmarks/op_count.py)
  kernel_ops          ops that are not views or bare allocations: what would launch a kernel
  matmul_ops          matrix products and attention (mm, addmm, bmm, SDPA): one per linear use,
                      two per linear gradient, so they scale with the layers, not with glue code
  ops_per_tensor      ops / param_tensors: the code's overhead per unit of architecture
  compiled_kernels    with --compiled (CPU, inductor): the generated (fused) kernels plus the
                      matrix products and attention calls that one compiled step runs, counted
                      by torch's profiler; what a GPU would launch per step without CUDA graphs

The ERIC/BART ratios of each figure are written beside them. Counts, not timings: no host noise.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check import build, collate, examples  # noqa: E402
from op_count import OpCounter  # noqa: E402
from record import OUTPUTS, record  # noqa: E402

MATMUL_PREFIXES = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten._scaled_dot_product")
# bare allocations and metadata changes that torch does not mark as views: no kernel either
NO_KERNEL = ("aten.empty", "aten.new_empty", "aten.empty_like", "aten.empty_strided", "aten.lift_fresh",
             "aten._unsafe_view")


def is_kernel(name: str, views: set[str]) -> bool:
    return name not in views and not name.startswith(NO_KERNEL)


def step_inputs(name: str, size: str, args) -> tuple[torch.nn.Module, dict]:
    model = build(name, size, args.vocab).train()  # ERIC's SVD diagnostic is outside the forward
    return model, collate(examples(name, args.batch, args))


def micro_step(model: torch.nn.Module, batch: dict) -> None:
    model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)


def eager_counts(model: torch.nn.Module, batch: dict) -> dict:
    micro_step(model, batch)  # lazy set-up (first-call buffers, k-means init) outside the count
    with OpCounter() as counter:
        micro_step(model, batch)
    params = sum(1 for _ in model.parameters())
    total = counter.total
    return {
        "param_tensors": params,
        "ops": total,
        "kernel_ops": sum(n for op, n in counter.counts.items() if is_kernel(op, counter.views)),
        "matmul_ops": sum(n for op, n in counter.counts.items() if op.startswith(MATMUL_PREFIXES)),
        "ops_per_tensor": round(total / params, 2),
    }


def compiled_kernels(model: torch.nn.Module, batch: dict) -> tuple[int, int]:
    """(generated kernels, matrix products and attention calls) of one step of `model` compiled
    in place by inductor (CPU), read from torch's profiler."""
    import torch._inductor.config as inductor
    from torch.profiler import ProfilerActivity, profile

    with inductor.patch({"cpp.enable_kernel_profile": True}):  # each generated kernel: a profiler event
        model.compile(backend="inductor")
        for _ in range(2):  # compile the forward and the backward graphs
            micro_step(model, batch)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            micro_step(model, batch)
    names = Counter(e.name for e in prof.events())
    fused = sum(n for name, n in names.items() if "cpp_fused" in name)
    matmuls = sum(n for name, n in names.items() if name.replace("::", ".").startswith(MATMUL_PREFIXES))
    return fused, matmuls


def measure(size: str, args) -> dict:
    figures = {}
    for name in ("eric", "bart"):
        torch.manual_seed(0)
        model, batch = step_inputs(name, size, args)
        figures[name] = eager_counts(model, batch)
        if args.compiled and size == "tiny":
            figures[name]["compiled_kernels"] = sum(compiled_kernels(model, batch))
    figures["ratio"] = {k: round(figures["eric"][k] / figures["bart"][k], 3) for k in figures["bart"]}
    return figures


def report(results: dict) -> None:
    for size, figures in results.items():
        print(f"\n{size}: " + "  ".join(f"{k} {figures['eric'][k]:,} / {figures['bart'][k]:,} = {figures['ratio'][k]}"
                                        for k in figures["ratio"]))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "base"])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--src", type=int, default=32)
    parser.add_argument("--tgt", type=int, default=96)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--compiled", action="store_true", help="also count a compiled step's kernels (tiny only)")
    parser.add_argument("--out-dir", type=Path, default=OUTPUTS, help="where bench_ops.json goes")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    results = {size: measure(size, args) for size in args.sizes}
    report(results)
    flat = {f"{size}_{model}_{k}": v for size, figures in results.items() for model, values in figures.items()
            for k, v in values.items()}
    flat.update(batch=args.batch, src=args.src, tgt=args.tgt)
    record("bench_ops", flat, out_dir=args.out_dir)
    return results


if __name__ == "__main__":
    main()
