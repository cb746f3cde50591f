"""benchmarks/bench_compile.py and bench_flops.py on CPU at toy sizes: the figures they record."""

from __future__ import annotations

import json
import statistics
import sys

import scipy.stats

from eric.config import PROJECT_ROOT
from tests.benchmarks.test_gpu_train import split  # noqa: F401  (the module fixture: a split and its tokenizer)

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import bench_compile  # noqa: E402
import bench_flops  # noqa: E402


def test_token_budget_shapes_are_distinct_and_within_the_budget():
    shapes = bench_compile.shapes(4096, 8)
    assert len(set(shapes)) == 8 and len({b for b, _, _ in shapes}) >= 4
    assert all(b * (s + t) <= 4096 for b, s, t in shapes)


def test_one_cold_compile_serves_every_shape():
    """What a child process measures (here in this process, BART: ERIC's count is
    tests/train/test_compile.py's; a fresh process per model costs a minute in a test)."""
    figures = bench_compile.one("bart", "mini", 1024, 3, "aot_eager")
    assert figures["cold_compile_s"] > figures["later_step_s"] > 0
    assert figures["ops_captured"] > 100 and figures["graphs"] == 1  # no size of 1 among the shapes
    assert figures["cxx_compiles"] == 0 and figures["cxx_wait_s"] == 0  # aot_eager generates no C++


def test_rounds_alternate_and_the_medians_are_recorded(tmp_path, monkeypatch):
    order = []

    def cold_run(name, args, what="--one"):
        if what == "--nodes":
            return {"lowered_ops": 3000 if name == "eric" else 1500}
        order.append(name)
        seconds = {"eric": [30.0, 20.0, 25.0], "bart": [10.0, 12.0, 11.0]}[name][(order.count(name) - 1) % 3]
        return {"cold_compile_s": seconds, "graphs": 1, "ops_captured": 800 if name == "eric" else 280,
                "later_step_s": 1.0}

    monkeypatch.setattr(bench_compile, "cold_run", cold_run)
    result = bench_compile.main(["--rounds", "3", "--out-dir", str(tmp_path)])
    assert order == ["bart", "eric", "eric", "bart", "bart", "eric"]  # a busy spell hits both
    assert result["eric_cold_compile_s"] == 25.0 and result["bart_cold_compile_s"] == 11.0
    assert result["cold_compile_ratio"] == 25.0 / 11.0 and result["eric_cold_compile_s_each"] == [30.0, 20.0, 25.0]
    assert result["eric_lowered_ops"] == 3000 and result["lowered_ops_ratio"] == 2.0  # counted once per model
    assert json.loads((tmp_path / "bench_compile.json").read_text())["result"] == result
    base = bench_compile.main(["--size", "base", "--rounds", "1", "--out-dir", str(tmp_path)])
    assert json.loads((tmp_path / "bench_compile_base.json").read_text())["result"] == base  # a record per size
    assert json.loads((tmp_path / "bench_compile.json").read_text())["result"] == result  # tiny's kept
    assert base["rounds_pooled"] == 1 and base["round_ratio_low"] is None  # base's rounds are its own


def test_the_goal_is_read_per_round_over_the_runs_at_the_same_model_code(tmp_path, monkeypatch):
    """Each round pairs one ERIC and one BART compile; runs append their rounds and the ratio is
    pooled over those at the same model code, with a t-interval (the goal: its top under 2)."""
    seconds = iter([10.0, 30.0, 20.0, 12.0, 11.0, 25.0] * 2)  # in call order: bart, eric, eric, bart, bart, eric

    def cold_run(name, args, what="--one"):
        if what == "--nodes":
            return {"lowered_ops": 1}
        return {"cold_compile_s": next(seconds), "graphs": 1, "ops_captured": 1, "later_step_s": 1.0}

    monkeypatch.setattr(bench_compile, "cold_run", cold_run)
    monkeypatch.setattr(bench_compile, "model_code", lambda: "trees-a")
    history = tmp_path / "bench_compile_rounds.jsonl"
    history.write_text(json.dumps({"run": 1, "round": 1, "code": "other-code", "commit": "old", "finished": "then",
                                   "eric_cold_compile_s": 99.0, "bart_cold_compile_s": 1.0}) + "\n")
    first = bench_compile.main(["--rounds", "3", "--out-dir", str(tmp_path)])
    ratios = [30 / 10, 20 / 12, 25 / 11]  # round by round
    assert first["rounds_pooled"] == 3 and first["runs_pooled"] == 1  # the other code's round left out
    assert abs(first["round_ratio"] - statistics.mean(ratios)) < 1e-9
    half = scipy.stats.t.ppf(0.975, 2) * statistics.stdev(ratios) / 3**0.5
    assert abs(first["round_ratio_high"] - (statistics.mean(ratios) + half)) < 1e-6
    second = bench_compile.main(["--rounds", "3", "--out-dir", str(tmp_path)])
    assert second["rounds_pooled"] == 6 and second["runs_pooled"] == 2 and abs(second["round_ratio"] - first["round_ratio"]) < 1e-9
    assert second["round_ratio_high"] - second["round_ratio_low"] < first["round_ratio_high"] - first["round_ratio_low"]
    rows = [json.loads(line) for line in history.read_text().splitlines()]
    assert [r["run"] for r in rows] == [1, 2, 2, 2, 3, 3, 3] and rows[1]["code"] == "trees-a"


def test_the_model_code_is_git_s_trees_of_what_is_compiled():
    code = bench_compile.model_code()
    trees = code.removesuffix("+dirty").split("-")
    assert len(trees) == 2 and all(len(t) == 10 and int(t, 16) >= 0 for t in trees)


def test_lowered_operations_count_the_forward_and_backward_graphs_inductor_gets():
    """In a child process, as the benchmark runs it (in this one, its warm compiler would make
    the cold compile of another test look like a later step)."""
    args = bench_compile.argparse.Namespace(size="mini", budget=1024, shapes=1, backend="aot_eager")
    counts = bench_compile.cold_run("bart", args, "--nodes")
    assert counts["lowered_ops_fw"] > 285  # more than dynamo traces of the larger tiny BART (285): decompositions split ops
    assert counts["lowered_ops_bw"] > counts["lowered_ops_fw"]  # the backward of each layer is larger
    assert counts["lowered_ops"] == counts["lowered_ops_fw"] + counts["lowered_ops_bw"]


def test_flop_shares_are_counted_on_the_meta_device(split, tmp_path):  # noqa: F811
    result = bench_flops.main(["--size", "tiny", "--vocab", "512", "--split", str(split / "train.parquet"),
                               "--tokenizer", str(split / "tok"), "--micro-tokens", "160", "--batches", "3",
                               "--out-dir", str(tmp_path)])
    assert result["eric_step_tflop"] > result["bart_step_tflop"] > 0
    assert 0 < result["sentence_attention_share"] < result["sentence_encoder_share"] < 1
    assert 0 < result["unit_area_fraction"] < 1  # a unit is part of its target
    assert (tmp_path / "bench_flops.json").is_file()
