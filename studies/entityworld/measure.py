"""What run.py measures of one trained run (arm x seed), and the study's MLflow record.

curve: every snapshot of the run (train.snapshot_every) writes the first `curve_inputs`
test stories (stage one, the sampling settings of params.yaml, seeded); the checker reads
them: parse rate, violations, state and grounding violations per parsed unit, clean and
valid stories; beside them the stage's validation LM loss and L_CL / chance at that step.

final: the trained model on the first `test_inputs` test stories, each part in its own file
(kept, skipped when present):
- stories.csv: the checker per story (units, parsed, violations, state, grounding, clean,
  valid), for intervals over stories and tests paired by story; samples.jsonl.gz: the texts;
- cases.csv + coherence.json: every coherence case (checker-decided swaps,
  eric/evaluate/world_metrics.py), right or wrong under each scoring (lm, joint, event) and
  state mode, and the accuracies;
- probes.json: the predicted state of the planned (focal) entity (`predicted`), the unit's
  own gold state (`gold`), and the decoder's hidden state at the unit's sentence token,
  quantized into K clusters (`hidden`) or read by a logistic regression (`linear`), and the
  hidden state where the decoder has read the focal entity's placeholder, read the same way
  (`entity`), each predicting the unit's event type and the entity's condition before and
  after it;
- states.json: NMI and purity of the gold states;
- finals.csv + final_samples.jsonl.gz: the final texts (the study's mention writer fills
  the stage-one texts' placeholders, eric/generate's merge) read by the checker with names,
  and per story how many units with placeholders got names that map back to the cast
  (`mapped`) and to the same characters (`faithful`);
- final.json: all of them with the checker summary and L_CL / chance (train and
  validation, the stage's last rows).

writer_curve: the mention writer itself, on the test inputs' reference stage-one texts
(gold placeholders), at every snapshot of its training: how many named units map back.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import threading
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

# transformers builds a model under a process-wide device context (meta tensors): two
# threads loading at once corrupt each other's model, so run.py's threads load one at a time
_LOADING = threading.Lock()

CHECK_FIELDS = ["id", "units", "parsed", "violations", "state_violations", "grounding", "clean", "valid"]
NAME_FIELDS = ["named", "mapped", "faithful"]  # units with placeholders; their names map to the cast / to the same ones
# What the probes predict of a unit's focal character: the event type of the unit (drawn at
# random by the generator, so the prefix bounds what can be known), its condition when the
# unit begins (fixed by the prefix: a model that tracks states can know it), and after it.
LABELS = ("event", "condition_before", "condition")


def _setup(params_path: Path):
    from eric.config import load_params, resolve_path

    params = load_params(params_path)
    return params, resolve_path(params.preprocess.out_dir) / "stage_one"


def _rows(path: Path, limit: int | None = None) -> list[dict]:
    from eric.train.job import read_rows
    from eric.world.corpus import WORLD_COLUMNS

    columns = ["id", "source", "target", "units", "unit_entities", *(name for name, _ in WORLD_COLUMNS)]
    return read_rows(path, columns, limit)


def _write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def story_checks(scenes: list[str], texts: list[str], ids: list[str], max_units: int,
                 names: bool = False) -> list[dict]:
    """The checker per story: counts of units, parsed units and violations by kind (`names`:
    final texts, whose cast names are mapped back to placeholders first)."""
    from eric.world.checker import check_story
    from eric.world.metrics import text_units
    from eric.world.world import STATE_RULES

    out = []
    for sid, scene, text in zip(ids, scenes, texts):
        check = check_story(scene, text_units(text or "", max_units), names)
        state = sum(n for rule, n in check.by_rule.items() if rule in STATE_RULES)
        out.append({"id": sid, "units": len(check.units), "parsed": check.parsed, "violations": check.violations,
                    "state_violations": state, "grounding": check.violations - state,
                    "clean": int(check.parsed > 0 and check.violations == 0),
                    "valid": int(len(check.units) > 0 and check.unparsed == 0 and check.violations == 0)})
    return out


def summarize_checks(checks: list[dict]) -> dict:
    total = {k: sum(c[k] for c in checks) for k in (*CHECK_FIELDS[1:], *NAME_FIELDS) if k in checks[0]}
    parsed = total["parsed"] or None
    named = {f"{k}_rate": total[k] / max(total["named"], 1) for k in NAME_FIELDS[1:] if k in total}
    return {**named, "parse_rate": total["parsed"] / total["units"] if total["units"] else None,
            "violation_rate": parsed and total["violations"] / parsed,
            "state_violation_rate": parsed and total["state_violations"] / parsed,
            "grounding_rate": parsed and total["grounding"] / parsed,
            "clean_stories": total["clean"] / len(checks), "valid_stories": total["valid"] / len(checks)}


def load(model_dir: Path):
    """The run's stage-one model, on the GPU when there is one (as the pipeline's stages)."""
    from eric.generate.loading import load_stage_one
    from eric.train.runtime import device_kind

    with _LOADING:
        return load_stage_one(model_dir, device_kind())


def write_stage_one(model_dir: Path, params, rows: list[dict]) -> list[str]:
    from eric.generate.sampler import SamplingOptions, sample_stage_one

    model, tokenizer = load(model_dir)
    options = SamplingOptions.from_params(params, progress=False)
    return [s.text for s in sample_stage_one(model, tokenizer, [r["source"] for r in rows], options)]


# -- final texts: the mention writer fills the placeholders ---------------------------------
@lru_cache(maxsize=1)
def _name_word():
    """Any word of the world's name vocabulary (a name a final text kept that is not the cast's)."""
    from eric.world.names import FIRST_NAMES, SURNAMES

    return re.compile(r"\b(" + "|".join(sorted({*FIRST_NAMES, *SURNAMES})) + r")\b")


def name_counts(scene: str, stage_one: str, final: str, max_units: int) -> dict:
    """Units of the stage-one text with a placeholder (`named`); of them, those whose final
    unit's names all map back to the scene's cast (as many placeholders, no other name left:
    `mapped`) and to the very characters of the stage-one unit (`faithful`)."""
    from eric.generate.merge import PLACEHOLDER
    from eric.world.metrics import text_units
    from eric.world.phrasings import names_to_placeholders, parse_scene

    cast = [c.name for c in parse_scene(scene).characters]
    counts = dict.fromkeys(NAME_FIELDS, 0)
    for before, after in zip(text_units(stage_one, max_units), text_units(final, max_units)):
        wanted = PLACEHOLDER.findall(before)
        if not wanted:
            continue
        back = names_to_placeholders(after, cast)
        counts["named"] += 1
        counts["mapped"] += len(PLACEHOLDER.findall(back)) == len(wanted) and not _name_word().search(back)
        counts["faithful"] += back == before
    return counts


def load_writer(writer_dir: Path):
    from eric.generate.loading import load_mentions
    from eric.train.runtime import device_kind

    with _LOADING:
        return load_mentions(writer_dir, device_kind())


def write_finals(writer_dir: Path, params, scenes: list[str], texts: list[str]) -> list[tuple[str, str]]:
    """(mentions text, final text) per stage-one text: the writer's names merged in, with the
    pipeline's fallbacks (eric/generate/merge.py) where it wrote too few."""
    from eric.generate.command import training_names
    from eric.generate.merge import NamePool, merge_mentions, parse_mentions
    from eric.generate.sampler import SamplingOptions, generate_mentions

    model, tokenizer = load_writer(writer_dir)
    options = SamplingOptions.from_params(params, progress=False)
    mentions = generate_mentions(model, tokenizer, scenes, texts, options)
    pool = NamePool(training_names(None, params), seed=options.seed)
    return [(m, merge_mentions(t, parse_mentions(m), pool).text) for t, m in zip(texts, mentions)]


