"""Is a kept configuration what the current code would make?

A kept run's dvc.lock records the md5 of every file each stage read and the value of every
setting it read. Its primary inputs (files no stage of the run wrote: code, the corpus) are
compared with the workspace (a folder through DVC's own hash of it, `.dvcignore` applied),
its settings with params.yaml under the configuration's overrides. What a stage of the run
wrote (data, models, samples) is not compared: it follows from the inputs, and a model's bytes
differ between CPUs anyway (docs/model.md)."""

from __future__ import annotations

import copy
import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eric.config import flatten, set_dotted
from studies.spec import StudySpec, all_studies

MISSING = object()
Reader = Callable[[str], "str | None"]
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: a study's dvc.lock has thousands of lines


@dataclass(frozen=True)
class Drift:
    """What changed since a kept run: input files, and settings as `key: old -> new`."""

    files: list[str] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)

    @property
    def current(self) -> bool:
        return not (self.files or self.settings)

    def describe(self, most: int = 6) -> str:
        items = self.files + self.settings
        shown = ", ".join(f"`{i}`" for i in items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")
        return f"{len(self.files)} input file(s) and {len(self.settings)} setting(s) changed since: {shown}"


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@functools.cache
def _dvc_repo(root: Path):
    """The DVC project at `root` (opened once a process: about a second), None where there is none."""
    from dvc.repo import Repo

    return Repo(os.fspath(root)) if (root / ".dvc").is_dir() else None


def folder_md5(root: Path, path: str) -> str | None:
    """DVC's md5 of the folder `path` as the workspace under `root` holds it (what `dvc repro`
    would record: the same tree hash, the project's .dvcignore applied), None when it is absent
    or `root` is no DVC project. A dry run on a stateless store: nothing is written, not even
    DVC's hash-state database (test workers render pages at once)."""
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB

    repo = _dvc_repo(root)
    if repo is None or not (root / path).is_dir():
        return None
    nowhere = HashFileDB(repo.fs, os.fspath(root / ".dvc" / "cache"), read_only=True)
    _, _, tree = build(nowhere, os.fspath(root / path), repo.fs, "md5", ignore=repo.dvcignore, dry_run=True)
    return tree.hash_info.value


def _lookup(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return MISSING
        tree = tree[part]
    return tree


def _show(value: Any) -> str:
    if value is MISSING:
        return "absent"
    text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
    return text if len(text) <= 40 else "(changed)"


def intended_params(params: dict, overrides: dict[str, Any]) -> dict:
    """params.yaml as the configuration asks for it (its `set` and `variants` applied)."""
    out = copy.deepcopy(params)
    for key, value in overrides.items():
        set_dotted(out, key, value)
    return out


def _load(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=LOADER)


def _inputs(stages: dict) -> dict[str, str]:
    """{path: md5} of every dependency that holds nothing a stage of the run wrote (a folder
    such as metrics/train/ holds the training stages' outputs)."""
    written = {Path(o["path"]) for s in stages.values() for o in s.get("outs", [])}
    holders = {parent for w in written for parent in w.parents}
    return {d["path"]: d.get("md5", "") for s in stages.values() for d in s.get("deps", [])
            if (path := Path(d["path"])) not in written and path not in holders and written.isdisjoint(path.parents)}


def _changed_settings(recorded: dict[str, Any], params: dict) -> list[str]:
    """`key: old -> new` for every leaf setting that differs (a stage may read a whole section)."""
    old = flatten(recorded)
    new = flatten({k: v for k in recorded if (v := _lookup(params, k)) is not MISSING})
    return [f"{k}: {_show(old.get(k, MISSING))} -> {_show(new.get(k, MISSING))}"
            for k in sorted(set(old) | set(new)) if old.get(k, MISSING) != new.get(k, MISSING)]


def _own_stages(lock: dict, variants) -> dict:
    """The kept lock's stages less the per-variant ones (`<stage>@<variant>`) of variants the
    configuration does not train (carried from the project's dvc.lock it was checked out with)."""
    variants = set(variants or [])
    return {name: stage for name, stage in (lock.get("stages") or {}).items()
            if "@" not in name or not variants or name.split("@", 1)[1] in variants}


def kept_inputs(folder: Path, variants: list[str]) -> dict[str, str]:
    """{path: md5} of the primary inputs (code, corpus) a kept configuration's own stages read,
    as its dvc.lock records them ({} without one): two configurations ran at one code where
    every path both read has one md5."""
    lock = folder / "dvc.lock"
    return _inputs(_own_stages(_load(lock) or {}, variants)) if lock.is_file() else {}


def drift(lock: dict, params: dict, root: Path, current_lock: dict | None = None) -> Drift:
    """Compare a kept dvc.lock with the workspace under `root` and the intended `params`.
    A folder input (a package of eric/) is hashed as the workspace holds it; one the workspace
    lacks is compared through the current dvc.lock's record of it.
    Per-variant stages (`<stage>@<variant>`) of variants the configuration does not train are
    left out: the kept lock carries them from the project's dvc.lock the run was checked out
    with, not from this run."""
    stages = _own_stages(lock, params.get("variants"))
    recorded_now = {d["path"]: d.get("md5") for s in ((current_lock or {}).get("stages") or {}).values()
                    for d in s.get("deps", [])}
    files = []
    for path, md5 in sorted(_inputs(stages).items()):
        if md5.endswith(".dir"):
            now = folder_md5(root, path) or recorded_now.get(path, md5)
            if now != md5:
                files.append(path + "/")
        elif not (root / path).is_file() or _md5(root / path) != md5:
            files.append(path)
    recorded = {k: v for s in stages.values() for k, v in ((s.get("params") or {}).get("params.yaml") or {}).items()}
    return Drift(files, _changed_settings(recorded, params))


def configuration_drift(folder: Path, overrides: dict[str, Any], root: Path, read: Reader | None = None) -> Drift | None:
    """The drift of a kept configuration (`folder`: its outputs), None when it keeps no dvc.lock.
    `read(rel)`: the text of the project's params.yaml and current dvc.lock (default: the
    workspace's; the docs test reads them as committed, since `dvc repro` rewrites dvc.lock)."""
    lock = folder / "dvc.lock"
    if not lock.is_file():
        return None
    read = read or (lambda rel: (root / rel).read_text() if (root / rel).is_file() else None)
    params = intended_params(yaml.load(read("params.yaml") or "{}", Loader=LOADER) or {}, overrides)
    current = read("dvc.lock")
    return drift(_load(lock) or {}, params, root, yaml.load(current, Loader=LOADER) if current else None)


def study_drift(spec: StudySpec, configuration: str, root: Path, read: Reader | None = None) -> Drift | None:
    """What changed in code and settings since a study's kept configuration ran (its profile,
    flows/profiles/<name>.yaml, applied before its own overrides, as the pipeline flow does)."""
    config = spec.configurations[configuration]
    profile = _load(root / "flows" / "profiles" / f"{config.profile}.yaml") if config.profile else {}
    return configuration_drift(spec.outputs / configuration, {**(profile or {}), **config.overrides()}, root, read)


def older(found: Drift | None) -> bool:
    """Kept with a dvc.lock, and something it read has changed since."""
    return found is not None and not found.current


def retired_note(spec: StudySpec) -> str | None:
    """What a study keeps from a retired runner (no dvc.lock: no provenance check), or None."""
    if spec.retired is None or not (spec.folder / "retired").is_dir():
        return None
    return (f"outputs kept from the retired runner {spec.retired.runner} (last at {spec.retired.commit}) in "
            f"studies/{spec.name}/retired/: no dvc.lock, not checked; the study's next run replaces them")


def verdicts(spec: StudySpec, root: Path) -> list[tuple[str, Drift | None]]:
    """(line, drift) for each kept configuration of a study, and one line for what it lacks."""
    lines = []
    for name in (n for n in spec.configurations if spec.is_done(n)):
        found = study_drift(spec, name, root)
        verdict = "no dvc.lock kept" if found is None else "at this code" if found.current else found.describe()
        lines.append((f"studies/{spec.name} {name}: {verdict}", found))
    missing = sum(not spec.is_done(n) for n in spec.configurations)
    if missing:
        lines.append((f"studies/{spec.name}: {missing} of {len(spec.configurations)} configurations not run", None))
    if (note := retired_note(spec)) is not None:
        lines.append((f"studies/{spec.name}: {note}", None))
    return lines


def main(root: Path | None = None) -> int:
    """`python -m studies.currency`: every study's verdict, each kept configuration at this
    code or what changed; exit 1 when one ran at older code."""
    root = root or Path(__file__).resolve().parents[1]
    late = 0
    for spec in all_studies(root):
        for line, found in verdicts(spec, root):
            late += older(found)
            print(line)
    if late:
        print(f"{late} kept configuration(s) ran at older code: python flows/study.py studies/<name> --stale")
    return 1 if late else 0


if __name__ == "__main__":
    raise SystemExit(main())
