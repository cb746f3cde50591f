"""One declaration per ERIC setting (issue 42, 5a): each of EricConfig's ERIC fields is declared
once, in eric/config.py (EricSettings, SWITCHES of VariantParams, StateSpaceParams), with its
default, bounds and comment; EricConfig derives the field from there and build_config passes the
settings through by name. These fail when a setting is declared or copied by hand again."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from transformers import BartConfig

from eric.config import (
    PAPER_VALUES,
    RECIPES,
    SWITCHES,
    EricSettings,
    ModelParams,
    StateSpaceParams,
    VariantParams,
)
from eric.model.config import EricConfig, eric_fields
from eric.model.registry import architecture
from eric.model.variants import build_config
from tests.model.architecture_suite import IDS

MODEL = Path(__file__).resolve().parents[2] / "eric" / "model"
TOKEN_FIELDS = {"sent_token_id", "entity_token_ids"}  # EricConfig's own: the tokenizer's ids, not settings
DECLARED = set(EricSettings.model_fields) | set(SWITCHES.values()) | set(StateSpaceParams.model_fields) - {"recipe"}
BASELINES = ("simctg", "hint", "plan_ahead", "discodvt")


def _own_fields(config_class) -> set[str]:
    return {f.name for f in dataclasses.fields(config_class)} - {f.name for f in dataclasses.fields(BartConfig)}


def test_every_eric_field_of_the_config_has_one_declaration():
    """EricConfig's fields beyond BART's are the declared settings and the token ids, nothing else:
    a setting added to EricConfig by hand (without a declaration in eric/config.py) fails here."""
    assert set(eric_fields()) == DECLARED
    assert _own_fields(EricConfig) == DECLARED | TOKEN_FIELDS
    for kind in BASELINES:  # a baseline adds its options (declared on its options model) and nothing else
        config_class = architecture(kind).config_class
        assert _own_fields(config_class) == DECLARED | TOKEN_FIELDS | set(config_class.options_model.model_fields)


def test_the_config_defaults_are_the_declared_ones():
    """Derived, not copied: EricSettings' defaults (the paper's where PAPER_VALUES says params.yaml
    takes the code's), the switches' (every mechanism on), the paper recipe's for the state space."""
    defaults = {f.name: f.default for f in dataclasses.fields(EricConfig)}
    config = EricConfig()
    for name, field in EricSettings.model_fields.items():
        assert defaults[name] == getattr(config, name) == PAPER_VALUES.get(name, field.default), name
    for mechanism, switch in SWITCHES.items():
        assert defaults[switch] == getattr(config, switch) == VariantParams.model_fields[mechanism].default is True
    for name, value in RECIPES["paper"].items():
        assert defaults[name] == getattr(config, name) == value, name
    # an exception names a real setting whose params.yaml default is not the paper's
    for name, paper in PAPER_VALUES.items():
        assert name in EricSettings.model_fields and EricSettings.model_fields[name].default != paper


def _hand_declared(path: Path, names: set[str]) -> list[str]:
    """`name: type = default` (or `name = ...`) of a setting in a config class body of `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name.endswith("Config"):
            for statement in node.body:
                targets = ([statement.target] if isinstance(statement, ast.AnnAssign)
                           else statement.targets if isinstance(statement, ast.Assign) else [])
                found += [f"{path.name}: {node.name}.{t.id}" for t in targets if isinstance(t, ast.Name) and t.id in names]
    return found


def test_no_setting_is_declared_or_copied_by_hand_in_eric_model():
    """No config class of eric/model writes a setting's line again, and variants.py passes the
    settings as one mapping (ModelParams.eric_settings, VariantParams.switches), never name by name."""
    assert [hit for path in sorted(MODEL.glob("*.py")) for hit in _hand_declared(path, DECLARED)] == []
    variants = ast.parse((MODEL / "variants.py").read_text())
    by_name = sorted({node.arg for node in ast.walk(variants) if isinstance(node, ast.keyword) and node.arg in DECLARED})
    assert by_name == []


def _changed(name: str, value):
    """A valid value other than the default (within the declared bounds)."""
    if isinstance(value, bool):
        return not value
    return value + 1 if isinstance(value, int) else value / 2


def test_build_config_passes_every_setting_through():
    settings = {name: _changed(name, field.default) for name, field in EricSettings.model_fields.items()}
    settings["state_attention_heads"] = 2  # D = 129 would not split into 2 heads
    settings["state_dim"] = 64
    params = ModelParams(**settings, variants={"v": {"state_attention": False}},
                         state_space={"recipe": "decoupled", "ema_decay": 0.5, "codebook_init_std": 0.3})
    config = build_config(params, "v", 200, IDS)
    expected = {**settings, **params.state_space.resolved(), **params.variants["v"].switches}
    assert expected.keys() == set(eric_fields())
    assert {name: getattr(config, name) for name in expected} == expected
    assert not config.use_state_attention and config.ema_decay == 0.5 and config.event_gradient == "contrastive"


@pytest.mark.parametrize(("name", "value", "message"), [
    ("num_states", 0, "num_states: Input should be greater than or equal to 1"),
    ("max_entities", 1001, "max_entities: Input should be less than or equal to 1000"),  # params.yaml's bound
    ("lambda_entity", -1.0, "lambda_entity: Input should be greater than or equal to 0"),
    ("codebook_gradient", "sideways", "codebook_gradient: Input should be 'dense' or 'selected'"),
    ("ema_decay", 1.0, "ema_decay: Input should be less than 1"),
    ("tau", "0.1", "tau"),  # the type config.json holds: a number
])
def test_the_config_checks_each_value_against_its_declaration(name, value, message):
    with pytest.raises(Exception, match=message):
        EricConfig(**{name: value})


def test_an_older_config_json_loads_as_it_was():
    """Every ERIC key keeps its name and meaning: a config.json without them reads the paper's
    defaults (as EricConfig read it before the settings were derived), and `ema_decay: null` (older
    configs: off) loads."""
    saved = build_config(ModelParams(max_entities=5), "eric", 200, IDS).to_dict()
    assert set(eric_fields()) <= saved.keys()
    assert EricConfig.from_dict(saved).to_dict() == saved
    older = {k: v for k, v in saved.items() if k not in eric_fields()} | {"ema_decay": None}
    loaded = EricConfig.from_dict(older)
    assert loaded.ema_decay is None and not loaded.detach_planner_inputs and loaded.predictor_scale == "none"
    assert {name: getattr(loaded, name) for name in eric_fields() if name != "ema_decay"} == {
        name: default for name, (_, default) in eric_fields().items() if name != "ema_decay"}
