"""benchmarks/bench_train.py: settings that would time nothing are refused before any work."""

from __future__ import annotations

import subprocess
import sys

from eric.config import PROJECT_ROOT


def test_a_timed_run_shorter_than_its_warm_up_is_one_line_before_any_work():
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks" / "bench_train.py"), "--steps", "3"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].endswith("--steps (3) must exceed --warmup (5): the warm-up steps are not timed")
    assert done.stdout == ""
