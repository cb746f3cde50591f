"""What to sample from: a stage-one split (with references) or a plain list of inputs.

    rows = read_inputs("data/processed/stage_one/test.parquet", limit=1000)
    rows = read_inputs("my_inputs.txt")   # one input (the first unit) per line

A stage-one split gives each row's id, its input (`source`) and its reference: the
gold target with the names put back (`deanonymize`), scored as the human side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eric.generate.errors import SampleError


@dataclass(frozen=True)
class StoryInput:
    id: str
    input: str
    reference: str | None = None
    row: dict | None = field(default=None, compare=False, repr=False)  # the stage-one row (reference units)


def read_inputs(path: str | Path, limit: int | None = None) -> list[StoryInput]:
    path = Path(path)
    if not path.is_file():
        raise SampleError(f"{path}: no such input file (a stage_one split .parquet, or one input per line)")
    rows = _read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else _read_lines(path)
    rows = rows[:limit] if limit else rows
    if not rows:
        raise SampleError(f"{path}: no inputs in it")
    return rows


def _read_parquet(path: Path) -> list[StoryInput]:
    import pyarrow.parquet as pq

    from eric.data.anonymize import deanonymize

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise SampleError(f"{path}: not a readable Parquet file ({exc.__class__.__name__})") from None
    if "source" not in table.column_names:
        raise SampleError(f"{path}: no `source` column (expected a stage_one split)")
    has_reference = {"target", "mentions"} <= set(table.column_names)
    rows = []
    for i, row in enumerate(table.to_pylist()):
        reference = deanonymize(row["target"] or "", row["mentions"] or []) if has_reference else None
        rows.append(StoryInput(str(row.get("id") or i), row["source"] or "", reference, row if has_reference else None))
    return rows


def _read_lines(path: Path) -> list[StoryInput]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise SampleError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return [StoryInput(str(i), line.strip()) for i, line in enumerate(lines) if line.strip()]
