"""DVC stage `evaluate@<variant>`: the paper's metrics and analyses for one variant.

    python stages/evaluate.py <variant> [params.yaml]

- Table-2 metrics of outputs/samples/<variant>.parquet against its references
  (eric.evaluate.evaluate_texts), and the merge fallbacks;
- entity mention control and the states the generations used (variants with a planner);
- entity coherence by position on the test split, with the model's predicted states and
  with random states (eric/evaluate/coherence.py);
- the LM loss on the training loop's validation rows (variants of kind eric): with gold and
  with the model's own predicted states where it has states (`lm_loss_gold_states`,
  `lm_loss_predicted_states`), else `lm_loss` (eric/evaluate/lm_loss.py);
- states used out of K on the training split, the ten most used, the state transitions
  of the same pass (eric/evaluate/state_transitions.py), the state explorer
  (eric/evaluate/state_analysis.py);
- on EntityWorld (corpus.kind: world): the checker over the samples with its per-story
  counts, coherence on the swaps the checker says break a rule under every scoring and state
  mode (predicted, gold, random), learned vs true states (eric/evaluate/world_metrics.py),
  the probes (world_probes.py), the L_CL lines of chance, identity, oracle and oracle +
  identity per candidate set (world_lines.py) and, with evaluate.world.curve_inputs, the
  learning curve over the training snapshots (world_curve.py): the `world` key
  (docs/entityworld.md).
Outputs: metrics/evaluate/<variant>.json (DVC metrics), outputs/analysis/<variant>/
{coherence.csv, state_usage.csv, state_transitions.csv, state_explorer.html}; the
numbers are logged to the variant's MLflow run (its train_stage_one run, else a new
evaluate run).
A Prefect flow (`stage-evaluate`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, load_variant_params, resolve_path
from eric.evaluate.compact_json import dumps
from eric.evaluate.errors import EvaluationError
from eric.generate.errors import SampleError

USER_ERRORS = (ParamsError, EvaluationError, SampleError)


@stage_task
def read_params(params_path: str, variant: str) -> Params:
    return load_variant_params(params_path, variant)


def analysis_dir(params: Params, variant: str) -> Path:
    return resolve_path(params.evaluate.analysis_dir) / variant


@stage_task
def score_samples(params: Params, variant: str) -> dict:
    """Table-2 metrics, merge fallbacks, mention control, states used while sampling."""
    from eric.evaluate.scoring import evaluate_with
    from eric.evaluate.state_analysis import generated_states, mention_control
    from eric.generate.schema import fallback_summary, read_samples

    path = resolve_path(params.sample.out_dir) / f"{variant}.parquet"
    if not path.is_file():
        raise EvaluationError(f"{path}: no samples (run `dvc repro sample@{variant}` first)")
    rows = read_samples(path)
    references = [r["reference"] or "" for r in rows]
    metrics = evaluate_with(params.evaluate, [r["final_text"] for r in rows], references if all(references) else None,
                            [r["input"] for r in rows])
    metrics["fallback"] = fallback_summary(rows)
    if any(r["unit_entities"] for r in rows):
        control = mention_control(rows)
        metrics["mention_control"] = control.share
        metrics["mention_control_units"] = control.units
        if params.model.variants[variant].state:
            metrics["states_used_generated"] = len(generated_states(rows))
    return metrics


@stage_task
def load_model(params: Params, variant: str):
    from eric.generate.loading import load_stage_one
    from eric.train.runtime import device_kind

    return load_stage_one(resolve_path(params.train.out_dir) / variant, device_kind(), variant)


def _rows(params: Params, split: str, columns: list[str], limit: int | None) -> list[dict]:
    import pyarrow.parquet as pq

    path = resolve_path(params.preprocess.out_dir) / "stage_one" / f"{split}.parquet"
    if not path.is_file():
        raise EvaluationError(f"{path}: no such split (run the preprocess stage first)")
    table = pq.read_table(path, columns=columns)
    return (table.slice(0, limit) if limit else table).to_pylist()


@stage_task
def coherence(params: Params, variant: str, model, tokenizer) -> tuple[dict, dict | None]:
    """(the paper's lm coherence by position; on EntityWorld, every scoring's outcomes, else None)."""
    from eric.evaluate.coherence import entity_coherence, write_rows

    e, m = params.evaluate, params.model
    world = params.corpus.kind == "world"
    columns = ["id", "source", "target", "unit_entities", *(["units"] if world else [])]
    rows = _rows(params, "test", columns, e.coherence_max_texts)
    options = dict(batch_size=e.analysis_batch_size, seed=params.seed, max_source_length=m.max_source_length,
                   max_target_length=m.max_target_length)
    variants = None
    if world:  # EntityWorld: only swaps the checker says break a rule, under each scoring (lm once)
        from eric.evaluate.world_metrics import coherence_variants, world_coherence

        scorings = e.world.coherence_scorings
        results, variants = coherence_variants(model, tokenizer, rows, variant, scorings, **options)
        results = results if "lm" in scorings else world_coherence(model, tokenizer, rows, variant, **options)
    else:
        results = entity_coherence(model, tokenizer, rows, variant, **options)
    write_rows(results, analysis_dir(params, variant) / "coherence.csv")
    summary = {r.label: {"accuracy": r.accuracy, "cases": sum(r.total.values()),
                         "by_position": {str(k): v for k, v in r.by_position().items()}} for r in results}
    print("; ".join(f"coherence {label}: {v['accuracy']} over {v['cases']} cases" for label, v in summary.items()))
    return summary, variants


@stage_task
def lm_loss(params: Params, variant: str, model, tokenizer) -> dict:
    """The LM loss on the training loop's validation rows and batches (train.max_val_examples):
    with gold and with the model's own predicted states for a variant with states, else plain
    (eric/evaluate/lm_loss.py). Baselines with batch inputs of their own are left out."""
    from eric.data.one_stage import COLUMNS as ONE_STAGE_COLUMNS
    from eric.data.one_stage import one_stage_row
    from eric.evaluate.lm_loss import val_batches, validation_lm_loss

    m, t, two_stage = params.model, params.train, params.model.variants[variant].two_stage
    rows = _rows(params, "val", ["id", "source", "target", "unit_entities", *(() if two_stage else ONE_STAGE_COLUMNS)],
                 t.max_val_examples)
    rows = rows if two_stage else [one_stage_row(r) for r in rows]  # as the training stage reads them
    batches = val_batches(tokenizer, rows, t.micro_batch_size, m.max_source_length, m.max_target_length)
    out = validation_lm_loss(model, _collator(params, tokenizer), rows, batches)
    print(f"{variant}: validation LM loss over {out['lm_loss_texts']} texts: "
          + ", ".join(f"{k} {v}" for k, v in out.items() if isinstance(v, float)))
    return out


@stage_task
def world_metrics(params: Params, variant: str, model, tokenizer) -> dict:
    """EntityWorld: the checker over the samples (stage one, final, references; per story and
    at the world's event mix) and, with a model that has states, their agreement with the
    true states on the test split."""
    from eric.evaluate.world_metrics import WORLD_COLUMNS, sample_checks, state_agreement
    from eric.evaluate.world_mix import world_mix
    from eric.generate.schema import read_samples

    e, m, w = params.evaluate, params.model, params.corpus.world
    mix = world_mix(w.seed, e.world.mix_stories, tuple(w.cast), params.preprocess.max_target_units)
    samples = read_samples(resolve_path(params.sample.out_dir) / f"{variant}.parquet")
    out = sample_checks(samples, e.max_units, mix, one_stage=not params.model.variants[variant].two_stage)
    if model is not None and getattr(model.config, "use_state", False):
        rows = _rows(params, "test", ["id", "source", "target", "unit_entities", *WORLD_COLUMNS], None)
        out["states"] = state_agreement(model, tokenizer, rows, batch_size=e.analysis_batch_size, seed=params.seed,
                                        max_source_length=m.max_source_length, max_target_length=m.max_target_length)
    one = out["stage_one"]
    print(f"world {variant}: parse rate {one['parse_rate']}, violations/unit {one['violation_rate']}, "
          f"state violations/unit at the world's mix {one['state_violation_rate_at_world_mix']}, "
          f"clean stories {one['clean_stories']}" + (f", NMI {out['states']['nmi']}" if "states" in out else ""))
    return out


def _world_rows(params: Params, split: str, limit: int | None) -> list[dict]:
    from eric.evaluate.world_metrics import WORLD_COLUMNS

    return _rows(params, split, ["id", "source", "target", "units", "unit_entities", "mentions", *WORLD_COLUMNS],
                 limit)


def _collator(params: Params, tokenizer):
    from eric.data.collate import StageOneCollator

    return StageOneCollator.for_training(tokenizer, params.model, params.seed)


@stage_task
def world_probes(params: Params, variant: str, model, tokenizer) -> dict:
    """The probes of the focal character's event and condition, with the oracle's ceiling
    for the event (eric/evaluate/world_probes.py, world_lines.py)."""
    from eric.evaluate.world_lines import oracle_event_probe
    from eric.evaluate.world_probes import world_probes as probes

    e, w = params.evaluate.world, params.corpus.world
    train = _world_rows(params, "train", e.probe_train_texts)
    test = _world_rows(params, "test", e.probe_test_texts)
    out = probes(model, tokenizer, _collator(params, tokenizer), train, test, params.model.num_states,
                 seed=params.seed, one_stage=not params.model.variants[variant].two_stage)
    out["oracle_event"] = oracle_event_probe(train, test, w.seed, tuple(w.cast), params.preprocess.max_target_units)
    return out


@stage_task
def world_lines(params: Params, variant: str, tokenizer) -> dict:
    """Chance, identity, oracle and oracle + identity L_CL per candidate set on the loop's
    validation batches, beside the model's own L_CL / chance (variants with states:
    eric/evaluate/world_lines.py)."""
    from eric.evaluate.lm_loss import val_batches
    from eric.evaluate.world_lines import contrastive_ratios, critic_lines

    m, t, w = params.model, params.train, params.corpus.world
    val = _world_rows(params, "val", t.max_val_examples)
    batches = val_batches(tokenizer, val, t.micro_batch_size, m.max_source_length, m.max_target_length)
    lines = critic_lines(_collator(params, tokenizer), val, _world_rows(params, "train", None), batches, w.seed,
                         tuple(w.cast), params.preprocess.max_target_units)
    return {**lines, "model": contrastive_ratios(resolve_path(t.plots_dir), variant)}


@stage_task
def world_curve(params: Params, variant: str) -> dict:
    """The checker over what each training snapshot writes (eric/evaluate/world_curve.py)."""
    from eric.evaluate.world_curve import sample_snapshots, snapshots, world_curve as curve
    from eric.generate.sampler import SamplingOptions
    from eric.train.runtime import device_kind

    t = params.train
    found = snapshots(resolve_path(t.snapshots_dir), variant)
    if not found:  # asked for a curve: its absence is an error, not a silently missing table
        raise EvaluationError(f"evaluate.world.curve_inputs is set but {resolve_path(t.snapshots_dir) / variant} "
                              f"holds no snapshot: train {variant} with train.snapshot_every")
    rows = _world_rows(params, "test", params.evaluate.world.curve_inputs)
    sources = [r["source"] for r in rows]
    options = SamplingOptions.from_params(params, progress=False)
    texts = sample_snapshots(found, sources, options, device_kind(), references=rows)
    return curve(texts, sources, resolve_path(t.plots_dir) / f"{variant}_val.csv",
                 names=not params.model.variants[variant].two_stage, max_units=params.evaluate.max_units)


def world_section(params: Params, variant: str, model, tokenizer, coherence_variants: dict | None) -> dict:
    """Everything `world` holds (docs/entityworld.md): what each part needs is loaded by the caller."""
    e, v = params.evaluate.world, params.model.variants[variant]
    out = world_metrics(params, variant, model, tokenizer)
    if coherence_variants is not None:
        out["coherence"] = coherence_variants
    if model is not None and e.probe_train_texts:
        out["probes"] = world_probes(params, variant, model, tokenizer)
    if model is not None and v.state:  # the reference line of L_CL, which only variants with states have
        out["lines"] = world_lines(params, variant, tokenizer)
    if e.curve_inputs and (curve := world_curve(params, variant)):
        out["curve"] = curve
    return out


@stage_task
def state_space(params: Params, variant: str, model, tokenizer) -> dict:
    from eric.evaluate.state_analysis import explorer_html, training_state_usage, write_usage
    from eric.evaluate.state_transitions import summary, write_transitions

    e, m = params.evaluate, params.model
    rows = _rows(params, "train", ["id", "title", "source", "target", "units", "unit_entities"],
                 e.state_max_train_examples)
    usage = training_state_usage(
        model, tokenizer, rows, batch_size=e.analysis_batch_size, max_source_length=m.max_source_length,
        max_target_length=m.max_target_length, entity_choice=m.entity_choice, seed=params.seed,
        per_state=e.explorer_units_per_state,
    )
    out = analysis_dir(params, variant)
    write_usage(usage, out / "state_usage.csv")
    transitions = usage.transitions.rows()
    write_transitions(transitions, out / "state_transitions.csv")
    (out / "state_explorer.html").write_text(explorer_html(usage, f"Entity states of {variant} ({params.corpus.name})"))
    top = {str(i): t for i, t in enumerate(usage.top(10), 1)}
    print(f"{variant}: {usage.used}/{usage.num_states} states used by {usage.units} training units")
    moves = summary(transitions)
    return {"states_used": usage.used, "num_states": usage.num_states, "state_units": usage.units, "top_states": top,
            "state_transitions": moves["transitions"], "state_transition_pairs": moves["pairs"],
            "self_transition_share": moves["self_share"]}


@stage_task
def code_usage(params: Params, variant: str, model, tokenizer) -> dict:
    """Codes used of K by the posterior over the training split (DiscoDVT), beside ERIC's states used."""
    from eric.evaluate.code_usage import training_code_usage

    e, m = params.evaluate, params.model
    rows = _rows(params, "train", ["id", "source", "target", "unit_entities"], e.state_max_train_examples)
    usage = training_code_usage(model, tokenizer, rows, batch_size=e.analysis_batch_size,
                                max_source_length=m.max_source_length, max_target_length=m.max_target_length)
    print(f"{variant}: {usage['codes_used']}/{usage['num_codes']} codes used by {usage['code_spans']} training spans")
    return usage