def final_checks(writer_dir: Path, params, rows: list[dict], texts: list[str], samples: Path) -> list[dict]:
    """The checker (with names) and the name counts per story of the final texts; the texts into `samples`."""
    scenes, ids, max_units = [r["source"] for r in rows], [r["id"] for r in rows], params.evaluate.max_units
    finals = write_finals(writer_dir, params, scenes, texts)
    with gzip.open(samples, "wt") as handle:
        for sid, (mentions, text) in zip(ids, finals):
            handle.write(json.dumps({"id": sid, "mentions": mentions, "final_text": text}) + "\n")
    checks = story_checks(scenes, [t for _, t in finals], ids, max_units, names=True)
    return [{**c, **name_counts(scene, before, after, max_units)}
            for c, scene, before, (_, after) in zip(checks, scenes, texts, finals)]


def writer_curve(params_path: Path, ev: dict, out: Path) -> None:
    """The mention writer at each snapshot (and its final model) on the reference stage-one
    texts of the test inputs: curve.csv, and gold.json for the final model."""
    from eric.config import resolve_path

    params, data = _setup(params_path)
    rows = _rows(data / "test.parquet", ev["test_inputs"])
    texts = [r["target"] for r in rows]
    snapshots = resolve_path(params.train.checkpoint_dir) / "snapshots" / "train_mentions" / "mentions"
    found = []
    for folder in sorted(snapshots.glob("step-*"), key=lambda f: int(f.name.split("-")[1])):
        summary = summarize_checks(final_checks(folder, params, rows, texts, out / "snapshot_samples.jsonl.gz"))
        found.append({"step": int(folder.name.split("-")[1]), **{k: _round(v) for k, v in summary.items()}})
    (out / "snapshot_samples.jsonl.gz").unlink(missing_ok=True)
    if not found:
        raise RuntimeError(f"no snapshots in {snapshots}: train with train.snapshot_every")
    _write_csv(out / "curve.csv", found)
    checks = final_checks(resolve_path(params.mentions.out_dir), params, rows, texts, out / "gold_samples.jsonl.gz")
    _write_csv(out / "gold.csv", checks)


