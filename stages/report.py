"""DVC stage `report`: one table of every variant (as the paper's Table 2) with a Truth row,
the analyses, the coherence and state-usage plots, the top state transitions.

    python stages/report.py [params.yaml]

Reads metrics/evaluate/<variant>.json and outputs/analysis/<variant>/ for the variants
in params.yaml, the references of outputs/samples/<first variant>.parquet (Truth: the
reference-free metrics of the human texts), metrics/train/<variant>.json (budget) and the
scored human-evaluation studies in metrics/humaneval/ (Table 3; `eric humaneval score`).
Writes reports/results.md, results.html, coherence.png, state_usage.png, the headline
figures metrics/headline/<variant>.json (the pipeline's DVC metrics) and logs them,
with every variant's numbers, to an MLflow run (stage `report`). A Prefect flow.
"""

from __future__ import annotations

import json
from pathlib import Path

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, load_params, resolve_path
from eric.data.errors import OutputError
from eric.evaluate.errors import EvaluationError
from eric.humaneval.errors import HumanEvalError


@stage_task
def read_params(params_path: str) -> Params:
    return load_params(params_path)


def _read_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise EvaluationError(f"{path}: no {what}")
    return json.loads(path.read_text())


@stage_task
def collect(params: Params):
    from eric.evaluate.coherence import read_rows
    from eric.evaluate.report import ReportInputs
    from eric.evaluate.state_analysis import read_usage
    from eric.evaluate.state_transitions import read_transitions
    from eric.humaneval.command import read_scores, scores_dir
    from eric.humaneval.table import report_section

    metrics, coherence, usage, transitions = {}, [], {}, {}
    for variant in params.variants:
        path = resolve_path(params.evaluate.metrics_dir) / f"{variant}.json"
        metrics[variant] = _read_json(path, f"metrics (run `dvc repro evaluate@{variant}` first)")
        folder = resolve_path(params.evaluate.analysis_dir) / variant
        if (folder / "coherence.csv").is_file():
            coherence.extend(read_rows(folder / "coherence.csv"))
        if (folder / "state_usage.csv").is_file():
            usage[variant] = read_usage(folder / "state_usage.csv")
        if (folder / "state_transitions.csv").is_file():
            transitions[variant] = read_transitions(folder / "state_transitions.csv")
    samples = read_variant_samples(params)  # read once: the Truth row and the case study
    truth = truth_metrics(params, samples)
    humaneval = report_section(read_scores(scores_dir(params)))  # eric humaneval score, when a study was scored
    trained = training_metrics(params)
    return ReportInputs(metrics, truth, coherence, usage, about(params, metrics, truth, trained),
                        transitions=transitions, humaneval=humaneval, training=trained,
                        cases=case_study(params, samples), explorers=explorers(params),
                        matched=matched_b1(params, samples))


def matched_b1(params: Params, samples: dict[str, list[dict]]) -> dict[str, float]:
    """B-1 at equal length of every sampled variant, on the test inputs they all wrote (by id);
    {} without references."""
    from eric.evaluate.scoring import matched_b1 as score

    common = set.intersection(*({r["id"] for r in rows} for rows in samples.values())) if samples else set()
    first = [r for r in next(iter(samples.values()), []) if r["id"] in common]  # its order, its references
    if not first or not all(r["reference"] for r in first):
        return {}
    by_id = {v: {r["id"]: r["final_text"] for r in rows} for v, rows in samples.items()}
    generations = {v: [texts[r["id"]] for r in first] for v, texts in by_id.items()}
    return score(generations, [r["reference"] for r in first], params.evaluate.max_units)


def read_variant_samples(params: Params) -> dict[str, list[dict]]:
    """variant -> its sample rows (outputs/samples/<variant>.parquet), for the variants sampled."""
    from eric.generate.schema import read_samples

    folder = resolve_path(params.sample.out_dir)
    return {v: read_samples(folder / f"{v}.parquet") for v in params.variants if (folder / f"{v}.parquet").is_file()}


def case_study(params: Params, samples: dict[str, list[dict]] | None = None) -> list:
    """`evaluate.case_studies` test inputs every variant sampled, side by side (seeded choice)."""
    from eric.evaluate.case_study import build_cases

    samples = read_variant_samples(params) if samples is None else samples
    e = params.evaluate
    return build_cases(samples, e.case_studies, params.seed, world=params.corpus.kind == "world",
                       max_units=e.max_units)


