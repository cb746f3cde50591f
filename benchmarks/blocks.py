"""Generated blocks of the benchmarks' pages (docs/benchmarks.md, docs/gpu.md), from the
records the scripts write (benchmarks/record.py: outputs/<name>.json; GPU runs: outputs/gpu/);
registered in studies/render.py with every other block."""

from __future__ import annotations

import json
from pathlib import Path

from eric.evaluate.intervals import Interval, seed_interval
from eric.evaluate.report import markdown_table, number, text_table

BENCH_OUTPUTS = Path(__file__).resolve().parent / "outputs"
NONE = "–"


def _json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def benchmarks() -> str:
    rows = []
    for path in sorted(BENCH_OUTPUTS.glob("*.json")):
        record = json.loads(path.read_text())
        host = record.get("host") or {}
        figures = "; ".join(f"{k} {number(v)}" for k, v in (record.get("result") or {}).items()
                            if isinstance(v, (int, float)))
        rows.append([f"`{record.get('benchmark', path.stem)}`", figures or NONE,
                     f"{host.get('cores', '?')} cores, load {number(host.get('load'))}",
                     str(record.get("commit", "?"))[:7]])
    if not rows:
        return "_No benchmark has written its JSON yet._\n"
    return text_table(["benchmark", "figures", "host", "commit"], rows)


def sample_steps() -> str:
    """bench_sample.py's tokens/s per decoding step and batch size (its `--decode-steps` run)."""
    record = _json(BENCH_OUTPUTS / "bench_sample.json") or {}
    result, rows = record.get("result") or {}, []
    for key in (k.removeprefix("ratio_") for k in result if k.startswith("ratio_")):
        batch, _, step = key.removeprefix("batch").partition("_")
        rows.append([step or "dynamic", batch, number(result.get(f"eric_tokens_per_s_{key}")),
                     number(result.get(f"bart_tokens_per_s_{key}")), number(result.get(f"ratio_{key}"))])
    if not rows:
        return "_bench_sample.py has not recorded a run._\n"
    host = record.get("host") or {}
    about = (f"`{record.get('command', '?')}` at {str(record.get('commit', '?'))[:7]}, {host.get('cores', '?')} cores, "
             f"{host.get('torch_threads') or '?'} torch thread(s), load {number(host.get('load'))}, "
             f"{result.get('clock', '?')} clock, preset {result.get('size', '?')}")
    return text_table(["decode step", "batch", "ERIC tok/s", "BART tok/s", "ERIC/BART"], rows) + f"\n{about}\n"


OP_FIGURES = {"param_tensors": "parameter tensors", "ops": "operators", "kernel_ops": "kernel-launching operators",
              "matmul_ops": "matrix products and attention", "ops_per_tensor": "operators per parameter tensor",
              "compiled_kernels": "kernels of the compiled step"}


def op_budget() -> str:
    """bench_ops.py's counts per training micro-step: one row per figure and size preset."""
    record = _json(BENCH_OUTPUTS / "bench_ops.json") or {}
    result, rows = record.get("result") or {}, []
    for size in dict.fromkeys(k.split("_", 1)[0] for k in result if k.endswith("_ratio_ops")):
        for key, label in OP_FIGURES.items():
            if f"{size}_ratio_{key}" in result:
                rows.append([size, label, *(number(result[f"{size}_{model}_{key}"]) for model in ("eric", "bart", "ratio"))])
    if not rows:
        return "_bench_ops.py has not recorded a run._\n"
    about = (f"`{record.get('command', '?')}` at {str(record.get('commit', '?'))[:7]}: one micro-step (forward + "
             f"backward) of {result.get('batch')} rows of {result.get('src')} + {result.get('tgt')} tokens, on CPU")
    return markdown_table(["preset", "per micro-step", "ERIC", "BART", "ERIC/BART"], rows) + f"\n\n{about}\n"


GPU_OUTPUTS = BENCH_OUTPUTS / "gpu"


def _gpu_records(prefix: str):
    """(path, record, meta) of every committed `<prefix>_*.json` of the device runs, by name."""
    for path in sorted(GPU_OUTPUTS.glob(f"{prefix}_*.json")):
        record = json.loads(path.read_text())
        yield path, record, record.get("meta") or {}


