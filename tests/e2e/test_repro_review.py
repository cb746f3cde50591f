"""Review after a plain `dvc repro` (no deployment, no services), as README tells a
newcomer: on a throw-away copy of the project with the smoke profile written into its
params.yaml, `dvc repro` runs every stage; then MLflow's store holds the pipeline run, a
run per variant and a registered model per variant, and a browser finds them in the
MLflow UI's shared view `variants`; compare.py prints the variants; `dvc metrics show metrics/headline`
and flows/experiments.py fit 160 columns; a second repro takes every stage from the run cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from tests.browser import headless_chromium, needs_browser
from tests.e2e.services import GIT_ID, clean_env, copy_project, free_port

pytestmark = [pytest.mark.slow]
WIDTH = 160


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    from pipeline import effective_params, profile_overrides

    root = copy_project(tmp_path_factory.mktemp("repro"))
    params = effective_params(root, profile_overrides("smoke"))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", *GIT_ID, "commit", "-qam", "smoke profile"], cwd=root, check=True)  # a clone at smoke
    env = clean_env()
    env.update(PATH=os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]), COLUMNS=str(WIDTH),
               DVC_NO_ANALYTICS="1", OMP_NUM_THREADS="1")  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=1800)  # ~4 min on 2 idle cores  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root, env, done.stdout


def _client(root):
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{root / 'mlflow.db'}")


def test_the_repro_records_the_pipeline_run_its_variants_and_their_models(repro):
    root, _, out = repro
    client = _client(root)
    experiment = client.get_experiment_by_name(yaml.safe_load((root / "params.yaml").read_text())["corpus"]["name"])
    (pipeline,) = client.search_runs([experiment.experiment_id], "tags.`eric.role` = 'pipeline'")
    assert pipeline.info.run_name.startswith("pipeline dvc repro ") and pipeline.info.status == "FINISHED"
    variants = client.search_runs([experiment.experiment_id], "tags.`eric.role` = 'variant'")
    assert sorted(r.info.run_name for r in variants) == ["bart", "eric"]
    assert all(r.data.tags["mlflow.parentRunId"] == pipeline.info.run_id for r in variants)
    assert all("headline.B-1" in r.data.metrics and "curve.val_loss" in r.data.metrics for r in variants)
    stage_runs = client.search_runs([experiment.experiment_id], "tags.stage != 'pipeline'")
    assert {r.data.tags["stage"] for r in stage_runs} == {"train_stage_one", "train_mentions", "evaluate", "report"}
    assert all(r.data.tags["eric.pipeline_run_id"] == pipeline.info.run_id for r in stage_runs)  # all nested
    for run in variants:
        name = f"{experiment.name}-{run.info.run_name}"
        assert [v.run_id for v in client.search_model_versions(f"name = '{name}'")] == [run.info.run_id]
    assert "review: the variants table: http://127.0.0.1:5000/#/experiments/" in out


@pytest.fixture
def mlflow_ui(repro):
    """`mlflow ui` on the copy's store, on a free port (a fresh one if it lost the port)."""
    root, env, _ = repro
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                                 f"sqlite:///{root / 'mlflow.db'}", "--host", "127.0.0.1", "--port", str(port),
                                 "--workers", "1"], cwd=root, env={**env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 180
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(1)
        if proc.poll() is None:
            break
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)


