"""A study: one published table, rerun with one command.

    python flows/study.py studies/<name> [--only CONFIG ...] [--seed N ...] [--stale | --force]

or `prefect deployment run eric-study/study --param study=studies/baselines`.
`studies/<name>/study.yaml` declares its configurations (params overrides, a profile,
the variants); each runs through the pipeline flow (flows/pipeline.py, as a deployment
runs it: a DVC experiment in a checkout of its own, one MLflow pipeline run tagged with
the study and configuration) and keeps its metrics, report and dvc.lock under
`studies/<name>/outputs/<config>/` with `run.json` (commit, command, MLflow run). A
configuration whose outputs exist is skipped (resumable; `--stale` reruns it if its code
or settings changed since, as its kept dvc.lock tells (studies/currency.py); `--force`
reruns it regardless; stages
DVC already ran with the same code and params come from its run cache). Then the study's
`results.md` and the docs' generated blocks are rendered (studies/render.py).
A study's `grids` (arms x seeds) are configurations like any other (studies/spec.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline import PROJECT_ROOT, pipeline  # noqa: E402  (sets the Prefect/MLflow environment first)
from dvc_steps import OverrideError, PipelineError  # noqa: E402
from eric.env import exit_interrupted, stop_ephemeral_server_with_process  # noqa: E402
from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

sys.path.insert(0, str(PROJECT_ROOT))
from studies.currency import older, study_drift  # noqa: E402
from studies.spec import RUN_FILE, StudySpec, load_study  # noqa: E402


def _record(spec: StudySpec, name: str, result: dict[str, Any]) -> None:
    run = {
        "study": spec.name,
        "configuration": name,
        "commit": result["git"]["commit"],
        "dirty": result["git"]["dirty"],
        "command": result["command"],
        "overrides": result["overrides"],
        "dvc_experiment": result.get("dvc_experiment"),
        "mlflow_run_id": result["mlflow"]["run_id"],
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    (spec.outputs / name / RUN_FILE).write_text(json.dumps(run, indent=2) + "\n")


@flow(name="eric-study", persist_result=False)
def study(study: str, only: list[str] | None = None, force: bool = False, stale: bool = False,
          seeds: list[int] | None = None) -> dict[str, str]:
    """Run what is missing of a study (or of the configurations `only` names, of the `seeds`
    given), keep its outputs, render its pages. `stale`: rerun too the kept configurations
    whose code or settings changed since (studies/currency.py); `force`: rerun every one."""
    logger = get_run_logger()
    spec = load_study(PROJECT_ROOT / study)
    done: dict[str, str] = {}
    for name in spec.select(only, seeds):
        config = spec.configurations[name]
        if not force and spec.is_done(name):
            drift = study_drift(spec, name, PROJECT_ROOT)
            if not (stale and older(drift)):
                logger.info("%s: kept outputs exist%s", name, f", ran at older code: {drift.describe()} (--stale "
                            "reruns it)" if older(drift) else " (--force reruns it)")
                done[name] = "kept"
                continue
        logger.info("%s: running %s", name, config.describe())
        result = pipeline(
            profile=config.profile,
            overrides=config.set,
            variants=config.variants,
            experiment=f"study-{spec.name}",
            keep=str(spec.outputs / name),
            tags={"eric.study": spec.name, "eric.study.configuration": name},
        )
        _record(spec, name, result)
        done[name] = "ran"
    render_pages()
    return done


@task(cache_policy=NO_CACHE)
def render_pages() -> str:
    """`python -m studies.render` in a process of its own, after runs of hours: the pages come
    from the code and params.yaml the workspace has now, not from what this flow imported at
    its start. A failure is one logged line: the kept outputs are in place either way."""
    logger = get_run_logger()
    command = [sys.executable, "-m", "studies.render"]
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        logger.warning("rendering failed (%s); the outputs are kept: rerun python -m studies.render", last)
        return f"failed: {last}"
    logger.info("rendered: %s", ", ".join(done.stdout.split()[1::2]) or "nothing changed")
    return done.stdout


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="Rerun a study (what is missing) and render its pages.")
    parser.add_argument("study", help="a folder under studies/, e.g. studies/baselines")
    parser.add_argument("--only", action="append", help="this configuration only (repeatable)")
    parser.add_argument("--seed", action="append", type=int, help="the configurations of this seed only (repeatable): "
                        "a grid's arms, in study.yaml's order")
    parser.add_argument("--stale", action="store_true", help="rerun kept configurations that ran at older code")
    parser.add_argument("--force", action="store_true", help="rerun configurations whose outputs exist")
    args = parser.parse_args(argv)
    stop_ephemeral_server_with_process()  # killed, this flow takes its ephemeral Prefect server with it
    path = Path(args.study).resolve()
    try:
        rel = str(path.relative_to(PROJECT_ROOT))
        load_study(path).select(args.only, args.seed)  # a name or seed that selects nothing: one line, before any run
        done = study(rel, args.only, args.force, args.stale, args.seed)
    except (ValueError, OverrideError, PipelineError) as exc:
        sys.exit(f"eric-study: {exc}")
    except KeyboardInterrupt:
        exit_interrupted("eric-study")
    print(yaml.safe_dump(done, sort_keys=False), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
