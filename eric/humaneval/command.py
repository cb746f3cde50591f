"""What `eric humaneval prepare` and `eric humaneval score` do, kept out of cli.py.

prepare writes, under its out folder (default outputs/humaneval/<a>_vs_<b>/, beside
sample.out_dir):
  key.json                    PRIVATE: which system is left per item; keep it from annotators
  page/annotate.html          the offline annotation page
  mturk/batch.csv, question.html
  labelstudio/config.xml, tasks.json
score writes <out>/<a>_vs_<b>.json per study and <out>/table3.md (default
metrics/humaneval/, beside evaluate.metrics_dir, which the report stage reads) and logs
each study to MLflow.
"""

from __future__ import annotations

import json
from pathlib import Path

from eric.config import Params, ParamsError, default_params, load_params, resolve_path
from eric.humaneval import labelstudio, mturk
from eric.humaneval.answers import PROBLEMS, check_answers, read_answers, route
from eric.humaneval.errors import HumanEvalError
from eric.humaneval.page import write_page
from eric.humaneval.score import flat_metrics, score_study
from eric.humaneval.study import Study, build_study, read_key, write_key
from eric.humaneval.systems import read_system
from eric.humaneval.table import to_markdown

def load(params: Path | None) -> Params:
    return load_params(params) if params is not None and params.is_file() else default_params()


def scores_dir(cfg: Params) -> Path:
    """Where scored studies go and the report looks: metrics/humaneval by default."""
    return resolve_path(cfg.evaluate.metrics_dir).parent / "humaneval"


def studies_dir(cfg: Params) -> Path:
    return resolve_path(cfg.sample.out_dir).parent / "humaneval"


def _read_inputs(path: Path) -> dict[str, str]:
    from eric.generate.errors import SampleError
    from eric.generate.inputs import read_inputs

    try:
        return {row.id: row.input for row in read_inputs(path)}
    except SampleError as exc:
        raise HumanEvalError(str(exc)) from None


def prepare_study(a: str, b: str, n: int = 200, seed: int | None = None, annotators: int = 3,
                  out: Path | None = None, inputs: Path | None = None,
                  params: Path | None = None) -> tuple[Study, dict[str, Path]]:
    if a == b:
        raise HumanEvalError("--a and --b name the same system")
    cfg = load(params)
    samples_dir = resolve_path(cfg.sample.out_dir)
    sys_a, sys_b = read_system(a, samples_dir), read_system(b, samples_dir)
    study = build_study(sys_a, sys_b, n=n, seed=cfg.seed if seed is None else seed, annotators=annotators,
                        inputs=_read_inputs(inputs) if inputs else None, corpus=cfg.corpus.name)
    out = out or studies_dir(cfg) / f"{sys_a.name}_vs_{sys_b.name}"
    paths = {"key": write_key(study.key, out / "key.json"),
             "page": write_page(study, out / "page" / "annotate.html"),
             "mturk_batch": mturk.write_batch(study, out / "mturk" / "batch.csv"),
             "mturk_template": mturk.write_template(out / "mturk" / "question.html")}
    ls = labelstudio.write_project(study, out / "labelstudio")
    paths.update({"labelstudio_config": ls["config"], "labelstudio_tasks": ls["tasks"]})
    return study, paths


def score_answers(answers: list[Path], keys: list[Path], out: Path | None = None, strict: bool = False,
                  mlflow: bool | None = None, params: Path | None = None) -> tuple[list[dict], dict[str, Path]]:
    """Score every key's study; `out` and `mlflow` default to params (train.mlflow)."""
    if not answers:
        raise HumanEvalError("no answers files given")
    loaded = [read_key(k) for k in keys]
    ids = [k.study_id for k in loaded]
    if len(set(ids)) != len(ids):
        raise HumanEvalError("the same key is given twice")
    rows = [row for path in answers for row in read_answers(path)]
    by_study = route(rows, loaded)
    results = []
    for key in loaded:
        checked = check_answers(by_study[key.study_id], key)
        if strict and checked.problems:
            found = ", ".join(f"{PROBLEMS[k]}: {len(v)}" for k, v in sorted(checked.problems.items()))
            raise HumanEvalError(f"study {key.study_id}: {found}")
        results.append(score_study(key, checked))
    cfg = load(params) if out is None or mlflow is None else None
    out = out or scores_dir(cfg)
    mlflow = cfg.train.mlflow if mlflow is None else mlflow
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for result in results:
        path = out / f"{result['a']}_vs_{result['b']}.json"
        path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        paths[result["study_id"]] = path
    paths["table"] = out / "table3.md"
    paths["table"].write_text(render_table(results) + "\n")
    if mlflow:
        for key, result in zip(loaded, results):
            log_study(key, result, [paths[result["study_id"]], paths["table"]], answers)
    return results, paths


def render_table(results: list[dict]) -> str:
    from eric.evaluate.report import display_name

    return to_markdown(results, display_name)


def problem_lines(results: list[dict]) -> list[str]:
    """One line per kind of problem found, with a few examples: never silent."""
    lines = []
    for r in results:
        for kind, count in r["problems"].items():
            examples = ", ".join(r["problem_examples"][kind])
            lines.append(f"{r['a']} vs. {r['b']}: {PROBLEMS[kind]}: {count} (e.g. {examples})")
    return lines


def log_study(key, result: dict, artifacts: list[Path], answers: list[Path]) -> None:
    from eric.tracking import start_run

    params = {"study_id": key.study_id, "a": key.name("a"), "b": key.name("b"), "seed": key.seed,
              "annotators": key.annotators, "items": len(key.items),
              "answers": ",".join(p.name for p in answers)}
    with start_run(key.corpus or "humaneval", stage="humaneval", variant=f"{key.name('a')}_vs_{key.name('b')}",
                   params=params) as tracker:
        tracker.log_metrics(flat_metrics(result), step=0)
        for path in artifacts:
            tracker.log_artifact(path)



def read_scores(folder: Path) -> list[dict]:
    """Scored studies in a scores folder (for the report), in file-name order; none: []."""
    results = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise HumanEvalError(f"{path}: not a JSON file of scores (rerun `eric humaneval score`)") from None
        if isinstance(data, dict) and {"study_id", "informativeness", "entity_issues"} <= set(data):
            results.append(data)
    return results


__all__ = ["prepare_study", "score_answers", "problem_lines", "read_scores", "ParamsError"]
