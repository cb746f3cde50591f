"""Running the DVC pipeline from a flow: DVC stays the single truth.

No overrides: `dvc repro`. Overrides (dotted params.yaml keys): `dvc exp run -S
key=value ...`, a DVC experiment whose results land in the workspace, as `dvc
exp run` always does (`git checkout params.yaml` returns to the committed knobs).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

DVC = [sys.executable, "-m", "dvc"]
LOCK_BUSY = "Unable to acquire lock"
DELETE = "~"  # an override key "~a.b" removes a.b from params.yaml (Hydra's syntax)


class PipelineError(RuntimeError):
    """The DVC pipeline could not run or failed; the message is one line."""


class OverrideError(PipelineError, ValueError):
    """An override names a key params.yaml lacks, or a profile is missing."""


class DvcLockBusy(PipelineError):
    """Another DVC process holds the repository lock: worth a retry."""


def hydra_value(value: Any) -> str:
    """A value in the Hydra override grammar that `dvc exp run -S` parses."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def read_params(root: Path) -> dict:
    path = root / "params.yaml"
    if not path.is_file():
        raise OverrideError(f"{path}: params file not found")
    return yaml.safe_load(path.read_text()) or {}


def check_overrides(params: dict, overrides: Mapping[str, Any]) -> None:
    """Fail in one line before DVC starts if a key is not in params.yaml."""
    for key in overrides:
        node: Any = params
        for part in key.removeprefix(DELETE).split("."):
            if not isinstance(node, dict) or part not in node:
                raise OverrideError(f"override {key!r}: params.yaml has no such key")
            node = node[part]


def dvc_command(overrides: Mapping[str, Any], exp_name: str | None = None, force: bool = False) -> list[str]:
    if not overrides:
        return [*DVC, "repro", *(["--force"] if force else [])]
    args = [*DVC, "exp", "run", *(["--force"] if force else []), *(["--name", exp_name] if exp_name else [])]
    for key, value in overrides.items():
        args += ["-S", key if key.startswith(DELETE) else f"{key}={hydra_value(value)}"]
    return args


def run_streaming(args: list[str], cwd: Path, env: dict[str, str], log: Callable[[str], None]) -> str:
    """Run `args`, passing each output line to `log`; return the output's tail."""
    tail: deque[str] = deque(maxlen=40)
    with subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line.strip():
                tail.append(line)
                log(line)
        code = proc.wait()
    text = "\n".join(tail)
    if code != 0:
        if LOCK_BUSY in text:
            raise DvcLockBusy(f"{' '.join(args[2:4])}: {LOCK_BUSY} (another DVC command is running)")
        raise PipelineError(f"{' '.join(args[2:4])} failed (exit {code}): {_last_error(tail)}")
    return text


def _last_error(lines: deque[str]) -> str:
    """DVC's last ERROR line, after the failing stage's own one-line reason."""
    errors = [line for line in lines if line.startswith("ERROR")]
    reasons = [line for line in lines if line.startswith("stage-") and ": " in line]
    last = errors[-1] if errors else (lines[-1] if lines else "no output")
    return f"{reasons[-1]} ({last.strip()})" if reasons else last.strip()


def experiment_name(output: str) -> str | None:
    found = re.search(r"Ran experiment\(s\):\s*(\S+)", output)
    return found.group(1) if found else None


def read_metrics(root: Path, env: dict[str, str]) -> dict[str, dict]:
    """The workspace's metrics files, as declared in dvc.yaml: {path: values}."""
    done = subprocess.run(
        [*DVC, "metrics", "show", "--json"], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise PipelineError(f"dvc metrics show failed: {done.stderr.strip().splitlines()[-1:]}")
    shown = json.loads(done.stdout or "{}")
    files = next(iter(shown.values()), {}).get("data", {}) if shown else {}
    return {path: entry["data"] for path, entry in files.items() if isinstance(entry.get("data"), dict)}
