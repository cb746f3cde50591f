"""A kept study configuration is 'at this code' only while the files and settings its
stages read are unchanged; otherwise its page says so and names what changed."""

from __future__ import annotations

import hashlib
import json

import yaml

from studies import render
from studies.currency import configuration_drift, drift, main, study_drift
from studies.spec import load_study


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _project(tmp_path):
    """A project with one code file, a corpus folder known to the current dvc.lock, params.yaml."""
    (tmp_path / "eric").mkdir()
    (tmp_path / "eric" / "model.py").write_text("X = 1\n")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(
        {"train": {"seed": 42, "lr": 0.001}, "model": {"dim": 8, "heads": 2}, "variants": ["eric", "bart"]}))
    current = {"stages": {"preprocess": {"deps": [{"path": "corpora/mini", "md5": "aaa.dir"}]},  # what this host made:
                          "train@eric": {"deps": [{"path": "data/processed", "md5": "this-host.dir"}]},
                          "report": {"deps": [{"path": "metrics/train", "md5": "this-run.dir"}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(current))
    return tmp_path


def _lock(code_md5: str, seed=43, dim=8, corpus="aaa.dir") -> dict:
    return {"stages": {
        "preprocess": {"deps": [{"path": "corpora/mini", "md5": corpus}],
                       "outs": [{"path": "data/processed", "md5": "p.dir"}]},
        "train@eric": {"deps": [{"path": "data/processed", "md5": "other-host.dir"},
                                {"path": "eric/model.py", "md5": code_md5}],
                       "params": {"params.yaml": {"train.seed": seed, "model": {"dim": dim, "heads": 2}}},
                       "outs": [{"path": "metrics/train/eric.json", "md5": "m"}]},
        "report": {"deps": [{"path": "metrics/train", "md5": "changes-with-every-run.dir"}],
                   "params": {"params.yaml": {"variants": ["eric"]}}},
    }}


def _intended(root, **overrides):
    params = yaml.safe_load((root / "params.yaml").read_text())
    for key, value in overrides.items():
        section, _, leaf = key.partition(".")
        params[section] = value if not leaf else {**params[section], leaf: value}
    return params


def test_a_run_with_the_same_inputs_under_its_overrides_is_current(tmp_path):
    root = _project(tmp_path)
    current = yaml.safe_load((root / "dvc.lock").read_text())
    found = drift(_lock(_md5("X = 1\n")), _intended(root, **{"train.seed": 43, "variants": ["eric"]}), root, current)
    assert found.current and found.files == [] and found.settings == []


def test_changed_code_a_changed_setting_and_a_changed_corpus_are_named(tmp_path):
    root = _project(tmp_path)
    current = yaml.safe_load((root / "dvc.lock").read_text())
    found = drift(_lock(_md5("X = 0\n"), dim=4, corpus="old.dir"), _intended(root, **{"train.seed": 43, "variants": ["eric"]}),
                  root, current)
    assert found.files == ["corpora/mini/", "eric/model.py"]
    assert found.settings == ["model.dim: 4 -> 8"]
    assert not found.current and "2 input file(s) and 1 setting(s) changed since" in found.describe()


def test_a_setting_the_configuration_does_not_override_is_compared_with_params_yaml(tmp_path):
    root = _project(tmp_path)
    found = drift(_lock(_md5("X = 1\n")), _intended(root, variants=["eric"]), root)  # seed 43 not asked for: 42
    assert found.settings == ["train.seed: 43 -> 42"]


def test_a_removed_file_and_a_setting_that_is_gone_count_as_changes(tmp_path):
    root = _project(tmp_path)
    (root / "eric" / "model.py").unlink()
    lock = _lock("whatever")
    lock["stages"]["train@eric"]["params"]["params.yaml"]["model"]["old_knob"] = True
    found = drift(lock, _intended(root, **{"train.seed": 43, "variants": ["eric"]}), root)
    assert found.files == ["eric/model.py"] and found.settings == ["model.old_knob: true -> absent"]


def _study(root, lock: dict, overrides: str = "{variants: [eric], set: {train.seed: 43}}"):
    folder = root / "studies" / "demo"
    kept = folder / "outputs" / "one"
    (kept / "metrics" / "evaluate").mkdir(parents=True)
    (kept / "metrics" / "evaluate" / "eric.json").write_text(json.dumps({"B-1": 12.5}))
    (kept / "dvc.lock").write_text(yaml.safe_dump(lock))
    (kept / "run.json").write_text(json.dumps({"commit": "0123456789ab", "finished": "2026-11-28T00:00:00"}))
    (folder / "study.yaml").write_text(f"title: Demo\nconfigurations:\n  one: {overrides}\n")
    return load_study(folder)


def test_a_study_page_heads_a_run_at_older_code_with_what_changed(tmp_path, monkeypatch):
    root = _project(tmp_path)
    monkeypatch.setattr(render, "PROJECT_ROOT", root)
    spec = _study(root, _lock(_md5("X = 1\n")))
    assert study_drift(spec, "one", root).current
    assert "older code" not in render.study_tables(spec) and "| ERIC | 12.50 |" in render.study_tables(spec)
    (root / "eric" / "model.py").write_text("X = 2\n")
    page = render.study_tables(spec)
    assert "> **Ran at older code.** 1 input file(s) and 0 setting(s) changed since: `eric/model.py`" in page
    assert "`python flows/study.py studies/demo --only one --stale`" in page and "| ERIC | 12.50 |" in page


def test_a_kept_configuration_without_a_dvc_lock_has_no_verdict(tmp_path):
    root = _project(tmp_path)
    assert configuration_drift(tmp_path / "nowhere", {}, root) is None


def test_the_command_lists_each_kept_configuration_and_fails_when_one_is_older(tmp_path, capsys):
    root = _project(tmp_path)
    _study(root, _lock(_md5("X = 1\n")))
    assert main(root) == 0 and capsys.readouterr().out == "studies/demo one: at this code\n"
    (root / "params.yaml").write_text((root / "params.yaml").read_text().replace("dim: 8", "dim: 16"))
    assert main(root) == 1
    out = capsys.readouterr().out
    assert "studies/demo one: 0 input file(s) and 1 setting(s) changed since: `model.dim: 8 -> 16`" in out


def test_the_project_lock_and_params_can_be_read_as_committed_not_as_a_rerun_left_them(tmp_path):
    """A user's `dvc repro` rewrites dvc.lock; the docs test reads it (and params.yaml) as
    committed through `read`, so the drift a page shows does not follow the user's rerun."""
    root = _project(tmp_path)
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "dvc.lock").write_text(yaml.safe_dump(_lock(_md5("X = 1\n"))))
    committed = {"dvc.lock": (root / "dvc.lock").read_text(), "params.yaml": (root / "params.yaml").read_text()}
    rerun = yaml.safe_load(committed["dvc.lock"])
    rerun["stages"]["preprocess"]["deps"][0]["md5"] = "rewritten.dir"
    (root / "dvc.lock").write_text(yaml.safe_dump(rerun))  # the workspace after a rerun
    overrides = {"train.seed": 43, "variants": ["eric"]}
    assert configuration_drift(kept, overrides, root).files == ["corpora/mini/"]
    assert configuration_drift(kept, overrides, root, committed.get).current


def test_stages_of_variants_the_configuration_does_not_train_are_not_its_run(tmp_path):
    """A configuration of variants [eric] runs in a checkout of the project's dvc.lock, whose
    train@bart entry (older code, other settings) stays in the kept lock: not this run's."""
    root = _project(tmp_path)
    lock = _lock(_md5("X = 1\n"))
    lock["stages"]["train@bart"] = {"deps": [{"path": "eric/model.py", "md5": _md5("X = 0\n")}],
                                    "params": {"params.yaml": {"train.seed": 7}}}
    found = drift(lock, _intended(root, **{"train.seed": 43, "variants": ["eric"]}), root)
    assert found.current
    both = drift(lock, _intended(root, **{"train.seed": 43, "variants": ["eric", "bart"]}), root)
    assert both.files == ["eric/model.py"] and "train.seed: 7 -> 43" in both.settings


def test_a_folder_input_is_hashed_as_the_workspace_holds_it_bytecode_aside(tmp_path):
    """A folder dependency (a package of eric/) is compared by DVC's own hash of the workspace's
    folder, the project's .dvcignore applied: not through the project's dvc.lock, which dates
    from its last full `dvc repro` and would make every later run read as older."""
    import shutil
    from pathlib import Path

    from dvc.repo import Repo

    from studies.currency import folder_md5

    root = _project(tmp_path)
    Repo.init(str(root), no_scm=True)
    shutil.copy(Path(__file__).resolve().parents[2] / ".dvcignore", root / ".dvcignore")
    (root / "eric" / "world").mkdir()
    (root / "eric" / "world" / "names.py").write_text("PLACES = ['harbor']\n")
    lock = _lock(_md5("X = 1\n"))
    lock["stages"]["train@eric"]["deps"].append({"path": "eric/world", "md5": folder_md5(root, "eric/world")})
    intended = _intended(root, **{"train.seed": 43, "variants": ["eric"]})
    assert lock["stages"]["train@eric"]["deps"][-1]["md5"].endswith(".dir")
    assert "eric/world" not in (root / "dvc.lock").read_text()  # the project's lock has no word on it
    assert drift(lock, intended, root).current
    (root / "eric" / "world" / "__pycache__").mkdir()
    (root / "eric" / "world" / "__pycache__" / "names.cpython-311.pyc").write_bytes(b"\x00bytecode")
    assert drift(lock, intended, root).current
    (root / "eric" / "world" / "names.py").write_text("PLACES = ['harbor', 'mill']\n")
    assert drift(lock, intended, root).files == ["eric/world/"]
