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
