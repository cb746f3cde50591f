"""The `eric` console script: ad-hoc entry points to the library.

Each command imports its subsystem lazily so `eric --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.callback()
def main() -> None:
    """ERIC pipeline tools (preprocess, evaluate, ...)."""


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=2)


def _absolute(path: str | None) -> str | None:
    """A path argument, relative to the current folder (not the project root)."""
    return str(Path(path).expanduser().absolute()) if path is not None else None


@app.command()
def preprocess(
    params: Optional[Path] = typer.Option(
        None, help="params.yaml to read", show_default="./params.yaml if there is one, else built-in defaults"
    ),
    corpus: Optional[str] = typer.Option(None, help="override corpus.path"),
    kind: Optional[str] = typer.Option(None, help="override corpus.kind (wikiplots|cnn|jsonl)"),
    name: Optional[str] = typer.Option(None, help="override corpus.name", show_default="with --corpus: its file name"),
    out_dir: Optional[str] = typer.Option(None, help="override preprocess.out_dir"),
    max_stories: Optional[int] = typer.Option(None, help="only the first N stories"),
    unit: Optional[str] = typer.Option(None, help="override preprocess.unit (sentence|edu)"),
    edu_rules: Optional[str] = typer.Option(None, help="override preprocess.edu_rules (discodvt|clauses)"),
    mentions: Optional[str] = typer.Option(None, help="override preprocess.mentions (resolve|paper|exact)"),
    overwrite: bool = typer.Option(False, help="replace an out-dir that eric preprocess did not write"),
) -> None:
    """Corpus -> units -> anonymized stage-one/stage-two examples in Parquet.

    Path arguments are relative to the current folder; paths inside a params file
    are relative to that file's folder."""
    from eric.config import ParamsError, default_params, load_params_here
    from eric.data.errors import CorpusError, OutputError
    from eric.data.pipeline import run_preprocess
    from eric.world.corpus import write_world_corpus

    if params is None and Path("params.yaml").is_file():
        params = Path("params.yaml")
    if corpus is not None and name is None:
        name = Path(corpus).name.split(".")[0] or None
    overrides = {
        k: v
        for k, v in {
            "corpus.path": _absolute(corpus),
            "corpus.kind": kind,
            "corpus.name": name,
            "preprocess.out_dir": _absolute(out_dir),
            "preprocess.max_stories": max_stories,
            "preprocess.unit": unit,
            "preprocess.edu_rules": edu_rules,
            "preprocess.mentions": mentions,
        }.items()
        if v is not None
    }
    try:
        if params is not None:
            cfg = load_params_here(params, overrides)
            protect = {"the params file": params}
        else:  # outside a project: defaults, their relative paths against the current folder
            defaults = default_params()
            overrides.setdefault("corpus.path", _absolute(defaults.corpus.path))
            overrides.setdefault("preprocess.out_dir", _absolute(defaults.preprocess.out_dir))
            cfg, protect = default_params(overrides), {}
        stats = run_preprocess(cfg, overwrite=overwrite, protect=protect, world=write_world_corpus)
    except (ParamsError, CorpusError, OutputError) as exc:
        _fail(str(exc))
    typer.echo(stats.summary())
    typer.echo(f"wrote {cfg.preprocess.out_dir}")


@app.command()
def evaluate(
    generations: Path = typer.Argument(..., help="file of generations (released .txt, lines, .jsonl, .parquet)"),
    references: Optional[Path] = typer.Option(None, "--references", "-r", help="human texts, paired by line/row"),
    inputs: Optional[Path] = typer.Option(None, help="inputs, one per line (MAUVE scores input + text)"),
    fmt: str = typer.Option("auto", "--format", help="auto|released|lines|jsonl|parquet"),
    text_field: Optional[str] = typer.Option(None, help="JSONL/Parquet text field (default: final_text, text, ...)"),
    input_field: Optional[str] = typer.Option(None, help="JSONL/Parquet input field (default: input, source)"),
    reference_field: Optional[str] = typer.Option(None, help="JSONL/Parquet reference field (default: reference)"),
    mauve: Optional[bool] = typer.Option(None, "--mauve/--no-mauve", help="override evaluate.mauve"),
    featurizer: Optional[str] = typer.Option(None, help="override evaluate.featurizer: minilm | GPT-2 folder"),
    seed: Optional[int] = typer.Option(None, help="override evaluate.seed (MAUVE)"),
    max_units: Optional[int] = typer.Option(None, help="override evaluate.max_units"),
    out: Optional[Path] = typer.Option(None, help="write the metrics as JSON here; an existing file is replaced "
                                       "only when `eric evaluate` wrote it, or with --overwrite (never an input)"),
    overwrite: bool = typer.Option(False, help="replace --out even when it is not an earlier `eric evaluate` output"),
    params: Path = typer.Option(Path("params.yaml"), help="params.yaml for defaults (optional)"),
) -> None:
    """Score any file of generations: B-1/2, MSJ-1/2, MAUVE, Rpt, D-3/4, Zipf, Len."""
    from contextlib import nullcontext

    from rich.console import Console

    from eric.config import ParamsError
    from eric.data.errors import OutputError
    from eric.data.outdir import output_lock
    from eric.evaluate.command import (
        check_metrics_out, evaluate_file, load_settings, metrics_table, provenance_line, write_json,
    )
    from eric.evaluate.errors import EvaluationError

    overrides = {"mauve": mauve, "featurizer": featurizer, "seed": seed, "max_units": max_units}
    read = {"the generations file": generations, "the --references file": references, "the --inputs file": inputs,
            "the params file": params}
    try:
        with output_lock(out) if out else nullcontext():  # a second run onto the same --out refuses
            if out:
                check_metrics_out(out, read, overwrite)
            settings = load_settings(params, {k: v for k, v in overrides.items() if v is not None})
            result = evaluate_file(
                generations, references, inputs, fmt, text_field, input_field, reference_field, settings
            )
            if out:
                write_json(result, out)
    except (ParamsError, EvaluationError, OutputError) as exc:
        _fail(str(exc))
    Console().print(metrics_table(result, title=generations.name))
    typer.echo(provenance_line(result))
    if out:
        typer.echo(f"wrote {out}")


