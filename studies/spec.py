"""What a study declares (studies/<name>/study.yaml) and where its outputs live.

    title: The embedded default and its ablations
    about: one paragraph for the results page
    configurations:            # name -> one pipeline run
      default:
        variants: [eric, bart] # the variants it trains (params.yaml's catalogue)
        profile: null          # flows/profiles/<name>.yaml, applied first
        set: {}                # dotted params.yaml overrides
    runner: run.py             # optional: a study that runs its arms itself
    across_seeds: false        # optional: configurations that differ only in their seed, summarised
    status: "..."              # optional: why its outputs are not (yet) from this code

Outputs: studies/<name>/outputs/<configuration>/ (metrics/, reports/results.md,
dvc.lock, params.yaml, run.json), committed with the code that made them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

RUN_FILE = "run.json"


class Configuration(BaseModel):
    model_config = ConfigDict(extra="forbid")
    variants: list[str] | None = None
    profile: str | None = None
    set: dict[str, Any] = Field(default_factory=dict)

    def overrides(self) -> dict[str, Any]:
        """Its dotted params.yaml overrides, the variants among them."""
        return {**self.set, **({"variants": list(self.variants)} if self.variants else {})}

    def describe(self) -> str:
        parts = [f"variants {','.join(self.variants)}" if self.variants else "params.yaml's variants"]
        parts += [f"profile {self.profile}"] if self.profile else []
        parts += [f"{k}={v}" for k, v in self.set.items()]
        return "; ".join(parts)


class StudySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    about: str = ""
    configurations: dict[str, Configuration] = Field(default_factory=dict)
    runner: str | None = None
    across_seeds: bool = False  # its configurations differ only in the seed: means and intervals over them
    status: str | None = None
    folder: Path = Path()

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def outputs(self) -> Path:
        return self.folder / "outputs"

    def is_done(self, configuration: str) -> bool:
        return (self.outputs / configuration / RUN_FILE).is_file()

    def run(self, configuration: str) -> dict | None:
        path = self.outputs / configuration / RUN_FILE
        return json.loads(path.read_text()) if path.is_file() else None

    def variants(self, configuration: str) -> list[str]:
        """The variants a kept configuration ran (its params.yaml), in their order."""
        path = self.outputs / configuration / "params.yaml"
        declared = (yaml.safe_load(path.read_text()) or {}).get("variants") if path.is_file() else None
        return list(declared) if declared else []

    def metrics(self, configuration: str) -> dict[str, dict]:
        """Kept metrics files of one configuration: {path relative to the run: values}."""
        root = self.outputs / configuration
        return {str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted((root / "metrics").rglob("*.json"))}


def load_study(folder: str | Path) -> StudySpec:
    folder = Path(folder)
    path = folder / "study.yaml"
    if not path.is_file():
        raise ValueError(f"{path}: no study.yaml (a study is a folder under studies/ with one)")
    try:
        return StudySpec(**(yaml.safe_load(path.read_text()) or {}), folder=folder)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def all_studies(root: Path) -> list[StudySpec]:
    return [load_study(p.parent) for p in sorted((root / "studies").glob("*/study.yaml"))]