def _val_at(params_path: Path, variant: str) -> dict[int, dict]:
    run = params_path.parent
    with (run / "plots" / f"{variant}_val.csv").open() as handle:
        return {int(r["step"]): r for r in csv.DictReader(handle)}


def _cl_ratio(row: dict, prefix: str = "val_") -> float | None:
    loss, chance = row.get(f"{prefix}contrastive_loss"), row.get(f"{prefix}contrastive_chance")
    return float(loss) / float(chance) if loss not in (None, "") and chance not in (None, "") else None


def curve(params_path: Path, ev: dict, out_csv: Path) -> None:
    from eric.config import resolve_path

    params, data = _setup(params_path)
    variant = params.variants[0]
    rows = _rows(data / "test.parquet", ev["curve_inputs"])
    snapshots = resolve_path(params.train.checkpoint_dir) / "snapshots" / "train_stage_one" / variant
    val = _val_at(params_path, variant)
    found = []
    for folder in sorted(snapshots.glob("step-*")):
        step = int(folder.name.split("-")[1])
        texts = write_stage_one(folder, params, rows)
        checks = story_checks([r["source"] for r in rows], texts, [r["id"] for r in rows], params.evaluate.max_units)
        v = val.get(step, {})
        found.append({"step": step, **{k: _round(x) for k, x in summarize_checks(checks).items()},
                      "val_lm_loss": _round(_float(v.get("val_lm_loss"))), "val_cl_ratio": _round(_cl_ratio(v))})
    if not found:
        raise RuntimeError(f"no snapshots in {snapshots}: train with train.snapshot_every")
    _write_csv(out_csv, found)


def final(params_path: Path, ev: dict, out: Path, writer_dir: Path | None = None) -> None:
    """Each part is kept in its own file and skipped when it exists (delete probes.json to
    re-probe a run); final.json gathers them. Final texts need the study's mention writer."""
    from eric.config import resolve_path

    params, data = _setup(params_path)
    variant = params.variants[0]
    model_dir = resolve_path(params.train.out_dir) / variant
    rows = _rows(data / "test.parquet", ev["test_inputs"])
    if not (out / "stories.csv").is_file():
        texts = write_stage_one(model_dir, params, rows)
        with gzip.open(out / "samples.jsonl.gz", "wt") as handle:
            for row, text in zip(rows, texts):
                handle.write(json.dumps({"id": row["id"], "input": row["source"], "stage_one": text}) + "\n")
        _write_csv(out / "stories.csv", story_checks([r["source"] for r in rows], texts, [r["id"] for r in rows],
                                                     params.evaluate.max_units))
    if writer_dir is not None and not (out / "finals.csv").is_file():
        with gzip.open(out / "samples.jsonl.gz", "rt") as handle:
            texts = [json.loads(line)["stage_one"] for line in handle]
        _write_csv(out / "finals.csv", final_checks(writer_dir, params, rows, texts, out / "final_samples.jsonl.gz"))
    model = lru_cache(maxsize=1)(lambda: load(model_dir))  # loaded once, and only if a part is missing
    parts = {"coherence": lambda: coherence_cases(*model(), rows, params, out / "cases.csv"),
             "probes": lambda: probes(*model(), params, data, ev["probe_train_texts"], rows),
             "states": lambda: states(*model(), rows, params)}
    result = {"checks": summarize_checks(read_checks(out / "stories.csv")),
              "contrastive": contrastive_ratios(params_path, variant)}
    if (out / "finals.csv").is_file():
        result["final_texts"] = summarize_checks(read_checks(out / "finals.csv"))
    for name, compute in parts.items():
        path = out / f"{name}.json"
        if not path.is_file():
            path.write_text(json.dumps(compute(), indent=1) + "\n")
        result[name] = json.loads(path.read_text())
    (out / "final.json").write_text(json.dumps(result, indent=1) + "\n")


