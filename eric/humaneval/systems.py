"""A system's texts for a study: a variant's samples or any file of generations.

A system is named by a variant (its `<sample.out_dir>/<variant>.parquet`) or by a path:
  .parquet  the sample stage's schema (id, input, final_text), or any table with a text
            column; rows without an id take their row number
  .jsonl    objects with a text field and optional id/input
  .txt      the authors' released format (the text after the last `|||`, units split by
            `<mask>`) or plain lines; a line's id is its line number from 0, as
            `eric sample` numbers the lines of a plain input file, so a released file
            pairs with samples made from the same inputs in the same order
Texts are shown to annotators without special tokens: units joined by spaces.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from eric.evaluate.io import TEXT_FIELDS, detect_format, released_text
from eric.evaluate.text import split_units
from eric.humaneval.errors import HumanEvalError


@dataclass
class System:
    name: str  # what the table calls it (variant or file stem)
    source: str  # the file read
    sha256: str
    texts: dict[str, str]  # id -> display text
    inputs: dict[str, str]  # id -> input (empty when the file has none)


def display_text(text: str) -> str:
    """What an annotator reads: units without markers or special tokens, one paragraph."""
    return " ".join(split_units(text))


def resolve(spec: str, samples_dir: Path) -> Path:
    """A path as given, else the variant's samples file."""
    path = Path(spec).expanduser()
    if path.suffix and path.is_file():
        return path
    variant_file = samples_dir / f"{spec}.parquet"
    if variant_file.is_file():
        return variant_file
    if path.suffix:
        raise HumanEvalError(f"{spec}: file not found")
    raise HumanEvalError(f"{spec}: no samples at {variant_file} (run `dvc repro sample@{spec}` or give a file)")


def read_system(spec: str, samples_dir: Path) -> System:
    path = resolve(spec, samples_dir)
    fmt = detect_format(path)
    if fmt == "parquet":
        rows = _parquet_rows(path)
    elif fmt == "jsonl":
        rows = _jsonl_rows(path)
    else:
        rows = _line_rows(path, released=fmt == "released")
    texts = {i: display_text(t) for i, t, _ in rows if t and display_text(t)}
    if not texts:
        raise HumanEvalError(f"{path}: no usable texts")
    inputs = {i: " ".join(inp.split()) for i, _, inp in rows if inp and i in texts}
    name = spec if not Path(spec).suffix else path.stem
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return System(name, str(path), digest, texts, inputs)


def _parquet_rows(path: Path) -> list[tuple[str, str, str]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise HumanEvalError(f"{path}: not a readable Parquet file ({exc.__class__.__name__})") from None
    text_key = next((c for c in TEXT_FIELDS if c in table.column_names), None)
    if text_key is None:
        raise HumanEvalError(f"{path}: no text column (tried {', '.join(TEXT_FIELDS)})")
    return [(str(r.get("id") if r.get("id") is not None else n), r.get(text_key) or "", r.get("input") or "")
            for n, r in enumerate(table.to_pylist())]


def _jsonl_rows(path: Path) -> list[tuple[str, str, str]]:
    rows = []
    for n, line in enumerate(_lines(path)):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            text = next((row[k] for k in TEXT_FIELDS if isinstance(row.get(k), str)), "")
            rows.append((str(row.get("id", n)), text, str(row.get("input") or "")))
    return rows


def _line_rows(path: Path, released: bool) -> list[tuple[str, str, str]]:
    return [(str(n), released_text(line) if released else line, "") for n, line in enumerate(_lines(path))]


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise HumanEvalError(f"{path}: not UTF-8 text (byte {exc.start})") from None
