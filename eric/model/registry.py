"""Stage-one architectures by kind: ERIC and the baselines, one module each.

    cls = architecture("simctg")             # the class a `kind: simctg` variant builds
    cls = architecture("my_pkg.my_baseline") # a baseline kept outside eric/model
    cls = architecture_of("models/stage_one/simctg")   # the class of a saved model (config.json)

A kind names its module: `eric` is eric/model/modeling_eric.py, another plain name is
eric/model/<kind>.py, a dotted name is that module itself. The module declares its class as
`ARCHITECTURE`, and that class's config has model_type "eric_<kind>" (ERIC's: "eric"), so a
saved model names its kind. Adding a baseline is its module plus a `model.variants` entry.

Every architecture is an `EricForConditionalGeneration` subclass (BART with `<sent>`
tokens and the same save/load/generate), so training, sampling and evaluation treat them
alike. What a baseline adds, it declares on its class:

    config_class        its config: an EricConfig subclass with its own model_type, declared as
                        `class MyConfig(EricConfig, options=MyOptions)`: the pydantic model of the
                        variant's `options`, whose every field becomes a config field (declared once)
    new_modules         parameter-name parts a BART checkpoint lacks (initialized fresh)
    extra_columns       stage-one Parquet columns its batches need beyond the defaults
    batch_extras(...)   extra tensors for a batch (cached targets, shuffled copies, ...)
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import eric.model

ERIC_MODULE = "eric.model.modeling_eric"


def module_of(kind: str) -> str:
    if kind == "eric":
        return ERIC_MODULE
    return kind if "." in kind else f"eric.model.{kind}"


def architecture(kind: str):
    """The class of `kind`; ValueError (one line) when no module declares one."""
    name = module_of(kind)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):  # the kind's own module, not one it imports
            raise ValueError(f"unknown architecture {kind!r}: no module {name} (known: {builtin_kinds()})") from None
        raise
    cls = getattr(module, "ARCHITECTURE", None)
    if cls is None:
        raise ValueError(f"unknown architecture {kind!r}: {name} declares no ARCHITECTURE")
    return cls


def builtin_kinds() -> list[str]:
    """The kinds whose modules live in eric/model (found by their ARCHITECTURE line, no import)."""
    folder = Path(eric.model.__path__[0])
    found = [p.stem for p in folder.glob("*.py") if p.stem != "modeling_eric" and "\nARCHITECTURE = " in p.read_text()]
    return sorted(["eric", *found])


def architecture_of(model_dir: str | Path):
    """The class that saved `model_dir`, from config.json's model_type ("eric" or "eric_<kind>")."""
    path = Path(model_dir) / "config.json"
    model_type = json.loads(path.read_text()).get("model_type", "eric")
    kind = "eric" if model_type == "eric" else model_type.removeprefix("eric_")
    if model_type != "eric" and not model_type.startswith("eric_"):
        raise ValueError(f"{path}: model_type {model_type!r} is not a stage-one architecture of this project")
    try:
        return architecture(kind)
    except ValueError:
        raise ValueError(f"{path}: model_type {model_type!r} is not a stage-one architecture of this project") from None