@stage_task
def save(params: Params, variant: str, metrics: dict) -> Path:
    path = resolve_path(params.evaluate.metrics_dir) / f"{variant}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(metrics) + "\n")  # json.dumps(indent=2), lists of numbers on one line
    if params.train.mlflow:
        log_to_mlflow(params, variant, metrics, [path, *sorted(analysis_dir(params, variant).glob("*"))])
    return path


def log_to_mlflow(params: Params, variant: str, metrics: dict, artifacts: list[Path]) -> None:
    from eric.tracking import find_run, start_run

    corpus = params.corpus.name
    trained = find_run(corpus, stage="train_stage_one", variant=variant)
    # a run of its own (the training run ends when training does), linked to the training run
    link = {"eric.train_run_id": trained} if trained else {}
    with start_run(corpus, stage="evaluate", variant=variant, params={"evaluate": params.evaluate.model_dump()},
                   tags=link) as tracker:
        tracker.log_metrics({f"eval.{k}": v for k, v in flat_numbers(metrics).items()}, step=0)
        tracker.set_tags({"eric.form": metrics["form"], "evaluate.featurizer": metrics.get("mauve_featurizer", "none"),
                          "evaluate.seed": str(params.evaluate.seed)})
        for artifact in artifacts:
            if artifact.is_file():
                tracker.log_artifact(artifact)


