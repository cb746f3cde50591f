"""benchmarks/gpu_check.py runs end to end on CPU at a toy size (the GPU figures need a card)."""

from __future__ import annotations

import json
import sys

from eric.config import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import gpu_check  # noqa: E402


def test_gpu_check_measures_both_models_and_reloads_on_cpu(tmp_path, capsys):
    out = tmp_path / "figures.json"
    figures = gpu_check.main([
        "--size", "tiny", "--vocab", "512", "--steps", "3", "--warmup", "1", "--batch", "2", "--src", "16",
        "--tgt", "64", "--sample-batches", "1", "2", "--sample-tokens", "4", "--sample-repeats", "2",
        "--decode-steps", "dynamic", "static", "--peak-tflops", "1", "--out", str(out),
    ])
    assert json.loads(out.read_text()) == json.loads(json.dumps(figures))
    for name in ("eric", "bart"):
        r = figures["results"][name]
        assert r["plain_tokens_per_s"] > 0 and r["deepspeed_tokens_per_s"] > 0 and r["zero2_tokens_per_s"] > 0
        assert r["deepspeed_vs_plain"] > 0 and r["step_tflop"] > 0 and 0 < r["plain_mfu"] < 1
        assert r["sample_tokens_per_s_batch1"] > 0 and r["sample_tokens_per_s_batch2"] > 0
        assert r["sample_tokens_per_s_batch1_static"] > 0 and r["sample_tokens_per_s_batch2_static"] > 0
        assert r["reload"]["loss_ok"] and r["reload"]["samples_ok"]
        assert r["plain_peak_gib"] is None  # CUDA memory only
    eric, bart = figures["results"]["eric"], figures["results"]["bart"]
    assert eric["step_tflop"] > bart["step_tflop"]  # the sentence encoder and the state layers
    assert "ERIC/BART" in capsys.readouterr().out


def test_gpu_profile_runs_on_cpu_and_counts_per_token(capsys):
    import gpu_profile

    figures = gpu_profile.main([
        "--size", "tiny", "--vocab", "512", "--sample-tokens", "6", "--sample-repeats", "1", "--train-steps", "1",
        "--steps", "1", "--warmup", "1", "--batch", "2", "--src", "16", "--tgt", "64", "--rows", "3",
        "--configs", "zero0_autocast",
    ])
    for name in ("eric", "bart"):
        sampling = figures["sampling"][name]
        assert sampling["ms_per_token"] > 0 and sampling["tokens_per_unit"] > 0
        assert sampling["aten_calls_per_token"] > 10  # the profiled call's operators, counted
        assert figures["training"][f"{name}/zero0_autocast"] > 0
    assert "== sampling eric" in capsys.readouterr().out
