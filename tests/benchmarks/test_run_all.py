"""benchmarks/run_all.py runs the recorded CPU benchmarks one after another; --missing only
those without a record."""

from __future__ import annotations

import subprocess
import sys

from eric.config import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import record  # noqa: E402
import run_all  # noqa: E402


def _ran(monkeypatch, tmp_path, argv, returncode=0):
    ran = []

    def fake_run(command, cwd, check):
        ran.append((command, cwd))
        return subprocess.CompletedProcess(command, returncode)

    monkeypatch.setattr(run_all, "OUTPUTS", tmp_path)
    monkeypatch.setattr(run_all.subprocess, "run", fake_run)
    return run_all.main(argv), ran


def test_it_reads_and_writes_the_benchmarks_outputs():
    assert run_all.OUTPUTS == record.OUTPUTS == PROJECT_ROOT / "benchmarks" / "outputs"
    assert all((PROJECT_ROOT / "benchmarks" / f"{name}.py").is_file() for name in run_all.BENCHMARKS)


def test_missing_runs_only_the_benchmarks_without_a_record(tmp_path, monkeypatch):
    (tmp_path / "bench_clean.json").write_text("{}")
    code, ran = _ran(monkeypatch, tmp_path, ["--missing", "--only", "bench_clean", "bench_world"])
    assert code == 0 and len(ran) == 1
    command, cwd = ran[0]
    assert command == [sys.executable, str(PROJECT_ROOT / "benchmarks" / "bench_world.py"), "--stories", "12000"]
    assert cwd == PROJECT_ROOT


def test_every_benchmark_in_order_and_it_stops_at_the_first_failure(tmp_path, monkeypatch):
    code, ran = _ran(monkeypatch, tmp_path, [])
    assert code == 0 and [c[1] for c, _ in ran] == [str(PROJECT_ROOT / "benchmarks" / f"{n}.py")
                                                    for n in run_all.BENCHMARKS]
    code, ran = _ran(monkeypatch, tmp_path, [], returncode=3)
    assert code == 1 and len(ran) == 1