def gpu_check() -> str:
    parts = []
    for path, record, meta in _gpu_records("gpu_check"):
        about = ", ".join(f"{k} {meta[k]}" for k in ("device", "size", "batch", "src", "tgt", "bf16", "torch") if k in meta)
        parts += [f"**`{path.name}`** (code: {path.stem.rsplit('_', 1)[-1]}; {about})", "", _gpu_table(record), ""]
    return "\n".join(parts) if parts else "_No GPU check has been run._\n"


def gpu_train() -> str:
    """benchmarks/gpu_train.py's runs: one row per file, model and mode."""
    rows = [row for path, record, meta in _gpu_records("gpu_train") for row in _gpu_train_rows(path, record, meta)]
    if not rows:
        return "_No run of gpu_train.py is committed._\n"
    return markdown_table(["run", "set-up", "model", "mode", "tokens/s", "ERIC/BART", "padding", "MFU (count)",
                           "MFU (6N)", "first step s", "ops / micro step", "syncs", "graph breaks",
                           "graphs / shapes"], rows) + "\n"


def _gpu_train_rows(path: Path, record: dict, meta: dict) -> list[list[str]]:
    cudnn = "" if meta.get("device") == "cpu" else \
        f", cuDNN attention {'on' if meta.get('cudnn_attention', True) else 'off'}"
    backend = f", compiled by {meta['backend']}" if "compiled" in meta.get("modes", []) and meta.get("backend") else ""
    setup = (f"{meta.get('device', '?')}, {meta.get('micro_tokens', '?')} x {meta.get('accum', '?')}, "
             f"pad to {meta.get('pad_multiple', 1)}{cudnn}{backend}")
    results, rows = record.get("results") or {}, []
    for model, result in results.items():
        for mode in meta.get("modes", []):
            r = result.get(mode)
            if not r:
                continue
            run = f"`{path.stem.removeprefix('gpu_train_')}`"
            if "status" in r:  # stopped at the compile cap, or failed
                cap = f" within {r['compile_cap_s']:.0f} s" if "compile_cap_s" in r else ""
                rows.append([run, setup, model, mode, r["status"] + cap, *[NONE] * 9])
                continue
            bart = (results.get("bart") or {}).get(mode) or {}
            ratio = r["tokens_per_s"] / bart["tokens_per_s"] if model == "eric" and bart.get("tokens_per_s") else None
            graphs = f"{r['graphs_compiled']} / {r['micro_batch_shapes']}" if "graphs_compiled" in r else NONE
            rows.append([run, setup, model, mode, number(r.get("tokens_per_s")),
                         number(ratio), _pct(r.get("padding")), _pct(r.get("mfu_count")), _pct(r.get("mfu_6n")),
                         number(r.get("first_step_seconds")), number(r.get("ops_per_micro_step")),
                         number(r.get("syncs_per_micro_step")), number(r.get("graph_breaks")), graphs])
    return rows


def _pct(value) -> str:
    return NONE if value is None else f"{100 * value:.1f}%"


def _gpu_table(record: dict) -> str:
    """One row per figure, one column per model (gpu_check.py's `results`)."""
    results = {m: _flat(r) for m, r in (record.get("results") or {}).items() if isinstance(r, dict)}
    keys = list(dict.fromkeys(k for r in results.values() for k, v in r.items()
                              if isinstance(v, (int, float)) and not isinstance(v, bool)))
    rows = [[k, *(number(r.get(k)) for r in results.values())] for k in keys]
    return markdown_table(["figure", *results], rows)


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(_flat(v, key) if isinstance(v, dict) else {key: v})
    return out


def compile_cost() -> str:
    """bench_compile.py (cold compile, graphs over shapes) and bench_flops.py (where the FLOPs go)."""
    rows = []
    for name in ("bench_compile", "bench_compile_base"):  # tiny, then the size the device compiles
        compiled = _json(BENCH_OUTPUTS / f"{name}.json")
        if compiled:
            rows += _compile_rows(compiled, name)
    flops = _json(BENCH_OUTPUTS / "bench_flops.json")
    if flops:
        r = flops["result"]
        about = _about(flops)
        rows += [[f"TFLOP per micro-batch ({r.get('size')}, {r.get('micro_tokens')} padded tokens)",
                  number(r.get("eric_step_tflop")), number(r.get("bart_step_tflop")), number(r.get("flop_ratio")),
                  NONE, about],
                 ["sentence encoder's share of ERIC's FLOPs", _pct(r.get("sentence_encoder_share")), NONE, NONE,
                  NONE, about],
                 ["its block-diagonal self-attention's share", _pct(r.get("sentence_attention_share")), NONE, NONE,
                  NONE, about],
                 ["of that attention, the part inside units (what per-unit attention keeps)",
                  _pct(r.get("unit_area_fraction")), NONE, NONE, NONE, about]]
    if not rows:
        return "_Neither bench_compile.py nor bench_flops.py has recorded a run._\n"
    return markdown_table(["figure", "ERIC", "BART", "ERIC/BART", "goal", "run"], rows) + "\n"


