"""Readers for files of generations (and of references or inputs).

Formats:
  released  the authors' release: one text per line, units separated by <mask>; as the
            authors' scorer reads it, only the part after a line's last `|||` is the text
  lines     plain text, one text per line
  jsonl     one JSON object per line; text/input/reference fields by name
  parquet   one row per text; text/input/reference columns by name (the sample stage
            writes input, final_text, reference; a stage_one split gives its
            de-anonymized target as text, so the test split can serve as references)
A bad line (blank, not JSON, no text field) is skipped and counted, never fatal; a
file that cannot be used at all raises EvaluationError with one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from eric.data.anonymize import deanonymize
from eric.evaluate.errors import EvaluationError

FORMATS = ("auto", "released", "lines", "jsonl", "parquet")
TEXT_FIELDS = ("final_text", "text", "generation", "target")
INPUT_FIELDS = ("input", "source")
REFERENCE_FIELDS = ("reference",)


@dataclass
class GenerationFile:
    texts: list[str]
    inputs: list[str] | None
    references: list[str] | None
    skipped: int  # bad lines or rows left out
    format: str


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    with path.open(encoding="utf-8", errors="replace") as handle:
        head = [line for _, line in zip(range(50), handle)]
    return "released" if any("<mask>" in line for line in head) else "lines"


def read_generations(
    path: str | Path,
    fmt: str = "auto",
    text_field: str | None = None,
    input_field: str | None = None,
    reference_field: str | None = None,
) -> GenerationFile:
    """Read texts (and inputs/references when the file carries them)."""
    path = Path(path)
    if not path.is_file():
        raise EvaluationError(f"{path}: file not found")
    if fmt not in FORMATS:
        raise EvaluationError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "parquet":
        found = _read_parquet(path, text_field, input_field, reference_field)
    elif fmt == "jsonl":
        found = _read_jsonl(path, text_field, input_field, reference_field)
    else:
        found = _read_lines(path, require_marker=fmt == "released")
    if not found.texts:
        raise EvaluationError(f"{path}: no usable text ({found.skipped} lines skipped)")
    found.format = fmt
    return found


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EvaluationError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def released_text(line: str) -> str:
    """The text the authors' scorer (src/eval/eval.py) takes from a line of a generation
    file: `line.strip().split("|||")[-1]`, so a prefix such as an input before `|||` is
    not scored."""
    return line.strip().split("|||")[-1]


def _read_lines(path: Path, require_marker: bool) -> GenerationFile:
    texts, skipped = [], 0
    for line in _read_text(path).splitlines():
        text = released_text(line) if require_marker else line
        if not text.strip() or (require_marker and "<mask>" not in text):
            skipped += 1
            continue
        texts.append(text)
    return GenerationFile(texts, None, None, skipped, "")


def _pick(available, explicit: str | None, candidates: tuple[str, ...], what: str, where: Path):
    """The field to read: the one asked for (must exist) or the first known name."""
    if explicit is not None:
        if explicit not in available:
            raise EvaluationError(
                f"{where}: no {what} field {explicit!r} (has: {', '.join(sorted(available))})"
            )
        return explicit
    return next((name for name in candidates if name in available), None)


def _read_jsonl(path: Path, text_field, input_field, reference_field) -> GenerationFile:
    rows, skipped = [], 0
    for line in _read_text(path).splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            skipped += 1
    keys = set().union(*(r.keys() for r in rows)) if rows else set()
    text_key = _pick(keys, text_field, TEXT_FIELDS, "text", path)
    if rows and text_key is None:
        raise EvaluationError(f"{path}: no text field (tried {', '.join(TEXT_FIELDS)}; use --text-field)")
    input_key = _pick(keys, input_field, INPUT_FIELDS, "input", path)
    reference_key = _pick(keys, reference_field, REFERENCE_FIELDS, "reference", path)
    kept = [r for r in rows if isinstance(r.get(text_key), str) and r[text_key].strip()]
    return GenerationFile(
        texts=[r[text_key] for r in kept],
        inputs=[str(r.get(input_key) or "") for r in kept] if input_key else None,
        references=[str(r.get(reference_key) or "") for r in kept] if reference_key else None,
        skipped=skipped + len(rows) - len(kept),
        format="",
    )


def _read_parquet(path: Path, text_field, input_field, reference_field) -> GenerationFile:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise EvaluationError(f"{path}: not a readable Parquet file ({exc.__class__.__name__})") from None
    columns = set(table.column_names)
    text_key = _pick(columns, text_field, TEXT_FIELDS, "text", path)
    if text_key is None:
        raise EvaluationError(f"{path}: no text column (tried {', '.join(TEXT_FIELDS)}; use --text-field)")
    input_key = _pick(columns, input_field, INPUT_FIELDS, "input", path)
    reference_key = _pick(columns, reference_field, REFERENCE_FIELDS, "reference", path)
    rows = table.to_pylist()
    if text_key == "target" and "mentions" in columns:  # a stage_one split: restore names
        for row in rows:
            row["target"] = deanonymize(row["target"] or "", row["mentions"] or [])
    kept = [r for r in rows if isinstance(r.get(text_key), str) and r[text_key].strip()]
    return GenerationFile(
        texts=[r[text_key] for r in kept],
        inputs=[str(r.get(input_key) or "") for r in kept] if input_key else None,
        references=[str(r.get(reference_key) or "") for r in kept] if reference_key else None,
        skipped=len(rows) - len(kept),
        format="",
    )
