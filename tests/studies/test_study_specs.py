"""Every committed study declares configurations the pipeline can run: each one's profile
and overrides give a valid params.yaml, with variants from the catalogue."""

from __future__ import annotations

import pytest
import yaml

from eric.config import PROJECT_ROOT, ParamsError, load_params
from studies.spec import all_studies

CONFIGURATIONS = [(spec, name) for spec in all_studies(PROJECT_ROOT) for name in spec.configurations]


@pytest.mark.parametrize("spec, name", CONFIGURATIONS, ids=[f"{s.name}/{n}" for s, n in CONFIGURATIONS])
def test_a_configuration_gives_valid_params(spec, name):
    config = spec.configurations[name]
    profile = PROJECT_ROOT / "flows" / "profiles" / f"{config.profile}.yaml"
    overrides = {**(yaml.safe_load(profile.read_text()) if config.profile else {}), **config.overrides()}
    params = load_params(PROJECT_ROOT / "params.yaml", overrides)
    assert set(params.variants) <= set(params.model.variants)
    for key, value in config.set.items():  # every override reached a setting that exists
        node = params
        for part in key.removeprefix("+").split("."):
            node = node[part] if isinstance(node, dict) else getattr(node, part)
        assert node == value or hasattr(node, "model_dump"), key


def test_an_override_of_a_setting_that_does_not_exist_is_refused():
    with pytest.raises(ParamsError):
        load_params(PROJECT_ROOT / "params.yaml", {"train.no_such_setting": 1})


@pytest.mark.parametrize("spec", all_studies(PROJECT_ROOT), ids=lambda s: s.name)
def test_a_studys_outputs_hold_only_its_kept_configurations(spec):
    """What a mistaken copy leaves beside the configurations (a run's files at outputs/ itself)
    no page reads, so nothing else would notice it."""
    entries = sorted(spec.outputs.iterdir()) if spec.outputs.is_dir() else []
    strays = [p.name for p in entries if p.name not in spec.configurations or not spec.is_done(p.name)]
    assert not strays, f"{spec.outputs}: not a kept configuration: {strays}"