def explorers(params: Params) -> dict[str, str]:
    """variant -> its state explorer page, as a link from the report's folder."""
    import os

    report, analysis = resolve_path(params.evaluate.report_dir), resolve_path(params.evaluate.analysis_dir)
    pages = {v: analysis / v / "state_explorer.html" for v in params.variants}
    return {v: Path(os.path.relpath(page, report)).as_posix() for v, page in pages.items() if page.is_file()}


def truth_metrics(params: Params, samples: dict[str, list[dict]]) -> dict | None:
    """Reference-free metrics of the references the first variant was scored against."""
    from eric.evaluate.scoring import evaluate_texts

    if params.variants[0] not in samples:
        return None
    references = [r["reference"] for r in samples[params.variants[0]]]
    if not references or not all(references):
        return None
    e = params.evaluate
    return evaluate_texts(references, mauve=False, max_units=e.max_units, zipf_top=e.zipf_top)


def about(params: Params, metrics: dict[str, dict], truth: dict | None, trained: dict[str, dict]) -> list[str]:
    """How the numbers were made: corpus, model size, training budget, scoring."""
    from eric.evaluate.scoring import mauve_note

    m, first = params.model, next(iter(metrics.values()), {})
    size = f"{m.size} preset" + (f", initialized from {m.init}" if m.init else ", random init")
    lines = [
        f"Corpus: {params.corpus.name} ({params.corpus.path}); {first.get('n_texts', '?')} "
        f"{params.sample.split} inputs, sampled with top-p {params.sample.top_p}, seed "
        f"{params.seed if params.sample.seed is None else params.sample.seed}",
        f"Model size: {size}; K = {m.num_states} states of D = {m.state_dim}",
        f"Training budget: {budget(params, trained)}",
        f"State-space recipe (model.state_space, docs/state-space.md): {recipes(params, trained)}",
    ]
    lines.append(f"Scoring: {first.get('tokenizer', '?')}, at most {params.evaluate.max_units} units; "
                 f"MAUVE: {mauve_note(first)}")
    if truth is None:
        lines.append("Truth: no references in the samples")
    return lines


def training_metrics(params: Params) -> dict[str, dict]:
    """metrics/train/<variant>.json of every trained variant in `variants`."""
    found = {}
    for variant in params.variants:
        path = resolve_path(params.train.metrics_dir) / f"{variant}.json"
        if path.is_file():
            found[variant] = json.loads(path.read_text())
    return found


def recipes(params: Params, trained: dict[str, dict] | None = None) -> str:
    """Each state-learning variant's recipe, as its training run recorded it."""
    trained = training_metrics(params) if trained is None else trained
    parts = [f"{v} {t['state_space_recipe']}" for v, t in trained.items() if t.get("state_space_recipe")]
    return "; ".join(parts) or "no variant with states"


def budget(params: Params, trained: dict[str, dict] | None = None) -> str:
    trained = training_metrics(params) if trained is None else trained
    parts = [f"{variant} {t.get('steps')} steps ({t.get('epochs')} epochs, "
             f"{t.get('train_examples')} examples, {t.get('parameters', 0) / 1e6:.1f}M parameters)"
             for variant, t in trained.items()]
    return "; ".join(parts) or "unknown (no metrics/train files)"


@stage_task
def write(params: Params, inputs) -> dict[str, Path]:
    from eric.data.outdir import output_lock
    from eric.evaluate.headline import write_headlines
    from eric.evaluate.report import write_report

    report_dir, headline_dir = resolve_path(params.evaluate.report_dir), resolve_path(params.evaluate.headline_dir)
    with output_lock(report_dir), output_lock(headline_dir):  # a second report run refuses in one line
        paths = write_report(inputs, report_dir)
        write_headlines(headline_dir, inputs.metrics, inputs.training, inputs.matched)
    print(paths["markdown"].read_text())
    return paths


@stage_task
def log(params: Params, inputs, paths: dict[str, Path]) -> None:
    from eric.tracking import start_run

    if not params.train.mlflow:
        return
    numbers = {f"{variant}.{name}": value for variant, m in inputs.metrics.items() for name, value in m.items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)}
    with start_run(params.corpus.name, stage="report", variant="all",
                   params={"variants": ",".join(params.variants), "evaluate": params.evaluate.model_dump()}) as tracker:
        tracker.log_metrics(numbers, step=0)
        for path in paths.values():
            tracker.log_artifact(path)


@stage_flow("report")
def run(params_path: str = "params.yaml") -> dict:
    params = read_params(params_path)
    inputs = collect(params)
    paths = write(params, inputs)
    log(params, inputs, paths)
    return {name: str(path) for name, path in paths.items()}


if __name__ == "__main__":
    run_stage(run, ParamsError, EvaluationError, HumanEvalError, OutputError)
