"""A new architecture is one module plus one `model.variants` entry (issue 26): a toy baseline
kept in tests/ (tests/model/toy_architecture.py) trains through the real stage, saves, loads
back by its config's model_type and samples, with no edit anywhere in eric/ or stages/."""

from __future__ import annotations

import pytest
import yaml

from eric.config import ParamsError, load_params
from tests.train.test_stages import read_csv, workspace  # noqa: F401  (the fixture)

KIND = "tests.model.toy_architecture"


@pytest.fixture(scope="module")
def toy_params(workspace):  # noqa: F811
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    params["model"]["variants"]["toy"] = {"kind": KIND, "options": {"bias_weight": 0.5}}  # the one entry
    root = workspace / "toy"
    params["train"].update(max_steps=2, mlflow=False, checkpoint_dir=str(root / "ckpt"), out_dir=str(root / "models"),
                           metrics_dir=str(root / "metrics"), plots_dir=str(root / "plots"))
    path = workspace / "toy.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def test_a_toy_variant_trains_saves_loads_and_samples(toy_params):
    import train_stage_one

    from eric.generate.loading import load_stage_one
    from eric.generate.sampler import SamplingOptions, sample_stage_one
    from eric.model.registry import architecture
    from tests.model.toy_architecture import ToyForConditionalGeneration

    assert architecture(KIND) is ToyForConditionalGeneration
    metrics = train_stage_one.run.fn("toy", str(toy_params))
    assert metrics["steps"] == 2
    params = load_params(toy_params)
    curve = read_csv(params.train.plots_dir + "/toy.csv")
    assert all(float(row["bias_loss"]) >= 1.0 for row in curve)  # its own loss term, logged by name
    model, tokenizer = load_stage_one(f"{params.train.out_dir}/toy", variant="toy")
    assert type(model) is ToyForConditionalGeneration and model.config.bias_weight == 0.5
    assert not model.config.two_stage  # no ERIC mechanism: one-stage by default, as every baseline
    samples = sample_stage_one(model, tokenizer, ["Ash Williams arrives in a small town."],
                               SamplingOptions(max_length=24, progress=False))
    assert len(samples) == 1 and samples[0].text


def test_an_unknown_kind_or_option_is_one_line(toy_params):
    from eric.model.variants import resolve_variant

    params = load_params(toy_params)
    bad = params.model.model_copy(update={"variants": {
        "nope": params.model.variants["bart"].model_copy(update={"kind": "no_such_kind"}),
        "toy": params.model.variants["toy"].model_copy(update={"options": {"bias_weight": -1}})}})
    with pytest.raises(ParamsError, match="model.variants.nope: unknown architecture 'no_such_kind'"):
        resolve_variant(bad, "nope")
    with pytest.raises(ParamsError, match=r"model.variants.toy: .*bias_weight") as info:
        resolve_variant(bad, "toy")
    assert "\n" not in str(info.value)


def test_an_option_is_declared_once_on_its_options_model():
    """`class ToyConfig(EricConfig, options=ToyOptions)`: each option is a config field with the
    options model's default, config.json round-trips it, and a bad value fails on the options
    model's bound; the built-in baselines are declared the same way."""
    import dataclasses

    from eric.model.registry import architecture
    from tests.model.toy_architecture import ToyConfig, ToyOptions

    assert {f.name for f in dataclasses.fields(ToyConfig)} >= set(ToyOptions.model_fields)
    assert ToyConfig().bias_weight == ToyOptions().bias_weight == 0.1
    assert ToyConfig.from_dict(ToyConfig(bias_weight=2).to_dict()).bias_weight == 2
    with pytest.raises(Exception, match="bias_weight"):
        ToyConfig(bias_weight=-1.0)
    for kind in ("simctg", "hint", "plan_ahead", "discodvt"):
        config_class = architecture(kind).config_class
        defaults = config_class.options_model().model_dump()
        config = config_class()
        kept = {"posterior"} if kind == "discodvt" else set()  # an older config.json's meaning (see its class)
        assert {k: getattr(config, k) for k in defaults if k not in kept} == {k: v for k, v in defaults.items()
                                                                               if k not in kept}, kind