def read_checks(path: Path) -> list[dict]:
    """A stories.csv / finals.csv back as story_checks wrote it (counts as ints)."""
    with path.open() as handle:
        return [{k: v if k == "id" else int(v) for k, v in r.items()} for r in csv.DictReader(handle)]


def states(model, tokenizer, rows: list[dict], params) -> dict | None:
    """NMI and purity of the gold states (variants with states)."""
    if not getattr(model.config, "use_state", False):
        return None
    from eric.evaluate.world_metrics import state_agreement

    m = params.model
    return state_agreement(model, tokenizer, rows, max_source_length=m.max_source_length,
                           max_target_length=m.max_target_length, progress=False)


def coherence_cases(model, tokenizer, rows: list[dict], params, cases_csv: Path) -> dict:
    """Every checker-decided coherence case under each scoring and state mode (into
    `cases_csv`); returns the accuracies."""
    from eric.evaluate.coherence import SCORINGS, mode_label, state_modes
    from eric.evaluate.world_metrics import WorldCoherenceScorer

    m = params.model
    cases, accuracy = [], {}
    for scoring in SCORINGS:
        scorer = WorldCoherenceScorer(model, tokenizer, rows, scoring=scoring, seed=params.seed, progress=False,
                                      max_source_length=m.max_source_length, max_target_length=m.max_target_length)
        for mode in state_modes(model.config):
            result = scorer.run(rows, mode, mode_label("model", mode))
            accuracy[f"{scoring}/{mode}"] = _round(result.accuracy)
            cases += [{"scoring": scoring, "mode": mode, "text": t, "unit": u, "right": int(r)}
                      for t, u, r in result.outcomes]
    _write_csv(cases_csv, cases)
    return accuracy


def contrastive_ratios(params_path: Path, variant: str) -> dict:
    run = params_path.parent
    out = {}
    for split, name, prefix in (("train", f"{variant}.csv", ""), ("val", f"{variant}_val.csv", "val_")):
        with (run / "plots" / name).open() as handle:
            last = list(csv.DictReader(handle))[-1]
        out[split] = _round(_cl_ratio(last, prefix))
    return out


