"""flows/study.py: each configuration runs once through the pipeline flow, its outputs are
kept with run.json, kept configurations are skipped, and the pages are rendered."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
import study as study_flow
from prefect.logging import disable_run_logger



@pytest.fixture
def demo(tmp_path, monkeypatch):
    folder = tmp_path / "studies" / "demo"
    folder.mkdir(parents=True)
    (folder / "study.yaml").write_text("title: Demo\nconfigurations:\n  small: {variants: [bart], set: {seed: 7}}\n"
                                       "  other: {profile: smoke}\n")
    return folder, fake_runs(monkeypatch)


def fake_runs(monkeypatch) -> list[dict]:
    """The pipeline flow replaced by one that keeps a metrics file and records its call."""
    calls = []

    def fake_pipeline(**kwargs):
        calls.append(kwargs)
        kept = Path(kwargs["keep"])
        (kept / "metrics" / "evaluate").mkdir(parents=True, exist_ok=True)
        (kept / "metrics" / "evaluate" / "bart.json").write_text(json.dumps({"B-1": 12.5}))
        return {"git": {"commit": "0123456789ab", "dirty": False}, "command": "dvc exp run", "overrides": {},
                "dvc_experiment": "exp-1", "mlflow": {"run_id": f"run-{len(calls)}"}}

    monkeypatch.setattr(study_flow, "pipeline", fake_pipeline)
    monkeypatch.setattr(study_flow, "render_pages", lambda: "")
    return calls


def test_each_configuration_runs_once_and_is_kept_with_its_provenance(demo):
    folder, calls = demo
    with disable_run_logger():
        assert study_flow.study.fn(str(folder)) == {"small": "ran", "other": "ran"}
    assert [(c["variants"], c["overrides"], c["profile"]) for c in calls] == [(["bart"], {"seed": 7}, None),
                                                                             (None, {}, "smoke")]
    assert calls[0]["tags"] == {"eric.study": "demo", "eric.study.configuration": "small"}
    assert calls[0]["experiment"] == "study-demo"
    run = json.loads((folder / "outputs" / "small" / "run.json").read_text())
    assert run["commit"] == "0123456789ab" and run["mlflow_run_id"] == "run-1" and run["configuration"] == "small"
    with disable_run_logger():  # resumable: nothing runs twice unless forced
        assert study_flow.study.fn(str(folder)) == {"small": "kept", "other": "kept"}
        assert study_flow.study.fn(str(folder), only=["other"], force=True) == {"other": "ran"}
    assert len(calls) == 3


def test_stale_reruns_only_a_kept_configuration_whose_code_changed_since(demo):
    folder, calls = demo
    with disable_run_logger():
        study_flow.study.fn(str(folder))
    code = study_flow.PROJECT_ROOT / "eric" / "config.py"
    for name, md5 in (("small", "0" * 32), ("other", hashlib.md5(code.read_bytes()).hexdigest())):
        lock = {"stages": {"train": {"deps": [{"path": "eric/config.py", "md5": md5}]}}}
        (folder / "outputs" / name / "dvc.lock").write_text(yaml.safe_dump(lock))
    with disable_run_logger():
        assert study_flow.study.fn(str(folder)) == {"small": "kept", "other": "kept"}
        assert study_flow.study.fn(str(folder), stale=True) == {"small": "ran", "other": "kept"}
    assert len(calls) == 3 and calls[-1]["tags"]["eric.study.configuration"] == "small"


def test_pages_are_rendered_by_a_process_of_their_own_and_a_failure_loses_nothing(monkeypatch):
    seen, results = [], iter([(0, "wrote README.md\nwrote docs/results.md\n", ""),
                              (1, "", "Traceback ...\nValueError: params.yaml: bad key\n")])

    def fake_run(command, cwd, **kwargs):
        seen.append((command, cwd))
        return subprocess.CompletedProcess(command, *next(results))

    monkeypatch.setattr(study_flow.subprocess, "run", fake_run)
    with disable_run_logger():
        assert study_flow.render_pages.fn() == "wrote README.md\nwrote docs/results.md\n"
        assert study_flow.render_pages.fn() == "failed: ValueError: params.yaml: bad key"
    assert seen[0] == ([study_flow.sys.executable, "-m", "studies.render"], study_flow.PROJECT_ROOT)


def grid_study(tmp_path, monkeypatch, grid: str) -> tuple[Path, list[dict]]:
    """A study `grid` of one grid `w` (its YAML body), and the pipeline calls it makes."""
    folder = tmp_path / "studies" / "grid"
    folder.mkdir(parents=True)
    (folder / "study.yaml").write_text(f"title: Grid\ngrids:\n  w:\n{grid}")
    return folder, fake_runs(monkeypatch)


def test_a_grid_study_runs_each_arm_and_seed_as_a_configuration(tmp_path, monkeypatch):
    folder, calls = grid_study(tmp_path, monkeypatch, "    profile: world\n    set: {train.max_steps: 3}\n"
                                                      "    seeds: [1, 2]\n    arms: {eric: {variants: [eric]}}\n")
    with disable_run_logger():
        assert study_flow.study.fn(str(folder)) == {"w-eric-seed1": "ran", "w-eric-seed2": "ran"}
    assert [(c["profile"], c["overrides"], c["variants"]) for c in calls] == [
        ("world", {"train.max_steps": 3, "seed": 1}, ["eric"]), ("world", {"train.max_steps": 3, "seed": 2}, ["eric"])]


def test_a_seed_selects_its_configurations_and_a_name_or_seed_that_selects_nothing_is_refused(tmp_path, monkeypatch):
    folder, calls = grid_study(tmp_path, monkeypatch,
                               "    seeds: [1, 2]\n    arms: {eric: {variants: [eric]}, bart: {variants: [bart]}}\n")
    with disable_run_logger():  # one seed, its arms in study.yaml's order
        assert study_flow.study.fn(str(folder), seeds=[2]) == {"w-eric-seed2": "ran", "w-bart-seed2": "ran"}
        assert study_flow.study.fn(str(folder), only=["w-bart-seed1"], seeds=[1]) == {"w-bart-seed1": "ran"}
        for only, seeds, message in ((["w-eric-seed3"], None, "grid: no configuration w-eric-seed3 (study.yaml"),
                                     (None, [3], "grid: no configuration of seed 3"),
                                     (["w-eric-seed1"], [2], "grid: no configuration of seed 2 among w-eric-seed1")):
            with pytest.raises(ValueError, match=re.escape(message)):  # not a silent run of nothing
                study_flow.study.fn(str(folder), only=only, seeds=seeds)
    assert len(calls) == 3


def test_the_command_refuses_a_configuration_the_study_lacks_in_one_line():
    done = subprocess.run([sys.executable, str(study_flow.PROJECT_ROOT / "flows" / "study.py"), "studies/entityworld",
                           "--only", "world-eric-seed9"], cwd=study_flow.PROJECT_ROOT, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "eric-study: entityworld: no configuration world-eric-seed9 (study.yaml declares them)"
