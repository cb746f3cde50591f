"""flows/dvc_steps.py: the DVC command a flow runs, its overrides, its failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dvc.utils.hydra import apply_overrides
from dvc_steps import (
    DvcLockBusy,
    OverrideError,
    PipelineError,
    check_overrides,
    dvc_command,
    experiment_name,
    hydra_value,
    isolated_checkout,
    keep_outputs,
    one_experiment_at_a_time,
    remove_checkout,
    run_streaming,
)

VALUES = [
    None,
    True,
    20,
    0.0005,
    "wikiplots",
    "../corpora/wikiplots/plots.zip",
    "C:/odd path/it's:here.zip",
    "42",
    [3, 1],
    ["eric", "no_states"],
    {"lr": 0.001, "name": "x y"},
]


@pytest.mark.parametrize("value", VALUES)
def test_hydra_value_round_trips_through_dvcs_own_parser(tmp_path, value):
    params = tmp_path / "params.yaml"
    params.write_text("knob: 1\n")
    apply_overrides(params, [f"knob={hydra_value(value)}"])
    assert yaml.safe_load(params.read_text())["knob"] == value


def test_every_execution_is_a_dvc_experiment_even_without_overrides():
    assert dvc_command({})[3:] == ["exp", "run"]
    assert dvc_command({}, force=True)[3:] == ["exp", "run", "--force"]
    assert dvc_command({"+model.variants.bart.two_stage": True})[3:] == ["exp", "run", "-S",
                                                                          "+model.variants.bart.two_stage=true"]


def _git(root, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout


def test_an_execution_runs_in_a_checkout_of_its_own_and_leaves_the_workspace_alone(tmp_path):
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    root, outside = tmp_path / "project", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "corpus.txt").write_text("stories")
    _git(root, "init", "-q")
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, env=env, check=True)
    (root / "params.yaml").write_text("k: 1\n")
    (root / "gone.txt").write_text("x")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "init")
    (root / "params.yaml").write_text("k: 2\n")  # uncommitted changes go with the execution
    (root / "new.py").write_text("print(1)")
    (root / "gone.txt").unlink()
    before = _git(root, "status", "--porcelain")

    checkout = isolated_checkout(root, "run-1", ["../outside/corpus.txt"], env)
    assert checkout == root / ".dvc" / "tmp" / "eric-runs" / "run-1"
    assert (checkout / "params.yaml").read_text() == "k: 2\n" and (checkout / "new.py").is_file()
    assert not (checkout / "gone.txt").exists()
    assert (checkout / "../outside/corpus.txt").read_text() == "stories"  # as from the project
    cache = subprocess.run([sys.executable, "-m", "dvc", "cache", "dir"], cwd=checkout, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(cache) == root / ".dvc" / "cache"
    assert _git(root, "status", "--porcelain") == before
    remove_checkout(root, checkout)
    assert not checkout.exists() and "run-1" not in _git(root, "worktree", "list")


def test_overrides_are_a_dvc_experiment():
    args = dvc_command({"preprocess.max_stories": 40, "corpus.kind": "cnn"}, exp_name="smoke")
    assert args[3:] == [
        "exp", "run", "--name", "smoke",
        "-S", "preprocess.max_stories=40", "-S", "corpus.kind='cnn'",
    ]  # fmt: skip


def test_a_tilde_key_deletes_the_entry_with_dvcs_own_parser(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("variants:\n  eric: {states: 8}\n  bart: {states: 0}\n")
    overrides = {"~variants.eric": None}
    check_overrides(yaml.safe_load(params.read_text()), overrides)
    args = dvc_command(overrides)
    assert args[-2:] == ["-S", "~variants.eric"]
    apply_overrides(params, [args[-1]])
    assert yaml.safe_load(params.read_text()) == {"variants": {"bart": {"states": 0}}}


def test_check_overrides_names_the_missing_key():
    params = {"seed": 1, "preprocess": {"max_stories": None}}
    check_overrides(params, {"seed": 2, "preprocess.max_stories": 5})
    with pytest.raises(OverrideError, match="'preprocess.max_storys'"):
        check_overrides(params, {"preprocess.max_storys": 5})
    with pytest.raises(OverrideError, match="'seed.x'"):
        check_overrides(params, {"seed.x": 5})


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code, "x", "y"]  # args[2:4] name the command


def test_run_streaming_logs_every_line_and_returns_the_tail(tmp_path):
    seen = []
    out = run_streaming(_python("print('a'); print(''); print('Ran experiment(s): quiet-owl')"), tmp_path, dict(os.environ), seen.append)
    assert seen == ["a", "Ran experiment(s): quiet-owl"]
    assert experiment_name(out) == "quiet-owl"
    assert experiment_name("Stage 'x' didn't change") is None


def test_a_failed_run_raises_its_error_line(tmp_path):
    code = "import sys; print('ERROR: failed to reproduce \\'train\\': boom'); print('hint'); sys.exit(3)"
    with pytest.raises(PipelineError, match=r"exit 3\): ERROR: failed to reproduce 'train': boom") as info:
        run_streaming(_python(code), tmp_path, dict(os.environ), lambda line: None)
    assert not isinstance(info.value, DvcLockBusy)


def test_a_failed_stage_gives_its_own_reason_first(tmp_path):
    code = (
        "import sys; print('stage-preprocess: params.yaml: seed: not an integer');"
        "print('ERROR: failed to reproduce \\'preprocess\\': exited with 1'); sys.exit(255)"
    )
    with pytest.raises(PipelineError, match=r"stage-preprocess: params.yaml: seed: not an integer \(ERROR: failed"):
        run_streaming(_python(code), tmp_path, dict(os.environ), lambda line: None)


def test_a_busy_lock_is_its_own_retryable_error(tmp_path):
    code = "import sys; print('ERROR: Unable to acquire lock. Most likely another DVC process is running'); sys.exit(1)"
    with pytest.raises(DvcLockBusy):
        run_streaming(_python(code), tmp_path, dict(os.environ), lambda line: None)


def test_a_study_keeps_the_metrics_report_and_lock_of_an_execution(tmp_path):
    checkout, dest = tmp_path / "checkout", tmp_path / "kept"
    for rel, text in {"dvc.lock": "stages: {}\n", "params.yaml": "seed: 1\n", "reports/results.md": "# R\n",
                      "metrics/evaluate/eric.json": "{}", "models/stage_one/eric/model.safetensors": "w"}.items():
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text(text)
    (dest / "stale").mkdir(parents=True)
    kept = keep_outputs(checkout, ["metrics/evaluate/eric.json", "metrics/train/missing.json"], dest)
    assert kept == ["dvc.lock", "params.yaml", "reports/results.md", "metrics/evaluate/eric.json"]
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == sorted(kept)
    assert (dest / "reports/results.md").read_text() == "# R\n"  # models stay in the DVC cache


def test_executions_of_one_project_run_their_experiments_one_at_a_time(tmp_path):
    """DVC's executor refs are shared by every worktree: a second execution waits, says so,
    and starts when the first ends."""
    import threading

    events, said = [], []
    first_in, release = threading.Event(), threading.Event()

    def first():
        with one_experiment_at_a_time(tmp_path, said.append):
            events.append("first starts")
            first_in.set()
            release.wait(10)
            events.append("first ends")

    def second():
        with one_experiment_at_a_time(tmp_path, said.append):
            events.append("second starts")

    a = threading.Thread(target=first)
    a.start()
    first_in.wait(10)
    b = threading.Thread(target=second)
    b.start()
    b.join(0.5)
    assert b.is_alive() and events == ["first starts"]  # waiting
    release.set()
    a.join(10), b.join(10)
    assert events == ["first starts", "first ends", "second starts"]
    assert len(said) == 1 and "waiting for it to finish" in said[0]


def test_misleading_dvc_lines_are_explained_in_the_log(tmp_path):
    seen = []
    code = ("print('Experiment results have been applied to your workspace.');"
            "print(\"WARNING: No file hash info found for 'metrics/headline'. It won't be created.\"); print('Ran')")
    run_streaming(_python(code), tmp_path, dict(os.environ), seen.append)
    assert seen[0] == (f"Experiment results have been applied to your workspace. (DVC means this execution's "
                       f"worktree, {tmp_path}: the project's workspace is left as it was)")
    assert seen[1].endswith("(an output dvc.lock holds no hash for yet, e.g. a new one: the stage that writes it runs next)")
    assert seen[2] == "Ran"
