import pytest

from eric.config import ParamsError, load_params


def test_project_params_load():
    params = load_params()
    assert params.corpus.kind == "wikiplots"
    assert params.preprocess.max_entities == 100


def test_unknown_key_fails_with_its_location(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("preprocess:\n  max_entitys: 5\n")
    with pytest.raises(ParamsError, match=r"preprocess\.max_entitys: Extra inputs are not permitted"):
        load_params(path)


def test_bad_value_fails_at_load_time(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("corpus:\n  kind: epub\n")
    with pytest.raises(ParamsError, match=r"corpus\.kind"):
        load_params(path)


def test_inconsistent_values_fail(tmp_path):
    with pytest.raises(ParamsError, match="min_target_units"):
        load_params(None, {"preprocess.min_target_units": 9, "preprocess.max_target_units": 3})


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(bad)


def test_unknown_variant_fails_in_one_line():
    from eric.config import load_variant_params

    assert load_variant_params(None, "eric").model.variants["eric"]
    with pytest.raises(ParamsError, match="unknown variant 'ericc'"):
        load_variant_params(None, "ericc")


def test_a_variant_is_two_stage_when_it_keeps_an_eric_mechanism_unless_it_says_so():
    from eric.config import DEFAULT_VARIANTS, VariantParams

    forms = {name: v.two_stage for name, v in DEFAULT_VARIANTS.items()}
    assert forms == {"eric": True, "eric_no_state_attention": True, "eric_no_state": True,
                     "eric_no_state_no_entity": True, "bart": False, "seq2seq": False, "simctg": False,
                     "plan_ahead": False, "hint": False, "discodvt": False}
    off = {"state_attention": False, "state": False, "entity": False}
    assert VariantParams(**off, two_stage=True).two_stage  # BART in ERIC's two stages: an option
    assert not VariantParams(**{**off, "state_attention": True}, two_stage=False).two_stage
    with pytest.raises(ValueError, match="a variant with entity needs two_stage"):
        VariantParams(state=False, two_stage=False)
