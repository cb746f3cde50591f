"""End to end on loopback, as README tells a newcomer: start the services, create
the pool and deployments, trigger `prefect deployment run` on the smoke profile,
let the worker run the DVC pipeline, then check what a researcher reviews: the
workspace unchanged (the run is a DVC experiment, listed by `dvc exp show`), the
stage flow runs children of the pipeline flow run and their output in its log, and
on the MLflow server the pipeline run with one child per variant (params, the same
metric names, curves), the stage runs nested, the report artifacts, a registered
model version per variant. Everything is torn down, whatever happens. Runs on a
throw-away copy of the project."""

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
    services.status_before = git_status(root)
    try:
        started = services.start()
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


def git_status(root) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True).stdout


def test_the_workspace_is_unchanged_and_the_run_is_a_dvc_experiment(deployed):
    services, _ = deployed
    assert git_status(services.root) == services.status_before
    assert not (services.root / "models").exists()  # outputs stay in the experiment (the committed metrics: unchanged)
    shown = subprocess.run(
        [sys.executable, "-m", "dvc", "exp", "show", "--json"], cwd=services.root, capture_output=True, text=True, check=True
    ).stdout
    experiments = [e for rev in json.loads(shown) for e in rev.get("experiments") or []]
    assert len(experiments) == 1
    smoke = yaml.safe_load((services.root / "flows" / "profiles" / "smoke.yaml").read_text())
    params = experiments[0]["revs"][0]["data"]["params"]["params.yaml"]["data"]
    assert params["preprocess"]["max_stories"] == smoke["preprocess.max_stories"]
    assert not list((services.root / ".dvc" / "tmp" / "eric-runs").glob("*-*"))  # the checkout is gone


def test_stage_flow_runs_are_children_of_the_pipeline_run_and_log_into_it(deployed):
    services, run = deployed
    runs = get_json(f"{services.prefect_api}/flow_runs/filter", {})
    (pipeline,) = [r for r in runs if r["flow_id"] == flow_id(services, "eric-pipeline")]
    tasks = get_json(f"{services.prefect_api}/task_runs/filter", {"flow_runs": {"id": {"any_": [pipeline["id"]]}}})
    run_dvc = {t["id"] for t in tasks if t["name"].startswith("run_dvc")}
    stages = [r for r in runs if r["flow_id"] != pipeline["flow_id"] and r["state_type"] == "COMPLETED"]
    assert stages and all(r["parent_task_run_id"] in run_dvc for r in stages)
    assert {"preprocess", "train_stage_one@eric", "evaluate@bart", "report"} <= {r["name"] for r in stages}  # as DVC names them
    messages, offset = [], 0
    while page := get_json(f"{services.prefect_api}/logs/filter",
                           {"logs": {"flow_run_id": {"any_": [pipeline["id"]]}}, "limit": 200, "offset": offset}):
        messages += [entry["message"] for entry in page]
        offset += len(page)
    assert any("Running stage 'train_stage_one@eric'" in m for m in messages)  # the stages' progress, in its log


def flow_id(services, name: str) -> str:
    return next(f["id"] for f in get_json(f"{services.prefect_api}/flows/filter", {}) if f["name"] == name)


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
    """Where the deployment's smoke run records: the smoke profile's own experiment, never the
    corpus's record (flows/pipeline.py SEPARATE_PROFILES)."""
    return yaml.safe_load((root / "params.yaml").read_text())["corpus"]["name"] + "-smoke"


