"""Cold compile time and graphs compiled of a training step: ERIC against BART (CPU, inductor).

    python benchmarks/bench_compile.py [--size tiny|base] [--budget 4096] [--shapes 8] [--rounds 3] [--backend inductor]

Each model (ERIC with every mechanism; transformers' BART of the same dimensions) is
compiled in place (`train.compile`) in a fresh process with inductor's caches off, then
trained on --shapes micro-batches of distinct shape, packed to about --budget padded
tokens (batch size falls as the target grows), fed through `symbolic_shapes` as the
Trainer feeds them. Per model:

  cold_compile_s   the first micro-step (forward + backward): tracing and code generation
  graphs           graphs dynamo compiled over all the shapes (goal: at most 2)
  ops_captured     operations dynamo traced into the first forward graph: the size compiled
  later_step_s     median micro-step over the other shapes (each a new shape: a recompile
                   would show here)
  cxx_compiles     C++ files inductor compiled for the first step (forward and backward
                   kernels; identical ones are built once)
  cxx_wait_s       of the cold compile, the time spent waiting on the C++ compiler for them
                   (the rest is tracing, autograd and inductor's lowering, in Python)
  lowered_ops      operations inductor lowers: the forward and backward graphs AOT autograd
                   hands it (inductor's decompositions, its partitioner), counted once in a
                   fresh process. Inductor's Python work grows with them; a count, no clock

and ERIC / BART of the cold compile (goal: at most 2). Each figure is the median over --rounds
fresh processes per model (one cold compile moves by 10-15% on a shared 2-core host). The
record is benchmarks/outputs/bench_compile.json for the tiny size, bench_compile_<size>.json
for another (base: the size the device run compiles).

Whether the goal holds is read over rounds, not from one median: a round is one ERIC and one
BART compile back to back (a busy spell of the host hits both), and every run appends its
rounds to <record>_rounds.jsonl. ERIC / BART of each round at this model code (git's trees of
eric/model and eric/train: what is compiled), over every run kept there, gives
`round_ratio` with its 95% Student-t interval (`round_ratio_low`, `round_ratio_high`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model import bart_config, eric_config, synthetic_batch  # noqa: E402
from blocks import pooled_rounds, read_rounds  # noqa: E402
from gpu_check import BART_KEYS  # noqa: E402
from record import OUTPUTS, git, record, stamp  # noqa: E402

from eric.train.engine import compile_in_place, symbolic_shapes  # noqa: E402


VOCAB = 1024  # synthetic token ids of both models


def shapes(budget: int, n: int, source: int = 64) -> list[tuple[int, int, int]]:
    """(batch, source, target) of `n` micro-batches of at most `budget` padded tokens."""
    sizes = [(source + 8 * (i % 3), 96 + 48 * i) for i in range(n)]  # (source, target)
    return [(max(2, budget // (s + t)), s, t) for s, t in sizes]


def one(name: str, size: str, budget: int, n: int, backend: str) -> dict:
    """Compile and step one model cold, in this process."""
    import torch._inductor.config as inductor
    from torch._dynamo.utils import compilation_time_metrics, counters

    model = _model(name, size)
    compile_in_place(model.train(), backend)
    stats = counters["stats"]
    graphs, calls = stats["unique_graphs"], stats["calls_captured"]  # this model's own, whatever ran before
    cxx_before = _cxx(compilation_time_metrics)
    times = []
    with inductor.patch(force_disable_caches=True):  # cold: nothing from an earlier run's cache
        for i, (batch, source, target) in enumerate(shapes(budget, n)):
            inputs = _inputs(name, batch, source, target, seed=i)
            start = time.perf_counter()
            out = model(**inputs)
            if hasattr(model, "finish_output"):  # the no-grad work after the forward, as the Trainer does it
                model.finish_output(out, logged=i == n - 1)
            out.loss.backward()
            model.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - start)
            if i == 0:
                captured = stats["calls_captured"] - calls  # operations in the forward graph dynamo traced
                built, waited = (now - then for now, then in zip(_cxx(compilation_time_metrics), cxx_before))
    return {"cold_compile_s": times[0], "graphs": stats["unique_graphs"] - graphs, "ops_captured": captured,
            "later_step_s": statistics.median(times[1:]) if n > 1 else None, "cxx_compiles": built,
            "cxx_wait_s": waited}


def _model(name: str, size: str):
    from transformers import BartForConditionalGeneration

    from eric.model import EricForConditionalGeneration

    torch.manual_seed(0)
    config = eric_config(size, VOCAB)
    return EricForConditionalGeneration(config) if name == "eric" else BartForConditionalGeneration(bart_config(config))


def _inputs(name: str, batch: int, source: int, target: int, seed: int) -> dict:
    """A synthetic micro-batch of the model's inputs, marked dynamic as the Trainer feeds it."""
    full = synthetic_batch(batch, source, target, VOCAB, seed=seed)
    return symbolic_shapes({k: full[k] for k in (full if name == "eric" else BART_KEYS)})