@app.command()
def sample(
    model_dir: Path = typer.Argument(..., help="a stage-one model folder (e.g. models/stage_one/eric)"),
    inputs: Path = typer.Option(..., "--inputs", "-i", help="a stage_one split .parquet, or one input per line"),
    mentions: Optional[Path] = typer.Option(None, help="the mention model folder (models/mentions); "
                                            "without it every placeholder gets a training name"),
    names: Optional[Path] = typer.Option(None, help="stage_one .parquet whose mentions are the fallback names "
                                         "(default: the processed training split)"),
    out: Path = typer.Option(Path("samples.parquet"), help="output Parquet (eric/generate/schema.py); an existing "
                             "file is replaced only when `eric sample` wrote it, or with --overwrite"),
    overwrite: bool = typer.Option(False, help="replace --out even when it is not an earlier `eric sample` output"),
    num_inputs: Optional[int] = typer.Option(None, help="only the first N inputs"),
    decoding: Optional[str] = typer.Option(None, help="override sample.decoding: shared (every model with the "
                                           "settings below) | original (each baseline's own stage-one decoding)"),
    top_p: Optional[float] = typer.Option(None, help="override sample.top_p"),
    top_k: Optional[int] = typer.Option(None, help="override sample.top_k"),
    temperature: Optional[float] = typer.Option(None, help="override sample.temperature"),
    entity_temperature: Optional[float] = typer.Option(None, help="override sample.entity_temperature"),
    max_length: Optional[int] = typer.Option(None, help="override sample.max_length (stage-one tokens)"),
    batch_size: Optional[int] = typer.Option(None, help="override sample.batch_size"),
    seed: Optional[int] = typer.Option(None, help="override sample.seed"),
    show: int = typer.Option(3, help="print this many stories"),
    params: Path = typer.Option(Path("params.yaml"), help="params.yaml for defaults (optional)"),
) -> None:
    """Sample stories from a trained model: stage one, stage two (with --mentions), merge."""
    from eric.config import ParamsError
    from eric.data.errors import OutputError
    from eric.generate.command import load_settings, sample_file
    from eric.generate.errors import SampleError

    overrides = {"num_inputs": num_inputs, "decoding": decoding, "top_p": top_p, "top_k": top_k, "temperature": temperature,
                 "entity_temperature": entity_temperature, "max_length": max_length, "batch_size": batch_size,
                 "seed": seed}
    try:
        settings = load_settings(params, {k: v for k, v in overrides.items() if v is not None})
        rows = sample_file(model_dir, inputs, out, settings, mentions, names, overwrite)
    except (ParamsError, SampleError, OutputError) as exc:
        _fail(str(exc))
    for row in rows[:show]:
        typer.echo(f"[{row['id']}] {row['input']}\n  stage one: {row['stage_one']}\n  final: {row['final_text']}\n")
    typer.echo(f"{len(rows)} stories -> {out.resolve()}")


