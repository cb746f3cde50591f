"""flows/pipeline.py: deployment parameters -> the overrides DVC applies.

The flow itself runs in tests/e2e, under a worker, against real servers."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from dvc_steps import OverrideError
from pipeline import (
    resumable,
    PROFILES,
    _parse_args,
    effective_params,
    gather_overrides,
    mlflow_experiment,
    outside_paths,
    pipeline,
    profile_overrides,
)

from eric.config import DEFAULT_PARAMS

PARAMS = {
    "seed": 42,
    "corpus": {"name": "wikiplots-mini", "kind": "wikiplots", "path": "x.zip"},
    "model": {"init": None, "variants": {"eric": {}, "eric_no_state": {}, "bart": {}}},
    "mentions": {"init": None},
    "preprocess": {"max_stories": None},
    "variants": ["eric", "bart"],
}
NO_CORPUS = {"corpus_path": None, "corpus_kind": None, "corpus_name": None}


def test_an_added_key_goes_under_a_key_params_yaml_has():
    found = gather_overrides(PARAMS, None, {"+model.variants.bart.two_stage": True}, None, NO_CORPUS, None)
    assert found == {"+model.variants.bart.two_stage": True}


def test_the_embedded_default_has_no_overrides():
    assert gather_overrides(PARAMS, None, None, None, NO_CORPUS, None) == {}


def test_smoke_profile_applies_to_the_real_params_yaml():
    smoke = profile_overrides("smoke")
    assert smoke and all(isinstance(k, str) for k in smoke)
    params = yaml.safe_load(DEFAULT_PARAMS.read_text())
    assert gather_overrides(params, "smoke", None, None, NO_CORPUS, None) == smoke


def test_every_deployment_parameter_maps_onto_the_real_params_yaml():
    params = yaml.safe_load(DEFAULT_PARAMS.read_text())
    corpus = {"corpus_path": "/data/wikibio.jsonl.gz", "corpus_kind": "jsonl", "corpus_name": "wikibio"}
    merged = gather_overrides(params, "smoke", None, None, corpus, "/models/bart-base")
    assert merged["corpus.kind"] == "jsonl" and merged["model.init"] == "/models/bart-base"
    chosen = list(params["variants"])[:1]
    assert chosen, "params.yaml names no variants"
    assert gather_overrides(params, None, None, chosen, NO_CORPUS, None)["variants"] == chosen


def test_explicit_overrides_win_over_the_profile():
    params = yaml.safe_load(DEFAULT_PARAMS.read_text())
    merged = gather_overrides(params, "smoke", {"preprocess.max_stories": 7}, None, NO_CORPUS, None)
    assert merged["preprocess.max_stories"] == 7 != profile_overrides("smoke")["preprocess.max_stories"]


def test_custom_corpus_and_model_init_map_to_params_keys():
    corpus = {"corpus_path": "/data/cnn_stories.tgz", "corpus_kind": "cnn", "corpus_name": None}
    merged = gather_overrides(PARAMS, None, None, None, corpus, "/models/bart-base")
    assert merged == {
        "corpus.path": "/data/cnn_stories.tgz",
        "corpus.kind": "cnn",
        "model.init": "/models/bart-base",
        "mentions.init": "/models/bart-base",
    }
    without_stage_two = {k: v for k, v in PARAMS.items() if k != "mentions"}
    assert set(gather_overrides(without_stage_two, None, None, None, NO_CORPUS, "/m")) == {"model.init"}


def test_a_sweep_picks_declared_variants_from_a_list_or_a_mapping():
    assert gather_overrides(PARAMS, None, None, ["bart", "eric"], NO_CORPUS, None) == {"variants": ["bart", "eric"]}
    # any variant of the model.variants catalog, not only those `dvc repro` runs now
    assert gather_overrides(PARAMS, None, None, ["eric_no_state"], NO_CORPUS, None) == {"variants": ["eric_no_state"]}
    knobs = {"seed": 1, "variants": {"eric": {"states": 8}, "bart": {"states": 0}, "x": {}}}
    assert gather_overrides(knobs, None, None, ["bart"], NO_CORPUS, None) == {"~variants.eric": None, "~variants.x": None}


@pytest.mark.parametrize(
    "args, message",
    [
        (("nope", None, None, None), "no profile 'nope'.*known: .*smoke"),
        ((None, {"train.lr": 1}, None, None), "'train.lr': params.yaml has no such key"),
        ((None, {"+seed": 1}, None, None), r"'\+seed': params.yaml already has"),
        ((None, {"+nope.two_stage": 1}, None, None), r"'\+nope.two_stage': params.yaml has no such key"),
        ((None, None, ["eric", "gpt2"], None), r"unknown variant\(s\) \['gpt2'\]"),
    ],
)
def test_bad_parameters_fail_in_one_line_before_dvc_runs(args, message):
    profile, overrides, variants, model_init = args
    with pytest.raises(OverrideError, match=message):
        gather_overrides(PARAMS, profile, overrides, variants, NO_CORPUS, model_init)


def test_a_sweep_needs_declared_variants():
    with pytest.raises(OverrideError, match="no `variants` list"):
        gather_overrides({"seed": 1}, None, None, ["eric"], NO_CORPUS, None)


def test_every_profile_file_is_a_flat_mapping_of_dotted_keys():
    for path in PROFILES.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        assert isinstance(data, dict) and all(not isinstance(v, dict) for v in data.values()), path


def test_the_mlflow_experiment_is_the_corpus_name():
    assert mlflow_experiment(PARAMS, {}) == "wikiplots-mini"
    assert mlflow_experiment(PARAMS, {"corpus.name": "cnn"}) == "cnn"
    # a smoke run (2 steps a model) keeps out of the corpus's record and its registry's "latest"
    assert mlflow_experiment(PARAMS, {}, "smoke") == "wikiplots-mini-smoke"
    assert mlflow_experiment(PARAMS, {}, "world") == "wikiplots-mini"  # a real profile stays in the record


def test_command_line_arguments():
    kwargs = _parse_args(["--profile", "smoke", "-S", "preprocess.max_stories=5", "-S", "corpus.kind=cnn", "--variants", "eric,bart"])
    assert kwargs["profile"] == "smoke"
    assert kwargs["overrides"] == {"preprocess.max_stories": 5, "corpus.kind": "cnn"}
    assert kwargs["variants"] == ["eric", "bart"]
    with pytest.raises(SystemExit):
        _parse_args(["-S", "no-equals-sign"])


def test_prefect_yaml_deploys_the_flows_with_parameters_they_accept():
    from eric.config import PROJECT_ROOT
    from study import study

    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())
    flows = {"flows/pipeline.py:pipeline": pipeline, "flows/study.py:study": study}
    names = {d["name"] for d in spec["deployments"]}
    assert names == {"embedded-default", "ablation-sweep", "custom-corpus", "study"}
    for deployment in spec["deployments"]:
        accepted = set(flows[deployment["entrypoint"]].parameters.properties)
        assert deployment["work_pool"]["name"] == "eric-process"
        assert set(deployment["parameters"]) <= accepted, deployment["name"]
    study_default = next(d for d in spec["deployments"] if d["name"] == "study")["parameters"]["study"]
    assert (PROJECT_ROOT / study_default / "study.yaml").is_file()


def test_what_the_deployments_say_names_real_variants_and_the_docs_list_every_one():
    from eric.config import PROJECT_ROOT

    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())
    declared = set(yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())["model"]["variants"])
    for deployment in spec["deployments"]:
        for named in re.findall(r'\["([^]]+)"\]', deployment["description"]):
            assert set(named.split('","')) <= declared, (deployment["name"], named)
    docs = (PROJECT_ROOT / "docs" / "orchestration.md").read_text()
    flow_names = {"flows/pipeline.py:pipeline": "eric-pipeline", "flows/study.py:study": "eric-study"}
    for deployment in spec["deployments"]:
        entrypoint = deployment.get("entrypoint", "flows/pipeline.py:pipeline")
        assert f"`{flow_names[entrypoint]}/{deployment['name']}`" in docs, deployment["name"]
    assert f"{len(spec['deployments'])} deployments" in docs


def test_the_effective_params_are_params_yaml_with_the_overrides_and_the_file_stays(tmp_path):
    original = "seed: 1\nvariants: [eric, bart]\ncorpus: {path: ../outside/c.zip, name: x}\n"
    (tmp_path / "params.yaml").write_text(original)
    merged = {"seed": 2, "variants": ["bart"], "~corpus.name": None}
    assert effective_params(tmp_path, merged) == {"seed": 2, "variants": ["bart"], "corpus": {"path": "../outside/c.zip"}}
    assert (tmp_path / "params.yaml").read_text() == original
    assert outside_paths(effective_params(tmp_path, {})) == ["../outside/c.zip"]


def test_the_stages_run_with_this_interpreter_even_from_an_unactivated_venv(monkeypatch, tmp_path):
    """dvc.yaml says `python stages/...`: the flow's own interpreter must come first on PATH."""
    import types

    import pipeline

    context = types.SimpleNamespace(client=types.SimpleNamespace(api_url=None))
    monkeypatch.setattr(pipeline, "get_run_context", lambda: context)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = pipeline.stage_env("sqlite:///x.db", "exp", "run-id", tmp_path)
    assert env["PATH"].split(os.pathsep)[:2] == [str(Path(sys.executable).parent), "/usr/bin"]
    assert env["ERIC_PARENT_RUN_ID"] == "run-id" and env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)


def test_a_workspace_whose_only_changes_are_run_outputs_is_clean(tmp_path):
    """dvc.lock and the committed metrics are rewritten by every run: only code or params
    changes make an execution `dirty`."""
    import subprocess

    import pipeline

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    for rel in ("dvc.lock", "metrics/train/eric.json", "params.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("a\n")
    git("add", "-A")
    git("commit", "-qm", "init")
    (tmp_path / "dvc.lock").write_text("b\n")
    (tmp_path / "metrics/train/eric.json").write_text("b\n")
    assert pipeline.git_state.fn(tmp_path)["dirty"] is False
    (tmp_path / "params.yaml").write_text("b\n")
    assert pipeline.git_state.fn(tmp_path)["dirty"] is True


def test_an_execution_resumes_from_the_checkpoint_folder_inside_its_checkout():
    assert resumable(yaml.safe_load(DEFAULT_PARAMS.read_text())) == ["models/checkpoints"]  # params.yaml's train.checkpoint_dir
    assert resumable({"train": {"checkpoint_dir": "/scratch/ckpt"}}) == []  # shared by every execution already
    assert resumable({"train": {"checkpoint_dir": "../ckpt"}}) == []
