"""The learning curve on EntityWorld: what the checker says of the stage-one texts each
training snapshot writes.

Training with `train.snapshot_every` keeps the model at <train.snapshots_dir>/<variant>/step-N
(an output of train_stage_one). Each snapshot writes the first
`evaluate.world.curve_inputs` test stories (stage one, the sampling settings of `sample:`,
seeded); the checker reads them (eric/evaluate/world_checks.py rates), and beside them go the
validation LM loss, the input gap (how much worse it is with another story's scene: 0 = the
model does not read its input) and L_CL / chance the training stage logged at that step
(plots/train/<variant>_val.csv). Returned as columns, one value per snapshot.
"""

from __future__ import annotations

from pathlib import Path

from eric.evaluate.world_checks import columns, rates, story_checks, story_counts
from eric.evaluate.world_lines import cl_ratio, read_plot
from eric.world.metrics import summarize

KEYS = ("parse_rate", "violation_rate", "state_violation_rate", "grounding_rate", "grounded_share",
        "grounded_state_violation_rate", "clean_stories", "valid_stories")


def snapshots(snapshots_dir: Path, variant: str) -> list[tuple[int, Path]]:
    """(step, folder) of every kept snapshot, by step."""
    folder = snapshots_dir / variant
    found = [(int(f.name.split("-")[1]), f) for f in folder.glob("step-*") if f.is_dir()]
    return sorted(found)


def _round(value, digits: int = 5):
    return None if value is None else round(float(value), digits)


def _logged(row: dict, key: str) -> float | None:
    """A validation row's value (a CSV cell; blank where that run did not log it)."""
    value = row.get(key)
    return _round(value) if value not in (None, "") else None


def point(scenes: list[str], texts: list[str], names: bool, max_units: int | None) -> dict:
    """The checker's rates of one snapshot's texts."""
    checks = story_checks(scenes, texts, names, max_units)
    found = {**summarize(checks), **rates(columns([story_counts(c) for c in checks]))}
    return {k: _round(found.get(k)) for k in KEYS}


def world_curve(points: list[tuple[int, list[str]]], scenes: list[str], val_plot: Path, names: bool = False,
                max_units: int | None = None) -> dict[str, list]:
    """Columns over snapshots: step, the checker's rates of its texts, val LM loss and L_CL / chance."""
    val = {int(r["step"]): r for r in read_plot(val_plot)}
    rows = []
    for step, texts in points:
        logged = val.get(step, {})
        rows.append({"step": step, **point(scenes, texts, names, max_units),
                     **{key: _logged(logged, key) for key in ("val_lm_loss", "val_input_gap")},
                     "val_cl_ratio": cl_ratio(logged)})
    return {k: [r[k] for r in rows] for k in (rows[0] if rows else ())}


def sample_snapshots(found: list[tuple[int, Path]], sources: list[str], options, device: str = "cpu",
                     references: list[dict] | None = None) -> list[tuple[int, list[str]]]:
    """(step, stage-one texts) of each snapshot for `sources` (the sampler's SamplingOptions;
    `references`: their stage-one rows, for `sample.states: reference`)."""
    from eric.generate.loading import load_stage_one
    from eric.generate.sampler import sample_stage_one

    out = []
    for step, folder in found:
        model, tokenizer = load_stage_one(folder, device)
        out.append((step, [s.text for s in sample_stage_one(model, tokenizer, sources, options, references)]))
    return out
