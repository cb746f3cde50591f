"""flows/profiles/world.yaml: every key exists in params.yaml and the result validates."""

from __future__ import annotations

import sys

import yaml

from eric.config import PROJECT_ROOT, load_params

PROFILE = PROJECT_ROOT / "flows" / "profiles" / "world.yaml"


def test_the_world_profile_names_known_keys_and_runs_every_variant():
    sys.path.insert(0, str(PROJECT_ROOT / "flows"))
    try:
        from dvc_steps import check_overrides, read_params
    finally:
        sys.path.pop(0)
    overrides = yaml.safe_load(PROFILE.read_text())
    check_overrides(read_params(PROJECT_ROOT), overrides)  # raises on a key params.yaml lacks
    params = load_params(overrides=overrides)
    assert params.corpus.kind == "world"
    assert (PROJECT_ROOT / params.corpus.path).exists()  # the DVC dependency `${corpus.path}`
    assert set(params.variants) == {"eric", "eric_no_state_attention", "eric_no_state",
                                    "eric_no_state_no_entity", "bart"}
