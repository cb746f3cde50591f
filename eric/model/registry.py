"""Stage-one architectures by name: ERIC and the baselines, one module each.

    cls = architecture("simctg")             # the class a `kind: simctg` variant builds
    cls = architecture_of("models/stage_one/simctg")   # the class of a saved model (config.json)

Every architecture is an `EricForConditionalGeneration` subclass (BART with `<sent>`
tokens and the same save/load/generate), so training, sampling and evaluation treat them
alike. What a baseline adds, it declares on its class:

    config_class        its config (an EricConfig subclass with its own model_type)
    new_modules         parameter-name parts a BART checkpoint lacks (initialized fresh)
    options_model       a pydantic model validating the variant's `options` (None: none allowed)
    extra_columns       stage-one Parquet columns its batches need beyond the defaults
    batch_extras(...)   extra tensors for a batch (cached targets, shuffled copies, ...)
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from eric.config import ARCHITECTURES

# kind -> (module, class); imported on first use so a variant only loads its own code
CLASSES = {
    "eric": ("eric.model.modeling_eric", "EricForConditionalGeneration"),
    "simctg": ("eric.model.simctg", "SimCTGForConditionalGeneration"),
    "hint": ("eric.model.hint", "HintForConditionalGeneration"),
    "plan_ahead": ("eric.model.plan_ahead", "PlanAheadForConditionalGeneration"),
    "discodvt": ("eric.model.discodvt", "DiscoDVTForConditionalGeneration"),
}
assert set(CLASSES) == set(ARCHITECTURES)


def architecture(kind: str):
    if kind not in CLASSES:
        raise ValueError(f"unknown architecture {kind!r}; known: {sorted(CLASSES)}")
    module, name = CLASSES[kind]
    return getattr(importlib.import_module(module), name)


def architecture_of(model_dir: str | Path):
    """The class that saved `model_dir`, from config.json's model_type ("eric" or "eric_<kind>")."""
    path = Path(model_dir) / "config.json"
    model_type = json.loads(path.read_text()).get("model_type", "eric")
    kind = "eric" if model_type == "eric" else model_type.removeprefix("eric_")
    if kind not in CLASSES:
        raise ValueError(f"{path}: model_type {model_type!r} is not a stage-one architecture of this project")
    return architecture(kind)