def _compile_rows(compiled: dict, name: str) -> list[list[str]]:
    r, about = compiled["result"], _about(compiled)
    size = r.get("size")
    return [[f"cold compile of a training micro-step, s ({size}, CPU, inductor)", number(r.get("eric_cold_compile_s")),
             number(r.get("bart_cold_compile_s")), number(r.get("cold_compile_ratio")), "<= 2", about],
            *_round_rows(name, size),
            [f"of that, waiting on the C++ compiler, s ({size})", number(r.get("eric_cxx_wait_s")),
             number(r.get("bart_cxx_wait_s")), _ratio(r, "cxx_wait_s"), NONE, about],
            [f"operations traced into the forward graph ({size})", number(r.get("eric_ops_captured")),
             number(r.get("bart_ops_captured")), number(r.get("ops_captured_ratio")), NONE, about],
            [f"operations inductor lowers, forward + backward ({size})",
             number(r.get("eric_lowered_ops")), number(r.get("bart_lowered_ops")), _ratio(r, "lowered_ops"), NONE,
             about],
            [f"C++ files compiled, forward and backward kernels ({size})",
             number(r.get("eric_cxx_compiles")), number(r.get("bart_cxx_compiles")), _ratio(r, "cxx_compiles"), NONE,
             about],
            [f"graphs compiled over {r.get('shapes')} micro-batch shapes ({size})",
             number(r.get("eric_graphs")), number(r.get("bart_graphs")), NONE, "<= 2 each", about]]


def read_rounds(history: Path) -> list[dict]:
    """bench_compile.py's kept rounds (<record>_rounds.jsonl), oldest first."""
    return [json.loads(line) for line in history.read_text().splitlines() if line.strip()] if history.is_file() else []


def pooled_rounds(rows: list[dict], code: str) -> dict:
    """ERIC / BART of each round at model code `code`: mean, 95% t-interval, rounds and runs."""
    same = [r for r in rows if r["code"] == code]
    found = seed_interval([r["eric_cold_compile_s"] / r["bart_cold_compile_s"] for r in same])
    return {"model_code": code, "rounds_pooled": len(same), "runs_pooled": len({r["run"] for r in same}),
            "round_ratio": found.value, "round_ratio_low": found.low, "round_ratio_high": found.high}


def _round_rows(name: str, size: str) -> list[list[str]]:
    """ERIC / BART per paired round over the kept runs at the latest run's model code, with its
    95% t-interval: the goal holds where the interval's top is under 2."""
    rows = read_rounds(BENCH_OUTPUTS / f"{name}_rounds.jsonl")
    if not rows:
        return []
    r = pooled_rounds(rows, rows[-1]["code"])
    found = Interval(r["round_ratio"], r["round_ratio_low"], r["round_ratio_high"])
    commits = dict.fromkeys(str(row["commit"])[:7] for row in rows if row["code"] == r["model_code"])
    runs = f"{r['runs_pooled']} run{'s' if r['runs_pooled'] > 1 else ''}"
    return [[f"ERIC / BART per round (one compile each, back to back): {r['rounds_pooled']} rounds of {runs} "
             f"at model code {r['model_code']} ({size})", NONE, NONE, found.format(2), "interval < 2",
             "runs at " + ", ".join(commits)]]


def _ratio(result: dict, key: str) -> str:
    """ERIC / BART of one figure, or a dash where either is missing (a record from before it) or zero."""
    eric, bart = result.get(f"eric_{key}"), result.get(f"bart_{key}")
    return number(eric / bart) if eric is not None and bart else NONE


def _about(record: dict) -> str:
    host = record.get("host") or {}
    return f"{str(record.get('commit', '?'))[:7]}, {host.get('cores', '?')} cores, load {number(host.get('load'))}"


BLOCKS = {"benchmarks": benchmarks, "gpu-check": gpu_check, "sample-steps": sample_steps, "gpu-train": gpu_train,
          "op-budget": op_budget, "compile-cost": compile_cost}
