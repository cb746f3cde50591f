"""HINT's sentence-similarity targets, computed once per corpus (DVC stage `hint_targets`).

    write_targets(Path("data/processed"), Path("data/targets/hint/hint"), MiniLMFeaturizer())
    rows = join(rows, Path("data/targets/hint/hint/train.parquet"))

For every stage-one row of train and val: t_ij = cosine of the teacher's embeddings of
target units i and j (the `units` column), all N x N of them, row-major, float32, keyed by
the row's `id`. The teacher stands in for HINT's SentenceBERT: all-MiniLM-L6-v2 (offline,
eric/evaluate/mauve_score.py), or any featurizer (texts -> [n, d] array) passed in. The
teacher reads what the model is trained to write: for a one-stage variant (HINT's own
setting) the units with their recorded mentions put back (`real_units`); for a two-stage one
the placeholder units, `<ek>` read as "Entity k", so units about one entity share a name.

A variant that is not `kind: hint` gets only a marker file (MARKER): the stage is then
near-instant, and its output does not change when a hint variant is added elsewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from eric.data.anonymize import deanonymize
from eric.data.outdir import Staging

SPLITS = ("train", "val")
MARKER = "NONE"
SCHEMA = pa.schema([("id", pa.string()), ("hint_units", pa.int32()), ("hint_similarity", pa.list_(pa.float32()))])
PLACEHOLDER = re.compile(r"<e(\d+)>")
UNIT_BREAK = "\n"  # units are single lines (eric/data/clean.py), so a newline separates them


class TargetsError(RuntimeError):
    """Bad input for the targets stage (a missing split, a foreign out folder); one line."""


def teacher_text(unit: str) -> str:
    return " ".join(PLACEHOLDER.sub(lambda m: f"Entity {m.group(1)}", unit).split())


def real_units(units: list[str], mentions: list[dict]) -> list[str]:
    """The units with the story's mentions put back, in text order across units (as the one-stage
    target is restored: eric/data/one_stage.py)."""
    restored = deanonymize(UNIT_BREAK.join(units), mentions).split(UNIT_BREAK)
    if len(restored) != len(units):  # a mention holding the separator would shift every unit after it
        raise ValueError(f"restoring names changed the number of units ({len(units)} -> {len(restored)})")
    return restored


def cosine_matrix(features: np.ndarray) -> np.ndarray:
    """[n, n] cosines of the rows of `features` (a zero row has cosine 0 with everything)."""
    features = np.asarray(features, dtype=np.float64)
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    unit = features / np.where(norms > 0, norms, 1.0)
    return unit @ unit.T


def targets_table(rows: list[dict], featurizer, real_names: bool = False) -> pa.Table:
    """rows with `id` and `units` (and `mentions` for real_names) -> SCHEMA; the teacher sees
    every unit of every row in one call."""
    if real_names:
        rows = [{**r, "units": real_units(r["units"], r.get("mentions") or [])} for r in rows]
    texts = [teacher_text(u) for r in rows for u in r["units"]]
    features = np.asarray(featurizer(texts)) if texts else np.zeros((0, 1))
    if len(features) != len(texts):
        raise ValueError(f"featurizer gave {len(features)} vectors for {len(texts)} units")
    ids, sizes, matrices, start = [], [], [], 0
    for row in rows:
        n = len(row["units"])
        ids.append(row["id"])
        sizes.append(n)
        matrices.append(cosine_matrix(features[start:start + n]).astype(np.float32).ravel().tolist())
        start += n
    return pa.table({"id": ids, "hint_units": sizes, "hint_similarity": matrices}, schema=SCHEMA)


def write_targets(processed_dir: Path, out_dir: Path, featurizer, splits=SPLITS,
                  real_names: bool = False) -> dict[str, int]:
    """Targets of each split's stage-one rows into out_dir/<split>.parquet (replacing out_dir);
    real_names: the teacher reads the units with their mentions put back (a one-stage variant)."""
    columns = ["id", "units", "mentions"] if real_names else ["id", "units"]
    tables = {}
    for split in splits:
        source = processed_dir / "stage_one" / f"{split}.parquet"
        if not source.is_file():
            raise FileNotFoundError(f"{source}: no stage-one split here (run the preprocess stage first)")
        tables[split] = targets_table(pq.read_table(source, columns=columns).to_pylist(), featurizer, real_names)
    with fresh_dir(out_dir) as tmp:
        for split, table in tables.items():
            pq.write_table(table, tmp / f"{split}.parquet")
    return {split: table.num_rows for split, table in tables.items()}


def write_marker(out_dir: Path, variant: str) -> None:
    """The output of a variant that needs no targets."""
    with fresh_dir(out_dir) as tmp:
        (tmp / MARKER).write_text(f"{variant} is not a hint variant: no similarity targets\n")


class fresh_dir:
    """Write into a staging sibling that then replaces `out_dir` (preprocess's Staging: atomic
    swap); only a folder this module wrote before, holding nothing but its files, is replaced."""

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir)

    def __enter__(self) -> Path:
        if self.out_dir.exists():
            foreign = [p.name for p in self.out_dir.iterdir() if p.name not in {MARKER, *(f"{s}.parquet" for s in SPLITS)}]
            if foreign or not self.out_dir.is_dir():
                raise FileExistsError(f"{self.out_dir}: holds files this stage did not write ({foreign[:3]})")
        self.staging = Staging(self.out_dir, marker=None)
        return self.staging.path

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            self.staging.abort()
        else:
            self.staging.commit()


def join(rows: list[dict], path: Path) -> list[dict]:
    """`rows` with their `hint_units` and `hint_similarity` (by `id`); a missing file or row
    is an error, since training would silently lose L_Sen."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no hint similarity targets (run `dvc repro hint_targets`, "
                                f"or python stages/hint_targets.py <variant>)")
    table = pq.read_table(path).to_pydict()
    by_id = {i: (n, s) for i, n, s in zip(table["id"], table["hint_units"], table["hint_similarity"])}
    missing = [r["id"] for r in rows if r["id"] not in by_id]
    if missing:
        raise ValueError(f"{path}: no targets for {len(missing)} rows (e.g. {missing[0]!r}); rerun hint_targets")
    return [{**r, "hint_units": by_id[r["id"]][0], "hint_similarity": by_id[r["id"]][1]} for r in rows]