def lowered_ops(name: str, size: str, budget: int) -> dict:
    """Operations of the forward and backward graphs inductor would lower for the first
    micro-batch: AOT autograd with inductor's decompositions and partitioner, the graphs
    counted instead of compiled (in this process)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.decomposition import select_decomp_table

    counts = {}

    def counter(part: str):
        def compiler(graph, example_inputs):
            counts[part] = counts.get(part, 0) + sum(node.op == "call_function" for node in graph.graph.nodes)
            return graph.forward
        return compiler

    backend = aot_autograd(fw_compiler=counter("fw"), bw_compiler=counter("bw"),
                           partition_fn=min_cut_rematerialization_partition, decompositions=select_decomp_table())
    model = _model(name, size)
    model.train().compile(backend=backend)
    model(**_inputs(name, *shapes(budget, 1)[0], seed=0)).loss.backward()
    return {"lowered_ops_fw": counts["fw"], "lowered_ops_bw": counts["bw"], "lowered_ops": counts["fw"] + counts["bw"]}


def _cxx(timings: dict) -> tuple[int, float]:
    """(C++ files compiled, seconds waited for them) so far in this process, from torch's own
    timers: inductor builds its kernels in worker processes while the main one waits."""
    return len(timings.get("compile_file", [])), sum(timings.get("async_compile.wait", []))


def cold_run(name: str, args, what: str = "--one") -> dict:
    """One model's figures from a fresh process (nothing compiled before counts); `--nodes`:
    its lowered operations."""
    child = [sys.executable, __file__, what, name, "--size", args.size, "--budget", str(args.budget),
             "--shapes", str(args.shapes), "--backend", args.backend]
    done = subprocess.run(child, capture_output=True, text=True, check=True,
                          env={**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def model_code() -> str:
    """What is compiled, as git names it: the trees of eric/model and eric/train at HEAD, with
    +dirty when the workspace changed them (such rounds pool with no other run)."""
    trees = "-".join(git("rev-parse", f"HEAD:{p}")[:10] for p in ("eric/model", "eric/train"))
    return trees + ("+dirty" if git("status", "--porcelain", "--", "eric/model", "eric/train") else "")


def keep_rounds(history: Path, runs: dict[str, list[dict]], code: str, about: dict) -> dict:
    """Append this run's paired rounds to `history` (JSON lines, one per round, numbered by run)
    and pool ERIC / BART per round over every kept round at `code` (blocks.pooled_rounds); a
    run at +dirty code pools only its own rounds."""
    kept = read_rounds(history)
    run = 1 + max((r["run"] for r in kept), default=0)
    lines = [{"run": run, "round": i + 1, **about, "code": code, "eric_cold_compile_s": round(e["cold_compile_s"], 2),
              "bart_cold_compile_s": round(b["cold_compile_s"], 2)} for i, (e, b) in enumerate(zip(runs["eric"], runs["bart"]))]
    with history.open("a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return pooled_rounds(lines if code.endswith("+dirty") else kept + lines, code)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny", choices=["mini", "tiny", "base"])
    parser.add_argument("--budget", type=int, default=4096, help="padded tokens per micro-batch, about")
    parser.add_argument("--shapes", type=int, default=8, help="distinct micro-batch shapes")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (the test: aot_eager)")
    parser.add_argument("--rounds", type=int, default=3, help="cold compiles of each model (medians reported)")
    parser.add_argument("--out-dir", type=Path, default=OUTPUTS)
    parser.add_argument("--one", choices=["eric", "bart"], help=argparse.SUPPRESS)  # the child processes
    parser.add_argument("--nodes", choices=["eric", "bart"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.size, args.budget, args.shapes, args.backend)))
        return {}
    if args.nodes:
        print(json.dumps(lowered_ops(args.nodes, args.size, args.budget)))
        return {}
    result = {"size": args.size, "budget": args.budget, "shapes": args.shapes, "backend": args.backend,
              "rounds": args.rounds}
    runs = {"bart": [], "eric": []}
    for round_ in range(args.rounds):  # the order alternates: a busy spell of the host hits both
        for name in ("bart", "eric") if round_ % 2 == 0 else ("eric", "bart"):
            runs[name].append(cold_run(name, args))
            print(f"round {round_ + 1}, {name}: cold compile {runs[name][-1]['cold_compile_s']:.1f} s, "
                  f"{runs[name][-1]['graphs']} graph(s) over {args.shapes} shapes", flush=True)
    for name, figures in runs.items():  # medians over the rounds; graphs and operations do not vary
        result.update({f"{name}_{k}": statistics.median(f[k] for f in figures) for k in figures[0]})
        result[f"{name}_cold_compile_s_each"] = [round(f["cold_compile_s"], 1) for f in figures]
    for name in runs:  # a count: one fresh process each is enough
        result.update({f"{name}_{k}": v for k, v in cold_run(name, args, "--nodes").items()})
    result["cold_compile_ratio"] = result["eric_cold_compile_s"] / result["bart_cold_compile_s"]
    result["ops_captured_ratio"] = result["eric_ops_captured"] / result["bart_ops_captured"]
    result["lowered_ops_ratio"] = result["eric_lowered_ops"] / result["bart_lowered_ops"]
    name = "bench_compile" if args.size == "tiny" else f"bench_compile_{args.size}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stamped = stamp()  # the record's and its rounds'
    about = {"commit": stamped["commit"], "finished": stamped["finished"], "load": stamped["host"]["load"]}
    result.update(keep_rounds(args.out_dir / f"{name}_rounds.jsonl", runs, model_code(), about))
    print(f"ERIC / BART cold compile: {result['cold_compile_ratio']:.2f} (goal <= 2); per round over "
          f"{result['rounds_pooled']} rounds at this model code: {result['round_ratio']:.2f} "
          f"[{result['round_ratio_low'] or float('nan'):.2f}, {result['round_ratio_high'] or float('nan'):.2f}]; "
          f"lowered operations: {result['lowered_ops_ratio']:.2f}")
    record(name, result, args.out_dir, stamped)
    return result


if __name__ == "__main__":
    main()
