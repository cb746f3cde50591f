# LEAD NOTE TO PARALLEL ENGINEERS (temporary): before anything else, read /tmp/common.md (shared context: venv, git discipline, files owned by others).
"""Typed, validated view of params.yaml: the single source of knobs.

Every stage loads its section through `load_params()`. Unknown keys and bad values
fail at load time with one clear line (`ParamsError`), never deep inside a stage.
Each section is its own small model so subsystems can evolve independently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PARAMS = PROJECT_ROOT / "params.yaml"


class ParamsError(ValueError):
    """params.yaml is missing, malformed or holds an invalid value."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CorpusParams(Section):
    name: str = "wikiplots-mini"
    kind: Literal["wikiplots", "cnn", "jsonl"] = "wikiplots"
    path: str = "../shared/data/wikiplots-mini/plots.zip"


class PreprocessParams(Section):
    unit: Literal["sentence"] = "sentence"  # a finer unit (clauses) slots in here later
    min_target_units: int = Field(5, ge=1)
    max_target_units: int = Field(15, ge=1)
    max_units_per_story: int = Field(2000, ge=2)  # longer stories are skipped (counted)
    max_unit_chars: int = Field(2000, ge=10)  # longer "sentences" are markup residue
    raw_char_budget: int = Field(8000, ge=100)  # raw text read per story; 16 units fit
    entity_labels: list[str] = ["PERSON", "ORG"]
    max_entities: int = Field(100, ge=1, le=1000)
    split_ratio: tuple[int, int, int] = (18, 1, 1)
    stage_two_separator: str = " </s> "
    max_stories: int | None = Field(None, ge=1)  # a head of the corpus, for smoke runs
    n_process: int = Field(1, ge=1)
    batch_size: int = Field(64, ge=1)
    out_dir: str = "data/processed"

    @model_validator(mode="after")
    def _check(self) -> "PreprocessParams":
        if self.min_target_units > self.max_target_units:
            raise ValueError("min_target_units must not exceed max_target_units")
        if sum(self.split_ratio) <= 0 or min(self.split_ratio) < 0:
            raise ValueError("split_ratio needs three non-negative weights with a positive sum")
        return self


class EvaluateParams(Section):
    """Table-2 metrics (eric/evaluate): what is scored and how MAUVE featurizes."""

    max_units: int = Field(15, ge=1)  # texts are scored on their first 15 units
    mauve: bool = True
    featurizer: str = "minilm"  # minilm | folder of a local GPT-2 checkpoint (the paper's)
    seed: int = 42  # MAUVE's k-means seed, recorded with every score
    mauve_max_tokens: int = Field(512, ge=8)  # GPT-2: 512 as in the paper; MiniLM caps at 256
    feature_batch_size: int = Field(32, ge=1)
    zipf_top: int = Field(5000, ge=2)


class Params(Section):
    seed: int = 42
    corpus: CorpusParams = CorpusParams()
    preprocess: PreprocessParams = PreprocessParams()
    evaluate: EvaluateParams = EvaluateParams()


def _format_error(err: ValidationError, source: Path) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "<root>"
    return f"{source}: {where}: {first['msg']}"


def load_params(path: str | Path | None = None, overrides: dict | None = None) -> Params:
    """Read and validate params.yaml (plus optional dotted-key overrides)."""
    source = Path(path) if path else DEFAULT_PARAMS
    if not source.is_file():
        raise ParamsError(f"{source}: params file not found")
    try:
        raw = yaml.safe_load(source.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{source}: not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: top level must be a mapping")
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value)
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        raise ParamsError(_format_error(exc, source)) from None


def _set_dotted(tree: dict, dotted: str, value) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def resolve_path(path: str | Path) -> Path:
    """Paths in params.yaml are relative to the project root."""
    p = Path(path)
    return p if p.is_absolute() else PROJECT_ROOT / p