def probes(model, tokenizer, params, data: Path, train_texts: int, test_rows: list[dict]) -> dict:
    """Predicted-state and hidden-state probes of the focal entity's event type and condition."""
    from eric.data.collate import StageOneCollator
    from eric.evaluate.state_probe import (
        hidden_unit_pairs,
        linear_probe,
        majority_probe,
        quantize_hidden,
        unit_state_pairs,
    )
    from eric.evaluate.world_metrics import focal_rows, true_labels

    m = params.model
    collator = StageOneCollator(tokenizer, m.max_source_length, m.max_target_length, max_entities=m.max_entities,
                                entity_choice=m.entity_choice, hard_negatives=m.hard_negatives, seed=params.seed)
    train_rows = focal_rows(_rows(data / "train.parquet", train_texts))
    test_rows = focal_rows(test_rows)

    def label(row: dict, n: int) -> str | None:  # every label at once, split per probe below
        if n >= len(row["world_events"]):
            return None
        found = true_labels(row, n)
        k = int(found["entity"][2:-1])
        found["condition_before"] = row["world_states"][n - 1][k]["condition"] if n else "well"  # a scene starts well
        return "|".join(found[name] for name in LABELS)

    vectors = hidden_unit_pairs(model, collator, train_rows, label), hidden_unit_pairs(model, collator, test_rows, label)
    focal = lambda row, n: tokenizer.convert_tokens_to_ids(row["world_focal"][n])  # noqa: E731
    at_entity = tuple(hidden_unit_pairs(model, collator, rows, label, entity=focal) for rows in (train_rows, test_rows))
    hidden = quantize_hidden(*vectors, m.num_states, seed=params.seed)
    probed = {"hidden": ("predicted", hidden)}
    if getattr(model.config, "use_state", False):
        states = unit_state_pairs(model, collator, train_rows, label), unit_state_pairs(model, collator, test_rows, label)
        probed.update({"predicted": ("predicted", states), "gold": ("gold", states)})
    out: dict = {}
    for i, name in enumerate(LABELS):
        relabel = lambda pairs, i=i: [replace(u, label=u.label.split("|")[i]) for u in pairs]  # noqa: E731
        for what, (which, (train, test)) in probed.items():
            out[f"{what}/{name}"] = majority_probe(relabel(train), relabel(test), which=which).to_dict()
        for what, ((train_pairs, train_x), (test_pairs, test_x)) in (("linear", vectors), ("entity", at_entity)):
            out[f"{what}/{name}"] = linear_probe((relabel(train_pairs), train_x), (relabel(test_pairs), test_x)).to_dict()
    return out


def oracle_event_probe(params_path: Path, ev: dict) -> dict:
    """The ceiling of the event-type probe: before each test unit the generator's exact
    distribution (eric/world/oracle.py) gives P(event kind | the focal character acts); its
    most likely kind is the best guess any model can make from the prefix. Beside it the
    training split's majority kind, as the probes' baseline."""
    from collections import Counter

    from eric.world.oracle import event_tables

    params, data = _setup(params_path)
    world = params.corpus.world
    rows = _rows(data / "test.parquet", ev["test_inputs"])
    train = Counter(e for r in _rows(data / "train.parquet", ev["probe_train_texts"]) for e in r["world_events"])
    majority = train.most_common(1)[0][0]
    tables = event_tables(world.seed, {r["id"] for r in rows}, tuple(world.cast), params.preprocess.max_target_units)
    right = base = units = 0
    for row in rows:
        for n, (kind, focal) in enumerate(zip(row["world_events"], row["world_focal"])):
            acts = {k: p for (k, role), p in tables[row["id"]][n][int(focal[2:-1])].items() if role == "a"}
            right += max(acts, key=acts.get) == kind
            base += majority == kind
            units += 1
    return {"accuracy": round(right / units, 4), "majority": round(base / units, 4), "units": units}


def _float(value) -> float | None:
    return None if value in (None, "") else float(value)


def _round(value, digits: int = 5):
    return None if value is None else round(float(value), digits)


def log_study(plan: dict, outputs: Path) -> None:
    """The study as one MLflow parent run with a nested run per arm and seed (final numbers
    and the learning curve as step metrics)."""
    import mlflow

    from eric.tracking import experiment_id, tracking_uri

    mlflow.set_tracking_uri(tracking_uri())
    client = mlflow.MlflowClient()
    experiment = experiment_id(client, "study-entityworld")
    with mlflow.start_run(experiment_id=experiment, run_name="entityworld", tags={"study": "entityworld"}):
        mlflow.log_params({k: v for k, v in plan["set"].items()})
        for folder in sorted(outputs.glob("*/seed-*")):
            if not (folder / "final.json").is_file():
                continue
            arm, seed = folder.parent.name, folder.name.split("-")[1]
            with mlflow.start_run(experiment_id=experiment, run_name=f"{arm} seed {seed}", nested=True,
                                  tags={"study": "entityworld", "arm": arm, "seed": seed}):
                final_json = json.loads((folder / "final.json").read_text())
                mlflow.log_metrics({k: v for k, v in _flat(final_json).items() if isinstance(v, (int, float))})
                with (folder / "curve.csv").open() as handle:
                    for row in csv.DictReader(handle):
                        mlflow.log_metrics({f"curve_{k}": float(v) for k, v in row.items() if k != "step" and v},
                                           step=int(row["step"]))


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}".replace("/", "_")
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}_"))
        elif value is not None:
            out[name] = value
    return out
