"""End to end on loopback, as README tells a newcomer: start the services, create
the pool and deployments, trigger `prefect deployment run` on the smoke profile,
let the worker run the DVC pipeline, then query the MLflow server: the pipeline
run and every variant params.yaml declares have runs with metrics. Everything is
torn down, whatever happens. Runs on a throw-away copy of the project."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.e2e.services import Services, copy_project, get_json, metrics_of, mlflow_runs, tags_of

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    base = tmp_path_factory.mktemp("e2e")
    root = copy_project(base)
    services = Services(root, base)
    try:
        started = services.script("start")
        assert started.returncode == 0, started.stderr[-2000:]
        deployed = services.script("deploy")
        assert deployed.returncode == 0, deployed.stdout[-2000:] + deployed.stderr[-2000:]
        run = services.prefect(
            "deployment", "run", "eric-pipeline/embedded-default",
            "--param", "profile=smoke", "--watch", "--watch-timeout", "1500",
            timeout=1600,  # the whole pipeline: ~5 min on 2 idle cores, far more on a loaded host
        )  # fmt: skip
        yield services, run
    finally:
        stopped = services.script("stop", timeout=120)
        leftovers = services.kill_leftovers()
        assert stopped.returncode == 0, stopped.stderr
        assert not leftovers, f"still running after stop: {leftovers}"


def test_deployment_run_completes(deployed):
    services, run = deployed
    worker_log = (services.state / "logs" / "prefect-worker.log").read_text()[-3000:]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:] + worker_log
    assert "Completed" in run.stdout


def test_pipeline_ran_on_the_copy_with_the_smoke_profile(deployed):
    services, _ = deployed
    smoke = yaml.safe_load((services.root / "flows" / "profiles" / "smoke.yaml").read_text())
    stats = json.loads((services.root / "data" / "processed" / "stats.json").read_text())
    assert stats["stories_in"] == smoke["preprocess.max_stories"]
    assert stats["examples_out"] > 0


def test_every_stage_reported_to_the_prefect_server(deployed):
    services, _ = deployed
    flows = get_json(f"{services.prefect_api}/flows/filter", {})
    names = {f["name"] for f in flows}
    stages = {s for s in yaml.safe_load((services.root / "dvc.yaml").read_text())["stages"]}
    assert "eric-pipeline" in names
    assert {f"stage-{s}" for s in stages} <= names
    runs = get_json(f"{services.prefect_api}/flow_runs/filter", {"flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}})
    assert len(runs) >= 1 + len(stages)
    tasks = get_json(f"{services.prefect_api}/task_runs/filter", {})
    steps = {t["name"].rsplit("-", 1)[0] for t in tasks if t["state_type"] == "COMPLETED"}
    assert {"read_params", "build_examples", "summarize", "run_dvc", "close_run"} <= steps


def test_kubernetes_work_pool_template_registers_on_the_server(deployed):
    services, _ = deployed
    done = subprocess.run(
        [sys.executable, "infra/scale/check.py", "work-pool", "--create", "eric-k8s"],
        cwd=services.root, env=services.client_env(), capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    pool = get_json(f"{services.prefect_api}/work_pools/eric-k8s")
    assert pool["type"] == "kubernetes"
    assert pool["base_job_template"]["variables"]["properties"]["gpus"]["default"] == 1


def corpus_experiment(root) -> str:
    return yaml.safe_load((root / "params.yaml").read_text())["corpus"]["name"]


def test_mlflow_has_the_pipeline_run_and_every_variant(deployed):
    services, _ = deployed
    runs = mlflow_runs(services.mlflow_url, corpus_experiment(services.root))
    pipelines = [r for r in runs if tags_of(r).get("eric.role") == "pipeline"]
    assert len(pipelines) == 1
    parent = pipelines[0]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=services.root, capture_output=True, text=True).stdout
    assert parent["info"]["status"] == "FINISHED"
    assert tags_of(parent)["mlflow.source.git.commit"] == head.strip()
    assert metrics_of(parent)["stats.examples_out"] > 0
    assert {p["key"] for p in parent["data"]["params"]} >= {"seed", "corpus.path", "preprocess.max_stories"}

    params = yaml.safe_load((services.root / "params.yaml").read_text())
    declared = list(params.get("variants") or [])
    children = {tags_of(r).get("eric.variant"): r for r in runs if tags_of(r).get("eric.role") == "variant"}
    assert set(children) == set(declared)
    for variant, child in children.items():
        assert tags_of(child)["mlflow.parentRunId"] == parent["info"]["run_id"], variant
        if runs_per_variant(services.root):
            assert metrics_of(child), f"variant {variant} has a run but no metrics"


def runs_per_variant(root) -> bool:
    """Whether dvc.yaml has stages per variant (foreach/matrix over ${variants}) yet."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"].values()
    return any("variants" in f"{stage.get('foreach', '')}{stage.get('matrix', '')}" for stage in stages)


def test_report_artifact_is_on_the_mlflow_server(deployed):
    services, _ = deployed
    runs = mlflow_runs(services.mlflow_url, corpus_experiment(services.root))
    run_id = next(r["info"]["run_id"] for r in runs if tags_of(r).get("eric.role") == "pipeline")
    listed = get_json(f"{services.mlflow_url}/api/2.0/mlflow/artifacts/list?run_id={run_id}")
    assert "pipeline_report.json" in {f["path"] for f in listed.get("files", [])}


def test_a_stage_with_bad_params_fails_in_one_line(deployed, tmp_path):
    services, _ = deployed
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nnot_a_section: 2\n")
    done = subprocess.run(
        [sys.executable, "stages/preprocess.py", str(bad)],
        cwd=services.root, env=services.client_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("stage-preprocess: ")
    assert "not_a_section" in done.stderr.strip().splitlines()[-1]