def flat_numbers(tree: dict, prefix: str = "") -> dict[str, float]:
    """Numeric leaves as dotted names (MLflow metrics are flat)."""
    out: dict[str, float] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_numbers(value, f"{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name.replace(" ", "_").replace("(", "").replace(")", "")] = float(value)
    return out


@stage_flow("evaluate")
def run(variant: str, params_path: str = "params.yaml") -> dict:
    params = read_params(params_path, variant)
    shutil.rmtree(analysis_dir(params, variant), ignore_errors=True)  # no stale analyses
    analysis_dir(params, variant).mkdir(parents=True)  # a DVC out even when no analysis applies
    v = params.model.variants[variant]
    metrics = {"variant": variant, "form": v.form, **score_samples(params, variant)}
    config_has_state = v.state
    has_codes = v.kind == "discodvt"  # a codebook of its own
    # the coherence test swaps placeholders: a one-stage model writes none (docs/evaluation.md)
    wants_coherence = params.evaluate.coherence and v.two_stage
    world = params.corpus.kind == "world"
    probes = world and params.evaluate.world.probe_train_texts > 0  # any model, states or not
    wants_lm_loss = v.kind == "eric"  # ERIC, its ablations, BART, Seq2Seq: the collator's batches are theirs
    model = tokenizer = variants = None
    if wants_coherence or config_has_state or has_codes or probes or wants_lm_loss:
        model, tokenizer = load_model(params, variant)
        if wants_lm_loss:
            metrics.update(lm_loss(params, variant, model, tokenizer))
        if wants_coherence:
            metrics["coherence"], variants = coherence(params, variant, model, tokenizer)
        if config_has_state:
            metrics.update(state_space(params, variant, model, tokenizer))
        if has_codes:
            metrics.update(code_usage(params, variant, model, tokenizer))
    if world:  # EntityWorld: the checker, the true states, probes, lines, curve
        metrics["world"] = world_section(params, variant, model, tokenizer, variants)
    save(params, variant, metrics)
    return metrics


if __name__ == "__main__":
    run_stage(run, *USER_ERRORS)  # argv: <variant> [params.yaml]
