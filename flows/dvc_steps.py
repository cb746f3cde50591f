"""Running the DVC pipeline from a flow: DVC stays the single truth, and the
user's workspace is never touched.

Every execution is a DVC experiment (`dvc exp run [-S key=value ...]`) run in a
checkout of its own: a git worktree of HEAD under .dvc/tmp/eric-runs/<key>-<id> (plus
the workspace's uncommitted changes, as `dvc exp run` would take them), sharing
the project's DVC cache. Its results stay there until the flow has read them
(metrics, report, models); the worktree is then removed (a killed execution's stays
until the next execution of its configuration resumes from it: flows/executions.py). The experiment remains:
listed by `dvc exp show`, applied on purpose with `dvc exp apply <name>`, its
outputs in the shared cache. params.yaml, dvc.lock and every output in the
workspace keep what they were.

(Not `dvc exp run --temp`: its temporary copy loses the git-ignored `cache: false`
outputs - metrics, reports - before the flow can read them.)
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

DVC = [sys.executable, "-m", "dvc"]
LOCK_BUSY = "Unable to acquire lock"
DELETE = "~"  # an override key "~a.b" removes a.b from params.yaml (Hydra's syntax)
ADD = "+"  # an override key "+a.b" adds b to a, a key params.yaml leaves at its default (Hydra's syntax)


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
    """Fail in one line before DVC starts if a key is not in params.yaml (for "+a.b": if a is
    not, or b already is)."""
    for key in overrides:
        node: Any = params
        *parents, last = key.removeprefix(DELETE).removeprefix(ADD).split(".")
        for part in parents:
            if not isinstance(node, dict) or part not in node:
                raise OverrideError(f"override {key!r}: params.yaml has no such key")
            node = node[part]
        adding = key.startswith(ADD)
        if not isinstance(node, dict) or (last in node) == adding:
            raise OverrideError(f"override {key!r}: params.yaml {'already has' if adding else 'has no such key'}")


def dvc_command(overrides: Mapping[str, Any], exp_name: str | None = None, force: bool = False) -> list[str]:
    """`dvc exp run` with the overrides: an experiment, even with none (then the
    committed params, as `dvc repro` would run them)."""
    args = [*DVC, "exp", "run", *(["--force"] if force else []), *(["--name", exp_name] if exp_name else [])]
    for key, value in overrides.items():
        args += ["-S", key if key.startswith(DELETE) else f"{key}={hydra_value(value)}"]
    return args


RUNS_DIR = Path(".dvc") / "tmp" / "eric-runs"  # git-ignored by DVC's own .dvc/.gitignore


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PipelineError(f"git {args[0]} failed in {root}: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return done.stdout


def workspace_changes(root: Path) -> list[str]:
    """Files that differ from HEAD: modified tracked files and untracked, not ignored ones."""
    listed = _git(root, "ls-files", "-z", "--modified", "--others", "--exclude-standard")
    return sorted({p for p in listed.split("\0") if p})


def cache_dir(root: Path, env: Mapping[str, str]) -> str:
    done = subprocess.run([*DVC, "cache", "dir"], cwd=root, env=dict(env), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PipelineError(f"dvc cache dir failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return done.stdout.strip()


def isolated_checkout(root: Path, name: str, outside: list[str], env: Mapping[str, str]) -> Path:
    """A git worktree of HEAD at .dvc/tmp/eric-runs/<name> with the workspace's changes
    copied in and the project's DVC cache; `outside`: relative paths that leave the
    project (../corpora/...), linked so that they resolve from the worktree as well."""
    runs = root / RUNS_DIR
    checkout = runs / name
    if checkout.exists():
        remove_checkout(root, checkout)
    runs.mkdir(parents=True, exist_ok=True)
    _git(root, "worktree", "add", "--quiet", "--detach", str(checkout), "HEAD")
    for rel in workspace_changes(root):
        src, dst = root / rel, checkout / rel
        if src.is_file() and not src.is_symlink():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        elif not src.exists() and dst.exists():  # deleted in the workspace
            dst.unlink()
    for rel in outside:
        parts = Path(rel).parts
        ups = next((i for i, p in enumerate(parts) if p != ".."), len(parts))
        if ups == 0 or ups == len(parts) or Path(rel).is_absolute():
            continue
        first = parts[ups]  # ../corpora/x -> `corpora`, beside the worktree as beside the project
        target = Path(os.path.normpath(root.joinpath(*parts[: ups + 1]))).resolve()
        link = Path(os.path.normpath(checkout.joinpath(*parts[: ups + 1])))
        if not link.exists() and not link.is_symlink() and target.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
    subprocess.run([*DVC, "config", "--local", "cache.dir", cache_dir(root, env)], cwd=checkout, env=dict(env),
                   capture_output=True, text=True, check=True)
    return checkout


def remove_checkout(root: Path, checkout: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=root, capture_output=True, check=False)
    if checkout.exists():
        shutil.rmtree(checkout, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True, check=False)


@contextmanager
def one_experiment_at_a_time(root: Path, log: Callable[[str], None]) -> Iterator[None]:
    """DVC keeps a running experiment's state in refs that every worktree of a repository
    shares (refs/exps/exec/*): two `dvc exp run` at once in two checkouts overwrite each
    other's, and the later one fails when it commits its experiment. So executions of one
    project queue here (an OS lock: released even when a run is killed)."""
    path = root / RUNS_DIR / ".experiment.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("another execution of this project is running (DVC runs one experiment at a time per "
                "repository): waiting for it to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


# DVC lines that read otherwise than they mean inside an execution's own worktree
EXPLAINED = {
    "Experiment results have been applied to your workspace":
        "(DVC means this execution's worktree, {cwd}: the project's workspace is left as it was)",
    "No file hash info found for":
        "(an output dvc.lock holds no hash for yet, e.g. a new one: the stage that writes it runs next)",
}


def explain(line: str, cwd: Path) -> str:
    """`line`, with what it means here appended when DVC's wording would mislead."""
    for start, note in EXPLAINED.items():
        if start in line:
            return f"{line} {note.format(cwd=cwd)}"
    return line


def run_streaming(args: list[str], cwd: Path, env: dict[str, str], log: Callable[[str], None]) -> str:
    """Run `args`, passing each output line to `log` (explained where DVC's wording
    misleads); return the output's tail."""
    tail: deque[str] = deque(maxlen=40)
    with subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line.strip():
                tail.append(line)
                log(explain(line, cwd))
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


KEPT_FILES = ("dvc.lock", "params.yaml", "reports/results.md")  # with the metrics: what a study keeps


def keep_outputs(checkout: Path, metric_paths: list[str], dest: Path) -> list[str]:
    """Copy what a study publishes from an execution's checkout into `dest` (replaced
    whole): the metrics files, the report's markdown, and the dvc.lock and params.yaml
    that say exactly what ran. Models stay in the DVC cache. Returns the copied paths."""
    if dest.exists():
        shutil.rmtree(dest)
    kept = []
    for rel in [*KEPT_FILES, *sorted(metric_paths)]:
        src = checkout / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
            kept.append(rel)
    return kept
