"""State-space recipes at the same budget: does the codebook learn? (issue 10, docs/state-space.md)

    python benchmarks/bench_state_space.py --recipes paper legacy kmeans dead_codes ema entropy remedied \
        [--set train.max_steps=200] [--jobs 2] [--threads 1] [--out outputs/state_space]

For each recipe (a `model.state_space.recipe`, or `name:key=value,key=value` for a recipe with
overrides, e.g. `paper-shared:sentence_encoder_embeddings=shared`), this trains ERIC with the
real `train_stage_one` stage (DeepSpeed, MLflow run tagged `state_space_recipe`) on the
project's preprocessed data and tokenizer, then measures:

    states used on the training split (of K) and their usage perplexity (exp entropy)
    contrastive loss vs chance (ln of the in-batch candidates), at the end of training and on
        validation; `cl/chance` < 0.70 means 30% below chance
    validation LM loss
    entity coherence with the model's predicted states and with random states (test split)

and logs them into the recipe's MLflow run; one table row per recipe is printed and written
to <out>/results.{json,md}. Recipes run `--jobs` at a time (`--threads` torch threads each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
LOAD_LOCK = threading.Lock()
sys.path.insert(0, str(ROOT))


def recipe_spec(text: str) -> tuple[str, str, dict]:
    """'name' or 'name:key=value,...' -> (label, recipe, overrides of model.state_space)."""
    label, _, rest = text.partition(":")
    overrides = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        overrides[key] = yaml.safe_load(value)
    recipe = overrides.pop("recipe", label if not rest else "paper")
    return label, recipe, overrides


def write_params(out: Path, recipe: str, overrides: dict, sets: list[str]) -> Path:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["model"]["state_space"] = {"recipe": recipe, **overrides}
    params["variants"] = ["eric"]
    params["train"].update(out_dir=str(out / "models"), metrics_dir=str(out / "metrics"),
                           plots_dir=str(out / "plots"), checkpoint_dir=str(out / "checkpoints"))
    params["evaluate"].update(analysis_dir=str(out / "analysis"))
    for item in sets:
        key, _, value = item.partition("=")
        tree = params
        *parents, leaf = key.split(".")
        for part in parents:
            tree = tree[part]
        tree[leaf] = yaml.safe_load(value)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def train(params_path: Path, threads: int, log: Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
    with log.open("w") as handle:
        code = subprocess.call([sys.executable, "stages/train_stage_one.py", "eric", str(params_path)],
                               cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    if code:
        raise RuntimeError(f"training failed (exit {code}); see {log}")


def ensure_tokenizer(params_path: Path, threads: int) -> None:
    """Run the tokenizer stage once if these params point at a tokenizer that is not there
    (e.g. `--set tokenizer.pretrained=... tokenizer.out_dir=...` for a pretrained init)."""
    from eric.config import load_params, resolve_path

    if (resolve_path(load_params(params_path).tokenizer.out_dir) / "tokenizer_config.json").is_file():
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
    subprocess.check_call([sys.executable, "stages/tokenizer.py", str(params_path)], cwd=ROOT, env=env)


def _tail_mean(rows: list[dict], key: str, last: int = 5) -> float | None:
    values = [float(r[key]) for r in rows if r.get(key) not in (None, "")][-last:]
    return sum(values) / len(values) if values else None


def analyse(params_path: Path, threads: int, coherence_texts: int | None) -> dict:
    import csv

    import torch

    from eric.config import load_params
    from eric.evaluate.coherence import entity_coherence
    from eric.evaluate.state_analysis import training_state_usage
    from eric.generate.loading import load_stage_one
    from eric.model.state_space import usage_perplexity

    torch.set_num_threads(threads)
    params = load_params(params_path)
    m, out = params.model, Path(params.train.out_dir).parent
    with LOAD_LOCK:  # transformers builds models under a process-wide meta-device context
        model, tokenizer = load_stage_one(Path(params.train.out_dir) / "eric", "cpu")
    data = ROOT / params.preprocess.out_dir / "stage_one"
    import pyarrow.parquet as pq

    train_rows = pq.read_table(data / "train.parquet").to_pylist()
    usage = training_state_usage(model, tokenizer, train_rows, batch_size=16, max_source_length=m.max_source_length,
                                 max_target_length=m.max_target_length, entity_choice=m.entity_choice,
                                 seed=params.seed, progress=False)
    test_rows = pq.read_table(data / "test.parquet").to_pylist()[:coherence_texts]
    results = entity_coherence(model, tokenizer, test_rows, "eric", batch_size=16, seed=params.seed,
                               max_source_length=m.max_source_length, max_target_length=m.max_target_length)
    coherence = {r.label: r.accuracy for r in results}
    trained = json.loads((Path(params.train.metrics_dir) / "eric.json").read_text())
    curve = list(csv.DictReader((Path(params.train.plots_dir) / "eric.csv").open()))
    val = list(csv.DictReader((Path(params.train.plots_dir) / "eric_val.csv").open()))
    cl, chance = _tail_mean(curve, "contrastive_loss"), _tail_mean(curve, "contrastive_chance")
    val_cl, val_chance = _tail_mean(val, "val_contrastive_loss", 1), _tail_mean(val, "val_contrastive_chance", 1)
    return {
        "states_used": usage.used, "num_states": usage.num_states,
        "usage_perplexity": round(usage_perplexity(torch.tensor(usage.counts)), 1),
        "top_state_share": round(max(usage.counts) / max(usage.units, 1), 3),
        "contrastive_loss": cl, "contrastive_chance": chance,
        "contrastive_vs_chance": round(cl / chance, 3) if cl and chance else None,
        "val_contrastive_vs_chance": round(val_cl / val_chance, 3) if val_cl and val_chance else None,
        "val_lm_loss": trained.get("final_val_lm_loss"),
        "coherence_predicted": coherence.get("eric"), "coherence_random": coherence.get("eric (random states)"),
        "coherence_cases": sum(sum(r.total.values()) for r in results[:1]),
        "event_cosine_end": _tail_mean(curve, "event_cosine"), "event_rank_end": _tail_mean(curve, "event_rank"),
        "train_seconds": trained.get("train_seconds"), "mlflow_run_id": trained.get("mlflow_run_id"),
        "out": str(out),
    }


def log_to_mlflow(params_path: Path, label: str, row: dict) -> None:
    from eric.config import load_params
    from eric.tracking import start_run

    params = load_params(params_path)
    if not params.train.mlflow or not row.get("mlflow_run_id"):
        return
    tracker = start_run(params.corpus.name, stage="train_stage_one", variant="eric", run_id=row["mlflow_run_id"])
    tracker.set_tags({"state_space_recipe": label, "eric.bench": "state_space"})
    numbers = {f"state_space.{k}": float(v) for k, v in row.items() if isinstance(v, (int, float)) and v is not None}
    tracker.log_metrics(numbers, step=params.train.max_steps or 0)
    tracker.finish()


def run_one(spec: str, args) -> tuple[str, dict]:
    label, recipe, overrides = recipe_spec(spec)
    out = (args.out / label).resolve()
    params_path = write_params(out, recipe, overrides, args.set)
    start = time.time()
    if not (args.analyse_only and (out / "models" / "eric" / "config.json").is_file()):
        train(params_path, args.threads, out / "train.log")
    row = analyse(params_path, args.threads, args.coherence_texts)
    row["wall_seconds"] = round(time.time() - start)
    log_to_mlflow(params_path, label, row)
    (out / "result.json").write_text(json.dumps(row, indent=1))
    print(f"{label}: {json.dumps(row)}", flush=True)
    return label, row


COLUMNS = [("states_used", "States used"), ("usage_perplexity", "Usage ppl"), ("top_state_share", "Top share"),
           ("contrastive_vs_chance", "L_CL/chance (train)"), ("val_contrastive_vs_chance", "L_CL/chance (val)"),
           ("val_lm_loss", "Val LM loss"), ("coherence_predicted", "Coherence (pred.)"),
           ("coherence_random", "Coherence (random)"), ("event_cosine_end", "e_n cosine"),
           ("event_rank_end", "e_n eff. rank")]


def markdown(rows: dict[str, dict]) -> str:
    lines = ["| Recipe | " + " | ".join(name for _, name in COLUMNS) + " |",
             "|---|" + "---:|" * len(COLUMNS)]
    for label, row in rows.items():
        cells = []
        for key, _ in COLUMNS:
            value = row.get(key)
            cells.append("–" if value is None else (f"{value}/{row['num_states']}" if key == "states_used"
                                                     else f"{value:.3f}" if isinstance(value, float) else str(value)))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipes", nargs="+", default=["paper", "legacy", "kmeans", "dead_codes", "ema",
                                                         "entropy", "remedied"])
    parser.add_argument("--set", nargs="*", default=[], help="params overrides, e.g. train.max_steps=100")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--coherence-texts", type=int, default=None, help="test texts for coherence (all)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "state_space")
    parser.add_argument("--analyse-only", action="store_true", help="reuse a recipe's trained model if it is there")
    args = parser.parse_args()
    ensure_tokenizer(write_params(args.out / "_tokenizer", "paper", {}, args.set), args.threads)
    with ThreadPoolExecutor(args.jobs) as pool:
        done = dict(pool.map(lambda spec: run_one(spec, args), args.recipes))
    rows = {label: done[label] for label in (recipe_spec(s)[0] for s in args.recipes)}
    args.out.mkdir(parents=True, exist_ok=True)
    previous = json.loads((args.out / "results.json").read_text()) if (args.out / "results.json").is_file() else {}
    merged = {**previous, **rows}
    (args.out / "results.json").write_text(json.dumps(merged, indent=1))
    (args.out / "results.md").write_text(markdown(merged) + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
