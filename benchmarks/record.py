"""Where a benchmark's figures go: benchmarks/outputs/<name>.json, with the host
(cores, load average, processor), the commit and the command line beside them, so that
docs/benchmarks.md is rendered from what ran (`python -m studies.render`), not typed."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = PROJECT_ROOT / "benchmarks" / "outputs"


def git(*args: str) -> str:
    """A git command's output in the project (empty when it fails)."""
    return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False).stdout.strip()


def commit() -> str:
    """HEAD, with +dirty when tracked files differ from it."""
    return (git("rev-parse", "HEAD") or "unknown") + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def stamp() -> dict:
    """Where and when figures were taken: the commit, the host and the time (UTC)."""
    return {"commit": commit(), "host": host(), "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def host() -> dict:
    return {"cores": os.cpu_count(), "load": round(os.getloadavg()[0], 2), "processor": platform.processor()
            or platform.machine(), "python": platform.python_version(),
            "torch_threads": _threads(os.environ.get("OMP_NUM_THREADS", ""))}


def _threads(value: str) -> int | None:
    """OMP_NUM_THREADS as a number; None when unset, empty or not a number (torch ignores it then)."""
    return int(value) if value.strip().isdigit() and int(value) > 0 else None


def record(name: str, result: dict, out_dir: Path = OUTPUTS, stamped: dict | None = None) -> Path:
    """Write one benchmark's figures (a flat dict of numbers and short strings); `stamped`: a
    `stamp()` the benchmark took already (its figures carry it too)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    entry = {"benchmark": name, "command": " ".join(["python", *sys.argv]), **(stamped or stamp()), "result": result}
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(entry, indent=2) + "\n")
    print(f"recorded {path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path}")
    return path
