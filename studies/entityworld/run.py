"""Run the decisive EntityWorld study (plan.yaml): every arm x seed trains with the real stage.

    python studies/entityworld/run.py [--arms eric bart] [--seeds 1 2] [--jobs 2] [--no-mlflow]

What is missing is run; what exists is kept (delete runs/<arm>/seed-<s> to rerun one).
runs/data: the world (preprocess) and tokenizer, once. runs/<arm>/seed-<s>: params, model,
snapshots, logs. outputs/<arm>/seed-<s>/ (committed): the stage's own curves (train.csv,
val.csv), the learning curve over snapshots (curve.csv), and the final model's
measurements (stories.csv: the checker per test story, cases.csv: every coherence case,
probes.json, ...; final.json gathers them: measure.py). Before the arms, the mention writer
(stage two) is trained once on the world (runs/writer) and judged on the test inputs'
reference texts (outputs/writer); every arm's final texts use it. Trainings run `--jobs` at a time
with one torch thread each; each run is measured as soon as it is trained. At the end the study is one MLflow parent run
(experiment `study-entityworld`) with a nested run per arm and seed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNS, OUTPUTS = HERE / "runs", HERE / "outputs"
sys.path.insert(0, str(ROOT))

from eric.config import set_dotted  # noqa: E402  (the project root is on the path first)
from studies import stage_runs  # noqa: E402
from studies.stage_runs import stage, study_params  # noqa: E402


def load_plan() -> dict:
    return yaml.safe_load((HERE / "plan.yaml").read_text())


def base_params(plan: dict) -> dict:
    """params.yaml with the world profile and the plan's settings; data under runs/data."""
    return study_params(plan["profile"], {**plan["set"], "preprocess.n_process": 2}, RUNS / "data")


def ensure_data(plan: dict) -> Path:
    return stage_runs.ensure_data(base_params(plan), RUNS / "data")


def write_params(plan: dict, run: Path, overrides: dict, folders: tuple[str, ...]) -> Path:
    """`run`/params.yaml: the study's params, `overrides` (dotted keys), and the `train` folders
    named in `folders` (out_dir, ...) under `run`."""
    params = base_params(plan)
    for key, value in overrides.items():
        set_dotted(params, key, value)
    for key in folders:
        params["train"][key] = str(run / key.removesuffix("_dir"))
    run.mkdir(parents=True, exist_ok=True)
    path = run / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def run_params(plan: dict, arm: str, seed: int) -> tuple[Path, str]:
    """The run's params file (written) and its variant."""
    spec = plan["arms"][arm]
    overrides = {**spec.get("set", {}), "seed": seed, "variants": [spec["variant"]]}
    folders = ("out_dir", "metrics_dir", "plots_dir", "checkpoint_dir", "targets_dir")
    return write_params(plan, RUNS / arm / f"seed-{seed}", overrides, folders), spec["variant"]


def train(plan: dict, arm: str, seed: int) -> Path:
    path, variant = run_params(plan, arm, seed)
    run = path.parent
    if not (run / "plots" / f"{variant}_val.csv").is_file():
        print(f"training {arm} seed {seed}", flush=True)
        stage("train_stage_one.py", path, run / "train.log", variant)
    out = outputs(arm, seed)
    shutil.copy(run / "plots" / f"{variant}.csv", out / "train.csv")
    shutil.copy(run / "plots" / f"{variant}_val.csv", out / "val.csv")
    return path


def outputs(arm: str, seed: int | None = None) -> Path:
    out = OUTPUTS / arm / (f"seed-{seed}" if seed is not None else "")
    out.mkdir(parents=True, exist_ok=True)
    return out


def writer_params(plan: dict) -> Path:
    """The mention writer's run: the world's data, the plan's `writer` settings, its own folders."""
    spec, run = plan["writer"], RUNS / "writer"
    overrides = {**spec["set"], "seed": spec["seed"], "mentions.out_dir": str(run / "model")}
    return write_params(plan, run, overrides, ("metrics_dir", "plots_dir", "checkpoint_dir"))


def train_writer(plan: dict) -> Path:
    """Train the mention writer once (kept), then its curve and its final model on the reference
    texts (outputs/writer); returns the model folder every arm's final texts use."""
    from studies.entityworld.measure import writer_curve

    path = writer_params(plan)
    run, out = path.parent, outputs("writer")
    if not (run / "plots" / "mentions_val.csv").is_file():
        print("training the mention writer", flush=True)
        stage("train_mentions.py", path, run / "train.log")
    shutil.copy(run / "plots" / "mentions.csv", out / "train.csv")
    shutil.copy(run / "plots" / "mentions_val.csv", out / "val.csv")
    if not (out / "gold.csv").is_file():
        writer_curve(path, plan["evaluate"], out)
    return run / "model"


def measure_run(plan: dict, arm: str, seed: int, writer: Path) -> None:
    """Train if needed, then the learning curve and the final measurements (each kept)."""
    from studies.entityworld.measure import curve, final

    path = train(plan, arm, seed)
    out = outputs(arm, seed)
    if not (out / "curve.csv").is_file():
        curve(path, plan["evaluate"], out / "curve.csv")
    final(path, plan["evaluate"], out, writer)  # computes only the parts that are missing
    print(f"done {arm} seed {seed}", flush=True)


def main() -> None:
    plan = load_plan()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", nargs="+", default=list(plan["arms"]), choices=list(plan["arms"]))
    parser.add_argument("--seeds", nargs="+", type=int, default=plan["seeds"])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-mlflow", action="store_true", help="do not log the study to MLflow")
    args = parser.parse_args()
    data_params = ensure_data(plan)
    oracle = OUTPUTS / "oracle.json"
    if not oracle.is_file():
        from studies.entityworld.measure import oracle_event_probe

        OUTPUTS.mkdir(parents=True, exist_ok=True)
        oracle.write_text(json.dumps(oracle_event_probe(data_params, plan["evaluate"]), indent=1) + "\n")
    writer = train_writer(plan)
    runs = [(arm, seed) for seed in args.seeds for arm in args.arms]  # every arm's first seed first
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(measure_run, plan, arm, seed, writer): (arm, seed) for arm, seed in runs}
        failed = []
        for future in as_completed(futures):  # a failed run is named at once; the others go on
            if future.exception() is not None:
                arm, seed = futures[future]
                failed.append(f"{arm} seed {seed}")
                print(f"FAILED {arm} seed {seed}: {future.exception()}", file=sys.stderr, flush=True)
    if failed:
        sys.exit(f"{len(failed)} of {len(runs)} runs failed: {', '.join(failed)}")
    if not args.no_mlflow:
        from studies.entityworld.measure import log_study

        log_study(plan, OUTPUTS)


if __name__ == "__main__":
    main()
