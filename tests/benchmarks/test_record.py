"""A benchmark's figures are written with where and at which code they were taken, and the
benchmarks block of the docs shows them."""

from __future__ import annotations

import json
import os
import sys

from eric.config import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import bench_clean  # noqa: E402
import record  # noqa: E402

from benchmarks import blocks  # noqa: E402


def test_a_benchmark_records_its_figures_with_host_and_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "OUTPUTS", tmp_path)
    monkeypatch.setattr(bench_clean, "record", lambda name, result: record.record(name, result, tmp_path))
    monkeypatch.setattr(sys, "argv", ["bench_clean.py", "--mb", "0.01", "--repeats", "1"])
    bench_clean.main()
    entry = json.loads((tmp_path / "bench_clean.json").read_text())
    assert entry["benchmark"] == "bench_clean" and entry["command"].startswith("python bench_clean.py --mb 0.01")
    assert entry["host"]["cores"] == os.cpu_count() and entry["host"]["load"] >= 0
    assert len(entry["commit"].removesuffix("+dirty")) == 40
    assert entry["result"]["megabytes"] == 0.01 and entry["result"]["seconds_best"] > 0


def test_the_benchmarks_block_is_rendered_from_the_recorded_files(tmp_path, monkeypatch):
    folder = tmp_path / "benchmarks" / "outputs"
    record.record("bench_demo", {"tokens_per_s": 1234.5, "label": "x"}, folder)
    monkeypatch.setattr(blocks, "BENCH_OUTPUTS", folder)
    block = blocks.benchmarks()
    assert "| `bench_demo` | tokens_per_s 1,234 |" in block and f"{os.cpu_count()} cores" in block


def test_the_records_are_written_where_the_docs_are_rendered_from():
    assert record.OUTPUTS == PROJECT_ROOT / "benchmarks" / "outputs" == blocks.BENCH_OUTPUTS
    assert (record.OUTPUTS / "bench_clean.json").is_file() and (record.OUTPUTS / "gpu").is_dir()


def test_the_host_thread_count_is_read_only_from_a_number(monkeypatch):
    """OMP_NUM_THREADS as the environment may hold it: a record at the end of a long run must not fail on it."""
    for value, threads in [("3", 3), ("", None), ("auto", None), ("0", None)]:
        monkeypatch.setenv("OMP_NUM_THREADS", value)
        assert record.host()["torch_threads"] == threads
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert record.host()["torch_threads"] is None


def test_the_compile_goal_row_pools_the_rounds_at_the_latest_runs_model_code(tmp_path, monkeypatch):
    """docs/gpu.md's round row: ERIC / BART per round over the kept runs at the model code of the
    latest, with a t-interval; rounds of other code are left out."""
    folder = tmp_path / "outputs"
    record.record("bench_compile_base", {"size": "base", "eric_cold_compile_s": 3.0, "bart_cold_compile_s": 2.0}, folder)
    rounds = [(1, "old", 9.0), (2, "new", 1.8), (2, "new", 1.9), (3, "new", 1.7)]
    (folder / "bench_compile_base_rounds.jsonl").write_text("".join(
        json.dumps({"run": run, "round": 1, "commit": f"c{run}" * 4, "code": code, "eric_cold_compile_s": ratio * 100,
                    "bart_cold_compile_s": 100.0}) + "\n" for run, code, ratio in rounds))
    monkeypatch.setattr(blocks, "BENCH_OUTPUTS", folder)
    block = blocks.compile_cost()
    assert "3 rounds of 2 runs at model code new (base) | – | – | 1.80 [1.55, 2.05] | interval < 2 | runs at c2c2c2c, c3c3c3c |" in block
