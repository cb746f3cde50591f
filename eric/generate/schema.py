"""The sample stage's output: one Parquet file per variant (outputs/samples/<variant>.parquet).

The file's metadata (key `eric.sample`) records the sampling options, the model
folders and the seed, so a file says how it was made.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eric.data.schema import MENTION
from eric.generate.errors import SampleError

METADATA_KEY = b"eric.sample"

SAMPLES = pa.schema(
    [
        ("id", pa.string()),
        ("input", pa.string()),  # the first unit, as given to both stages
        ("stage_one", pa.string()),  # "<sent> unit <sent> unit" with placeholders
        ("mentions_text", pa.string()),  # stage two's raw output "<e0> Ash <e1> Linda"
        ("mentions", pa.list_(MENTION)),  # parsed, in order
        ("final_text", pa.string()),  # stage one with the mentions merged in (<sent> kept)
        ("reference", pa.string()),  # the gold target with its names (null for plain inputs)
        # per unit of stage one: the planned entity ("<e3>", "<none>"; null = not planned)
        # and its state id (-1 = none); empty lists for variants without a planner
        ("unit_entities", pa.list_(pa.string())),
        ("unit_states", pa.list_(pa.int32())),
        ("stage_one_tokens", pa.int32()),
        # merge: placeholder occurrences filled by a generated mention, by reusing the
        # entity's last mention, or by a name drawn from the training mentions
        ("fallback_generated", pa.int32()),
        ("fallback_reused_last", pa.int32()),
        ("fallback_random_name", pa.int32()),
    ]
)


def write_samples(rows: list[dict], path: str | Path, metadata: dict | None = None) -> Path:
    """Write to a fresh hidden sibling, then rename it over `path`: an interrupted or failed
    write (disk full, a read-only folder) leaves the previous file as it was, no partial
    file behind, and says so in one line (SampleError)."""
    path = Path(path)
    table = pa.Table.from_pylist(rows, schema=SAMPLES)
    if metadata:
        table = table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, default=str).encode()})
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp)
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise SampleError(f"{path}: cannot write the samples ({exc.strerror or exc}); "
                          "an earlier file there is unchanged") from None
    return path


def is_samples_file(path: str | Path) -> bool:
    """True for a Parquet file `eric sample` (or the sample stage) wrote: it carries our metadata key."""
    try:
        return METADATA_KEY in (pq.read_schema(path).metadata or {})
    except (OSError, pa.ArrowException):
        return False


def read_samples(path: str | Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def read_metadata(path: str | Path) -> dict:
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta[METADATA_KEY]) if METADATA_KEY in meta else {}


def fallback_summary(rows: list[dict]) -> dict:
    """Merge fallbacks over all placeholder occurrences (the paper: ~2.5% reused, ~1.1% random)."""
    counts = {kind: sum(r[f"fallback_{kind}"] or 0 for r in rows) for kind in ("generated", "reused_last", "random_name")}
    total = sum(counts.values())
    shares = {f"{kind}_share": (n / total if total else None) for kind, n in counts.items() if kind != "generated"}
    return {**counts, "occurrences": total, **shares}
