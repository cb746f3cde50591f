"""benchmarks/bench_compile.py and bench_flops.py on CPU at toy sizes: the figures they record."""

from __future__ import annotations

import json
import sys

from eric.config import PROJECT_ROOT
from tests.benchmarks.test_gpu_train import split  # noqa: F401  (the module fixture: a split and its tokenizer)

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import bench_compile  # noqa: E402
import bench_flops  # noqa: E402


def test_token_budget_shapes_are_distinct_and_within_the_budget():
    shapes = bench_compile.shapes(4096, 8)
    assert len(set(shapes)) == 8 and len({b for b, _, _ in shapes}) >= 4
    assert all(b * (s + t) <= 4096 for b, s, t in shapes)


def test_each_model_compiles_cold_in_its_own_process_and_once_over_the_shapes(tmp_path):
    result = bench_compile.main(["--size", "mini", "--shapes", "3", "--budget", "1024", "--backend", "aot_eager",
                                 "--rounds", "1", "--out-dir", str(tmp_path)])
    assert json.loads((tmp_path / "bench_compile.json").read_text())["result"] == result
    for name in ("eric", "bart"):
        assert result[f"{name}_cold_compile_s"] > result[f"{name}_later_step_s"] > 0
        # no size of 1 among the shapes: one graph serves them all
        assert result[f"{name}_ops_captured"] > 100 and result[f"{name}_graphs"] == 1
    assert result["cold_compile_ratio"] == result["eric_cold_compile_s"] / result["bart_cold_compile_s"]


def test_flop_shares_are_counted_on_the_meta_device(split, tmp_path):  # noqa: F811
    result = bench_flops.main(["--size", "tiny", "--vocab", "512", "--split", str(split / "train.parquet"),
                               "--tokenizer", str(split / "tok"), "--micro-tokens", "160", "--batches", "3",
                               "--out-dir", str(tmp_path)])
    assert result["eric_step_tflop"] > result["bart_step_tflop"] > 0
    assert 0 < result["sentence_attention_share"] < result["sentence_encoder_share"] < 1
    assert 0 < result["unit_area_fraction"] < 1  # a unit is part of its target
    assert (tmp_path / "bench_flops.json").is_file()
