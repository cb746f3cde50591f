"""benchmarks/gpu_train.py on CPU at a toy size: token-budget batches and both modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eric.config import PROJECT_ROOT
from eric.data.tokenizer import SENT_TOKEN, build_tokenizer

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import gpu_train  # noqa: E402


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """A processed-looking split of 24 stories of 1-6 units, and its tokenizer."""
    root = tmp_path_factory.mktemp("shape")
    units = ["<e0> meets <e1> at night.", "The town sleeps.", "<e1> runs to the old mill and waits."]
    rows = []
    for i in range(24):
        chosen = [units[(i + k) % 3] for k in range(1 + i % 6)]
        rows.append({"id": f"s{i}", "source": "A tale of the mill.",
                     "target": " ".join(f"{SENT_TOKEN} {u}" for u in chosen),
                     "unit_entities": [[e for e in ("<e0>", "<e1>") if e in u] for u in chosen]})
    pq.write_table(pa.Table.from_pylist(rows), root / "train.parquet")
    texts = [r["target"] for r in rows] * 4
    build_tokenizer(texts, vocab_size=300, max_entities=100).save_pretrained(root / "tok")
    return root


def args(split, out, *extra) -> list[str]:
    return ["--size", "tiny", "--vocab", "512", "--split", str(split / "train.parquet"), "--tokenizer",
            str(split / "tok"), "--micro-tokens", "160", "--accum", "2", "--steps", "3", "--warmup", "1",
            "--peak-tflops", "1", "--out", str(out), *extra]


def test_token_batches_hold_every_row_once_within_the_budget(split):
    encoded, _ = gpu_train.encode_split(split / "train.parquet", gpu_train.load_tokenizer(split / "tok"), 128, 512, None)
    batches = gpu_train.token_batches(encoded, 160)
    assert sorted(i for b in batches for i in b) == list(range(len(encoded)))
    for batch in batches:
        rows = [encoded[i] for i in batch]
        padded = len(rows) * (max(len(r.source) for r in rows) + max(len(r.labels) for r in rows))
        assert len(rows) == 1 or padded <= 160
    assert len(batches) < len(encoded)  # short rows share a batch
    steps = gpu_train.steps_of(batches, 2, 5)
    assert len(steps) == 5 and all(len(s) == 2 for s in steps)


def test_eager_figures_for_both_models(split, tmp_path, capsys):
    out = tmp_path / "figures.json"
    figures = gpu_train.main(args(split, out, "--modes", "eager", "--pad-multiple", "8"))
    assert json.loads(out.read_text()) == json.loads(json.dumps(figures))
    for name in ("eric", "bart"):
        r = figures["results"][name]["eager"]
        assert r["tokens_per_s"] > 0 and 0 <= r["padding"] < 1 and 0 < r["mfu_count"] < 1
        assert r["ops_per_micro_step"] > 100
    eric, bart = figures["results"]["eric"], figures["results"]["bart"]
    assert eric["step_flops"] > bart["step_flops"]  # the sentence encoder and the state layers
    assert eric["eager"]["ops_per_micro_step"] > bart["eager"]["ops_per_micro_step"]
    assert eric["eager"]["syncs_per_micro_step"] == 0  # BART's 3: transformers' mask builders' padding checks
    assert "ERIC/BART" in capsys.readouterr().out


def test_compiled_mode_counts_graph_breaks_and_graphs_under_a_cap(split, tmp_path):
    """Each compiled model runs in a child process under --compile-cap; its figures come back."""
    figures = gpu_train.main(args(split, tmp_path / "f.json", "--modes", "compiled", "--backend", "aot_eager",
                                  "--compile-cap", "600"))
    for name in ("eric", "bart"):  # transformers' BART and ERIC's static forward each trace as one graph
        r = figures["results"][name]["compiled"]
        assert r["tokens_per_s"] > 0 and r["graph_breaks"] == 0, name
        assert r["micro_batch_shapes"] >= 3 and 1 <= r["graphs_compiled"] <= 2, (name, r)
        assert figures["results"][name]["step_flops"] > 0


def test_the_device_script_records_a_compile_past_its_cap_and_keeps_its_log(split, tmp_path):
    env = {**os.environ, "ON_CPU": "1", "COMPILE_CAP": "1", "OUT_DIR": str(tmp_path), "COMMIT": "test",
           "PYTHON": sys.executable}
    extra = args(split, tmp_path / "unused.json", "--models", "eric")
    del extra[extra.index("--out"):extra.index("--out") + 2]  # the script names its own
    run = subprocess.run(["bash", str(PROJECT_ROOT / "benchmarks/gpu_train.sh"), *extra], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    figures = json.loads((tmp_path / "gpu_train_cpu_test.json").read_text())
    assert figures["results"]["eric"]["compiled"] == {"status": "did not finish", "compile_cap_s": 1.0}
    assert figures["results"]["eric"]["eager"]["tokens_per_s"] > 0  # what ran before the cap is kept
    log = (tmp_path / "gpu_train_cpu_test.log").read_text()
    assert "eric compiled: did not finish within 1 s" in log
