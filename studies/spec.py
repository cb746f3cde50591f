"""What a study declares (studies/<name>/study.yaml) and where its outputs live.

    title: The embedded default and its ablations
    about: one paragraph for the results page
    configurations:            # name -> one pipeline run
      default:
        variants: [eric, bart] # the variants it trains (params.yaml's catalogue)
        profile: null          # flows/profiles/<name>.yaml, applied first
        set: {}                # dotted params.yaml overrides
    grids:                     # optional: configurations <grid>-<arm>-seed<k>, arm x seed
      world:
        profile: world
        set: {}                # every arm's overrides
        seeds: [1, 2, 3]
        arms:
          eric: {variants: [eric], set: {}, seeds: null}   # seeds: this arm's own, else the grid's
    across_seeds: false        # optional: configurations that differ only in their seed, summarised
    retired:                   # optional: outputs a retired runner kept in retired/, until reruns replace them
      runner: studies/<name>/run.py
      commit: abcdef1          # the last commit that had it

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


class Arm(BaseModel):
    model_config = ConfigDict(extra="forbid")
    variants: list[str]
    set: dict[str, Any] = Field(default_factory=dict)
    seeds: list[int] | None = None


class Grid(BaseModel):
    """Arms x seeds on one corpus and budget: every arm once per seed, paired by seed."""

    model_config = ConfigDict(extra="forbid")
    profile: str | None = None
    set: dict[str, Any] = Field(default_factory=dict)
    seeds: list[int]
    arms: dict[str, Arm]

    def configurations(self, grid: str) -> dict[str, Configuration]:
        return {f"{grid}-{name}-seed{seed}": Configuration(variants=arm.variants, profile=self.profile,
                                                           set={**self.set, **arm.set, "seed": seed})
                for name, arm in self.arms.items() for seed in (arm.seeds or self.seeds)}


class Retired(BaseModel):
    """Outputs a retired runner script kept (studies/<name>/retired/): no dvc.lock, so no
    provenance check; shown as such until the study's own configurations replace them."""

    model_config = ConfigDict(extra="forbid")
    runner: str
    commit: str


class StudySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    about: str = ""
    configurations: dict[str, Configuration] = Field(default_factory=dict)
    grids: dict[str, Grid] = Field(default_factory=dict)
    across_seeds: bool = False  # its configurations differ only in the seed: means and intervals over them
    retired: Retired | None = None
    folder: Path = Path()

    def model_post_init(self, _context: Any) -> None:
        for grid, spec in self.grids.items():
            self.configurations.update(spec.configurations(grid))

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def outputs(self) -> Path:
        return self.folder / "outputs"

    def select(self, only: list[str] | None = None, seeds: list[int] | None = None) -> list[str]:
        """The configurations to run, in the order study.yaml declares them: those `only` names
        (each must be one), of the `seeds` given (a configuration's `seed` setting); all by default."""
        unknown = sorted(set(only or ()) - set(self.configurations))
        if unknown:
            raise ValueError(f"{self.name}: no configuration {', '.join(unknown)} (study.yaml declares them)")
        names = [name for name, config in self.configurations.items()
                 if (not only or name in only) and (not seeds or config.set.get("seed") in seeds)]
        if not names:
            raise ValueError(f"{self.name}: no configuration of seed {', '.join(map(str, seeds or ()))}"
                             f"{' among ' + ', '.join(only) if only else ''}")
        return names

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