def _text_until(driver, *needles, timeout=60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = driver.find_element("tag name", "body").text
        if all(n in text for n in needles) or time.monotonic() > deadline:
            return text
        time.sleep(1)


@needs_browser
def test_the_mlflow_ui_shows_the_variants_and_their_registered_models(repro, mlflow_ui, tmp_path):
    from eric.review import view_url

    root, _, _ = repro
    client = _client(root)
    experiment = client.get_experiment_by_name(yaml.safe_load((root / "params.yaml").read_text())["corpus"]["name"])
    with headless_chromium(tmp_path) as driver:
        driver.set_window_size(2400, 1000)
        driver.get(view_url(mlflow_ui, experiment.experiment_id))
        text = _text_until(driver, "Group: eric", "Group: bart", "eric.execution", "headline.B-1", "headline.MSJ-1",
                           "\neric\n", "\nbart\n")
        assert "Group: eric" in text and "Group: bart" in text  # a group per variant: its summary never mixes them
        assert "eric.execution" in text  # which execution each row is
        assert "Model registry" in text and "Sessions" not in text  # the "Model training" side, not GenAI's
        assert "\neric\n" in text and "\nbart\n" in text  # the variant runs
        assert "headline.B-1" in text and "headline.MSJ-1" in text  # the headline as columns (the first ones in view)
        driver.get(f"{mlflow_ui}/#/models")
        models = _text_until(driver, f"{experiment.name}-eric", f"{experiment.name}-bart")
        assert f"{experiment.name}-eric" in models and f"{experiment.name}-bart" in models


def _lines(args, root, env) -> list[str]:
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_terminal_views_fit_and_name_the_variants(repro):
    root, env, _ = repro
    dvc = [sys.executable, "-m", "dvc"]
    shown = _lines([*dvc, "metrics", "show", "metrics/headline"], root, env)
    assert [line.split()[0] for line in shown[1:]] == ["metrics/headline/bart.json", "metrics/headline/eric.json"]
    assert shown[0].split()[1:4] == ["B-1", "B-1-eq", "B-2"] and max(map(len, shown)) <= WIDTH
    flows = os.path.join(root, "flows")
    table = _lines([sys.executable, os.path.join(flows, "experiments.py")], root, env)
    assert {line.split()[1] for line in table[2:] if line.strip()} == {"bart", "eric"} and max(map(len, table)) <= WIDTH
    compared = _lines([sys.executable, os.path.join(flows, "compare.py")], root,
                      {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}"})  # fmt: skip
    assert [line.split()[0] for line in compared[2:4]] == ["bart", "eric"] and max(map(len, compared)) <= WIDTH


def test_a_rerun_at_the_same_code_and_settings_takes_every_stage_from_the_run_cache(repro, tmp_path):
    """DVC's run cache (what lets a study's configurations share a training): on a copy of the
    repro'd project sharing its DVC cache, with the committed dvc.lock back and the models and
    samples gone, `dvc repro` runs none of the stages before the report: each is restored,
    snapshots and metrics with it."""
    import shutil

    root, env, _ = repro
    copy = tmp_path / "again"
    shutil.copytree(root, copy, ignore=lambda folder, names: ["cache"] if folder == str(root / ".dvc") else [])
    dvc = [sys.executable, "-m", "dvc"]
    subprocess.run([*dvc, "config", "--local", "cache.dir", str(root / ".dvc" / "cache")], cwd=copy, env=env,
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run(["git", "checkout", "--", "dvc.lock"], cwd=copy, check=True)
    for rel in ("models", "outputs"):
        shutil.rmtree(copy / rel)
    done = subprocess.run([*dvc, "repro"], cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    restored = set(re.findall(r"Stage '([^']+)' is cached - skipping run", done.stdout))
    ran = set(re.findall(r"Running stage '([^']+)'", done.stdout))
    variants = ["bart", "eric"]
    expected = {"preprocess", "tokenizer", "train_mentions"} | {
        f"{stage}@{v}" for stage in ("hint_targets", "train_stage_one", "sample", "evaluate") for v in variants}
    assert restored == expected and ran <= {"report", "review"}, (restored, ran)
    for v in variants:
        assert (copy / "models" / "snapshots" / v).is_dir() and (copy / "models" / "stage_one" / v).is_dir()
        for rel in (f"metrics/evaluate/{v}.json", f"metrics/train/{v}.json", f"plots/train/{v}_val.csv"):
            assert (copy / rel).read_bytes() == (root / rel).read_bytes(), rel