@app.command()
def show(
    files: Optional[list[Path]] = typer.Argument(None, help="samples .parquet files (eric sample, outputs/samples)"),
    variant: Optional[list[str]] = typer.Option(None, "--variant", "-v", help="a variant's samples in "
                                                "sample.out_dir (repeat for several)"),
    index: int = typer.Option(0, "--index", "-n", help="which input of the first file (0-based; -1 the last)"),
    # a default written into help text in brackets would be read as rich markup and vanish: show_default
    world: Optional[bool] = typer.Option(None, "--world/--no-world", help="the EntityWorld checker's verdict per unit",
                                         show_default="when params corpus.kind is world"),
    max_units: Optional[int] = typer.Option(None, help="show at most N units", show_default="evaluate.max_units"),
    params: Path = typer.Option(Path("params.yaml"), help="params.yaml for sample.out_dir (optional)"),
) -> None:
    """Read what the models wrote: one input, the human story and each file's story, unit by unit."""
    from rich.console import Console

    from eric.config import ParamsError, default_params, load_params, resolve_path
    from eric.evaluate.case_study import case_at, case_rich, read_sample_files
    from eric.evaluate.errors import EvaluationError
    from eric.evaluate.report import display_name

    try:
        settings = load_params(params) if params.is_file() else default_params()
        chosen = {Path(f).name.removesuffix(".parquet"): Path(f) for f in files or []}
        chosen.update({v: resolve_path(settings.sample.out_dir) / f"{v}.parquet" for v in variant or []})
        if not chosen:
            raise EvaluationError("name samples files or --variant (e.g. eric show --variant eric --variant bart)")
        is_world = settings.corpus.kind == "world" if world is None else world
        case = case_at(read_sample_files(chosen), index, is_world, max_units or settings.evaluate.max_units)
    except (ParamsError, EvaluationError) as exc:
        _fail(str(exc))
    Console().print(case_rich(case, display_name))


humaneval_app = typer.Typer(no_args_is_help=True, help="Human evaluation as the paper's Table 3: "
                            "prepare a pairwise study of two systems, then score its answers.")
app.add_typer(humaneval_app, name="humaneval")


@humaneval_app.command("prepare")
def humaneval_prepare(
    a: str = typer.Option(..., "--a", help="system A: a variant (its samples) or a file of generations"),
    b: str = typer.Option(..., "--b", help="system B, the same way"),
    n: int = typer.Option(200, "--n", help="test inputs to sample (all shared ones when fewer)"),
    seed: Optional[int] = typer.Option(None, help="sampling and side seed", show_default="params seed"),
    annotators: int = typer.Option(3, help="annotators per item (majority vote, Fleiss' kappa)"),
    inputs: Optional[Path] = typer.Option(None, help="inputs by id: a stage_one split or one per line "
                                          "(needed when neither system's file has them)"),
    out: Optional[Path] = typer.Option(None, help="study folder", show_default="outputs/humaneval/<a>_vs_<b>"),
    params: Path = typer.Option(Path("params.yaml"), help="params.yaml for sample.out_dir and seed (optional)"),
) -> None:
    """Write the annotation page, MTurk batch + template, Label Studio project and the private key."""
    from eric.humaneval.command import ParamsError, prepare_study
    from eric.humaneval.errors import HumanEvalError

    try:
        study, paths = prepare_study(a, b, n, seed, annotators, out, inputs, params)
    except (ParamsError, HumanEvalError) as exc:
        _fail(str(exc))
    for note in study.key.notes:
        typer.echo(f"note: {note}")
    typer.echo(f"study {study.key.study_id}: {len(study.items)} items, {annotators} annotators each")
    for name, path in paths.items():
        typer.echo(f"  {name:18} {path}")
    typer.echo("Keep key.json from the annotators; `eric humaneval score ANSWERS... --key` needs it.")


@humaneval_app.command("score")
def humaneval_score(
    answers: list[Path] = typer.Argument(..., help="page exports (.json), MTurk results (.csv), Label Studio exports (.json)"),
    key: list[Path] = typer.Option(..., "--key", help="the study's key.json (repeat for several studies: one row each)"),
    out: Optional[Path] = typer.Option(None, help="scores folder, read by the report", show_default="metrics/humaneval"),
    strict: bool = typer.Option(False, help="fail on any problem in the answers instead of reporting it"),
    mlflow: Optional[bool] = typer.Option(None, "--mlflow/--no-mlflow", help="log each study to MLflow",
                                          show_default="params train.mlflow"),
    params: Path = typer.Option(Path("params.yaml"), help="params.yaml for the default folder and MLflow (optional)"),
) -> None:
    """Majority vote, win/lose/tie, Fleiss' kappa, sign test, entity issues: the paper's Table 3."""
    from eric.humaneval.command import ParamsError, problem_lines, score_answers
    from eric.humaneval.errors import HumanEvalError

    try:
        results, paths = score_answers(answers, key, out, strict, mlflow, params)
    except (ParamsError, HumanEvalError) as exc:
        _fail(str(exc))
    typer.echo(paths["table"].read_text())
    for line in problem_lines(results):
        typer.secho(f"warning: {line}", fg=typer.colors.YELLOW, err=True)
    typer.echo(f"scores -> {paths['table'].parent}")


if __name__ == "__main__":
    app()
