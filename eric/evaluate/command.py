"""What `eric evaluate` does, kept out of cli.py: read the files, score, show, save."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from eric.config import EvaluateParams, params_here_or_defaults
from eric.data.outdir import check_out_file, replace_text
from eric.evaluate.io import read_generations
from eric.evaluate.scoring import METRIC_NAMES, evaluate_with, format_value, mauve_note


def load_settings(params: Path, overrides: dict) -> EvaluateParams:
    """The evaluate section of params.yaml (defaults when there is none), overridden; relative
    paths resolve beside the params file."""
    return params_here_or_defaults(params, "evaluate", overrides).evaluate


def evaluate_file(
    generations: Path,
    references: Path | None = None,
    inputs: Path | None = None,
    fmt: str = "auto",
    text_field: str | None = None,
    input_field: str | None = None,
    reference_field: str | None = None,
    settings: EvaluateParams = EvaluateParams(),
) -> dict:
    """Scores of one file of generations; references and inputs come from their own
    files when given, else from the generations file's own columns (if any)."""
    found = read_generations(generations, fmt, text_field, input_field, reference_field)
    ref_file = read_generations(references) if references else None
    refs = ref_file.texts if ref_file else found.references
    if inputs:
        input_texts = read_generations(inputs, "lines").texts
    else:
        input_texts = found.inputs or (ref_file.inputs if ref_file else None)
    result = evaluate_with(settings, found.texts, refs, input_texts)
    result.update(
        {
            "generations": str(generations),
            "format": found.format,
            "skipped_lines": found.skipped + (ref_file.skipped if ref_file else 0),
            "references": str(references) if references else ("(own column)" if refs else None),
        }
    )
    return result


def metrics_table(result: dict, title: str = "Evaluation") -> Table:
    """The metrics as the paper's Table 2 shows them (percentages, Len whole)."""
    table = Table(title=title)
    table.add_column("Metric")
    table.add_column("Value", justify="right")
    for name in METRIC_NAMES:
        if name in result:
            table.add_row(name, format_value(name, result[name]))
    return table


def provenance_line(result: dict) -> str:
    """What produced the numbers, in one line under the table."""
    notes = [f"{result['n_texts']} texts", f"at most {result['max_units']} units", result["tokenizer"]]
    if "mauve_featurizer" in result:
        notes.append(f"MAUVE: {mauve_note(result, spread=True)}")
    elif not result.get("n_references"):
        notes.append("no references: B, MSJ and MAUVE not computed")
    if result.get("skipped_lines"):
        notes.append(f"{result['skipped_lines']} lines skipped")
    return "; ".join(notes)


WRITTEN_BY = "eric evaluate"  # the metrics file's mark: a later `eric evaluate --out` may replace it


def is_metrics_file(path: Path) -> bool:
    """True for a JSON file an earlier `eric evaluate --out` wrote (it carries the mark)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("written_by") == WRITTEN_BY


def check_metrics_out(out: Path, inputs: dict[str, Path | None], overwrite: bool) -> Path:
    """Where `eric evaluate --out` may write (eric/data/outdir.py check_out_file): checked
    before scoring, so a refused path costs nothing."""
    return check_out_file(out, inputs, is_metrics_file, overwrite, WRITTEN_BY)


def write_json(result: dict, path: Path) -> None:
    """The metrics as JSON with the mark, replaced whole or not at all."""
    replace_text(path, json.dumps({"written_by": WRITTEN_BY, **result}, indent=2) + "\n")