def test_mlflow_has_the_pipeline_run_and_every_variant(deployed):
    services, _ = deployed
    exp = get_json(f"{services.mlflow_url}/api/2.0/mlflow/experiments/get-by-name?experiment_name={corpus_experiment(services.root)}")
    tags = {t["key"]: t["value"] for t in exp["experiment"].get("tags", [])}
    assert tags["mlflow.experimentKind"] == "custom_model_development"  # opens in the runs view
    runs = mlflow_runs(services.mlflow_url, corpus_experiment(services.root))
    pipelines = [r for r in runs if tags_of(r).get("eric.role") == "pipeline"]
    assert len(pipelines) == 1
    parent = pipelines[0]
    parent_id = parent["info"]["run_id"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=services.root, capture_output=True, text=True).stdout
    assert parent["info"]["status"] == "FINISHED"
    assert tags_of(parent)["mlflow.source.git.commit"] == head.strip()
    assert metrics_of(parent)["stats.examples_out"] > 0
    assert {p["key"] for p in parent["data"]["params"]} >= {"seed", "corpus.path", "preprocess.max_stories"}

    params = yaml.safe_load((services.root / "params.yaml").read_text())
    declared = list(params.get("variants") or [])
    children = {tags_of(r).get("eric.variant"): r for r in runs if tags_of(r).get("eric.role") == "variant"}
    assert set(children) == set(declared)
    keys = {v: set(metrics_of(c)) for v, c in children.items()}
    for variant, child in children.items():
        assert tags_of(child)["mlflow.parentRunId"] == parent_id, variant
        assert {p["key"] for p in child["data"]["params"]} >= {"model.state", "model.state_space.recipe", "model.size", "train.max_steps", "corpus.name"}
        assert keys[variant] == keys[declared[0]], variant  # the same metric names for every variant
        assert {"evaluate.B-1", "evaluate.D-4", "curve.train_loss", "curve.val_loss"} <= keys[variant]
        history = get_json(f"{services.mlflow_url}/api/2.0/mlflow/metrics/get-history?run_id={child['info']['run_id']}&metric_key=curve.val_loss")
        assert len(history["metrics"]) >= 2, variant  # a curve (validation at step 0 and at the end), not one number

    # the stage runs: nested under their variant run (training) or the pipeline run, with its git tags
    stage_runs = [r for r in runs if tags_of(r).get("stage") not in (None, "pipeline")]
    assert stage_runs
    by_id = {c["info"]["run_id"]: v for v, c in children.items()}
    for stage_run in stage_runs:
        t = tags_of(stage_run)
        assert t["eric.pipeline_run_id"] == parent_id and t["git_commit"] == head.strip(), t["mlflow.runName"]
        assert t["git_dirty"] == tags_of(parent)["git_dirty"]
        if t["variant"] in children:  # training and evaluation of a variant: under its variant run
            assert by_id.get(t["mlflow.parentRunId"]) == t["variant"], t["mlflow.runName"]
        else:  # the mention writer, the report
            assert t["mlflow.parentRunId"] == parent_id, t["mlflow.runName"]
    assert {"train_stage_one", "evaluate", "train_mentions", "report"} <= {tags_of(r)["stage"] for r in stage_runs}


def test_report_artifacts_are_on_the_pipeline_run(deployed):
    services, _ = deployed
    runs = mlflow_runs(services.mlflow_url, corpus_experiment(services.root))
    run_id = next(r["info"]["run_id"] for r in runs if tags_of(r).get("eric.role") == "pipeline")

    def listed(path=""):
        found = get_json(f"{services.mlflow_url}/api/2.0/mlflow/artifacts/list?run_id={run_id}&path={path}")
        return {f["path"] for f in found.get("files", [])}

    assert {"pipeline_report.json", "report", "analysis", "samples"} <= listed()
    assert "report/results.html" in listed("report")
    assert "analysis/eric/state_explorer.html" in listed("analysis/eric")


def test_every_variant_has_a_registered_model_version(deployed):
    services, _ = deployed
    experiment = corpus_experiment(services.root)
    children = {tags_of(r)["eric.variant"]: r for r in mlflow_runs(services.mlflow_url, experiment)
                if tags_of(r).get("eric.role") == "variant"}
    for variant, child in children.items():
        found = get_json(f"{services.mlflow_url}/api/2.0/mlflow/model-versions/search?filter=name%3D%27{experiment}-{variant}%27")
        versions = found.get("model_versions", [])
        assert [v["run_id"] for v in versions] == [child["info"]["run_id"]], variant
        assert tags_of(child)["eric.registered_model"] == f"models:/{experiment}-{variant}/{versions[0]['version']}"


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
