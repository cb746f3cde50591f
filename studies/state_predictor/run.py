"""Run the state-predictor study (arms.yaml): every arm trains ERIC with the real stage.

    python studies/state_predictor/run.py [--corpora world wikiplots] [--arms paper decoupled]
        [--jobs 2] [--no-seeds] [--only-outputs]

What is missing is run; what exists is kept (delete runs/<corpus>/<arm> to rerun one arm).
Per corpus: runs/<corpus>/data (preprocess + tokenizer, once), runs/<corpus>/<arm>/ (params,
model, log); outputs/<corpus>/<arm>/{train.csv, val.csv} are the stage's own curves, copied.
For the world, also outputs/world/oracle.json (the oracle's L_CL on the same validation
batches, eric/world/oracle.py) and outputs/world/<arm>/probe.json (does the predicted state
of the planned entity tell its next event type? eric/evaluate/state_probe.py).
Trainings run `--jobs` at a time with one torch thread each.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNS, OUTPUTS = HERE / "runs", HERE / "outputs"
sys.path.insert(0, str(ROOT))

from eric.config import set_dotted  # noqa: E402  (the project root is on the path first)
from studies import stage_runs  # noqa: E402
from studies.stage_runs import stage, study_params  # noqa: E402


def load_study() -> dict:
    return yaml.safe_load((HERE / "arms.yaml").read_text())


def arm_runs(study: dict, corpus: str, arms: list[str], seeds: bool) -> list[tuple[str, int, dict]]:
    """(run name, steps, overrides) of every training the study asks for on `corpus`."""
    spec = study["corpora"][corpus]
    order = sorted(arms, key=lambda arm: study["arms"][arm]["kind"] != "main")  # main arms first
    out = [(arm, spec["steps"][study["arms"][arm]["kind"]], dict(study["arms"][arm]["set"])) for arm in order]
    extra = [(f"{arm}-s{seed}", spec["steps"]["ablation"], {**study["arms"][arm]["set"], "seed": seed})
             for seed in seed_values(study, corpus) for arm in order if seeds and arm in study["seeds"]["arms"]]
    main = sum(study["arms"][arm]["kind"] == "main" for arm in order)
    return out[:main] + extra + out[main:]


def seed_values(study: dict, corpus: str) -> list[int]:
    """The extra seeds of `corpus` (its own `seeds` list, else the study's)."""
    return study["corpora"][corpus].get("seeds", study["seeds"]["values"])


def corpus_params(study: dict, corpus: str) -> dict:
    """params.yaml with the corpus profile and its study settings, data under runs/<corpus>/data."""
    spec = study["corpora"][corpus]
    return study_params(spec.get("profile"), {**spec.get("set", {}), "variants": ["eric"]}, RUNS / corpus / "data")


def ensure_data(study: dict, corpus: str) -> Path:
    return stage_runs.ensure_data(corpus_params(study, corpus), RUNS / corpus / "data")


def train_arm(study: dict, corpus: str, name: str, steps: int, overrides: dict) -> Path:
    run = RUNS / corpus / name
    params = corpus_params(study, corpus)
    for key, value in {**overrides, "train.max_steps": steps}.items():
        set_dotted(params, key, value)
    for key in ("out_dir", "metrics_dir", "plots_dir", "checkpoint_dir"):
        params["train"][key] = str(run / key.removesuffix("_dir"))
    run.mkdir(parents=True, exist_ok=True)
    path = run / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    if not (run / "plots" / "eric_val.csv").is_file():
        print(f"[{corpus}] training {name} ({steps} steps)", flush=True)
        stage("train_stage_one.py", path, run / "train.log", "eric")
    out = OUTPUTS / corpus / name
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(run / "plots" / "eric.csv", out / "train.csv")
    shutil.copy(run / "plots" / "eric_val.csv", out / "val.csv")
    (out / "overrides.json").write_text(json.dumps({**overrides, "train.max_steps": steps}, indent=1) + "\n")
    return path


def world_extras(data_params: Path, study: dict, arms: list[str]) -> None:
    """The oracle line (once) and the probe of each main arm's trained model."""
    from studies.state_predictor.measure import gradient_norms, oracle_line, probe_arm

    oracle = OUTPUTS / "world" / "oracle.json"
    if not oracle.is_file():
        oracle.write_text(json.dumps(oracle_line(data_params), indent=1) + "\n")
    for arm in arms:
        run, out = RUNS / "world" / arm, OUTPUTS / "world" / arm
        model = run / "out" / "eric"
        cfg = study["arms"][arm]
        if not (cfg["kind"] == "main" or cfg.get("probe")) or not model.is_dir():
            continue
        if not (out / "probe.json").is_file():
            (out / "probe.json").write_text(json.dumps(probe_arm(data_params, model), indent=1) + "\n")
        if not (out / "gradients.json").is_file():
            norms = {"at init": gradient_norms(run / "params.yaml"), "trained": gradient_norms(run / "params.yaml", model)}
            (out / "gradients.json").write_text(json.dumps(norms, indent=1) + "\n")


def main() -> None:
    study = load_study()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", nargs="+", default=list(study["corpora"]))
    parser.add_argument("--arms", nargs="+", default=None, help="default: the corpus's `arms` in arms.yaml, or all")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-seeds", action="store_true", help="skip the extra seeds")
    parser.add_argument("--skip-extras", action="store_true", help="no oracle or probe")
    args = parser.parse_args()
    for corpus in args.corpora:
        spec = study["corpora"][corpus]
        arms = args.arms or spec.get("arms", list(study["arms"]))
        data_params = ensure_data(study, corpus)
        runs = arm_runs(study, corpus, arms, not args.no_seeds)
        with ThreadPoolExecutor(args.jobs) as pool:
            for future in [pool.submit(train_arm, study, corpus, *run) for run in runs]:
                future.result()
        if corpus == "world" and not args.skip_extras:
            world_extras(data_params, study, arms)


if __name__ == "__main__":
    main()
