"""Streaming Parquet writers for the example sets, one file per split.

Rows are buffered and flushed in row groups so a full corpus never sits in memory.
Every split file is written even when empty, so later stages can rely on it.
Output goes to a staging folder that replaces the target at the end (outdir.py):
an interrupted run never leaves a half-written dataset behind.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eric.data.outdir import Staging, write_error
from eric.data.schema import SPLITS, STAGE_ONE, STAGE_TWO

ROW_GROUP = 2048


class SplitWriter:
    def __init__(self, folder: Path, schema: pa.Schema):
        folder.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.writers = {s: pq.ParquetWriter(folder / f"{s}.parquet", schema) for s in SPLITS}
        self.buffers: dict[str, list[dict]] = {s: [] for s in SPLITS}

    def write(self, split: str, row: dict) -> None:
        buffer = self.buffers[split]
        buffer.append(row)
        if len(buffer) >= ROW_GROUP:
            self._flush(split)

    def _flush(self, split: str) -> None:
        if self.buffers[split]:
            table = pa.Table.from_pylist(self.buffers[split], schema=self.schema)
            self.writers[split].write_table(table)
            self.buffers[split] = []

    def close(self) -> None:
        for split in SPLITS:
            self._flush(split)
            self.writers[split].close()


class DatasetWriter:
    """stage_one/ and stage_two/ Parquet files (and `folder` for more), swapped in as `out_dir`."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.staging = Staging(out_dir)
        self.folder = self.staging.path
        try:
            self.stage_one = SplitWriter(self.folder / "stage_one", STAGE_ONE)
            self.stage_two = SplitWriter(self.folder / "stage_two", STAGE_TWO)
        except BaseException:
            self.staging.abort()
            raise

    def commit(self) -> Path:
        try:
            self.stage_one.close()  # the last row groups and footers: a full disk shows here
            self.stage_two.close()
        except OSError as exc:
            self.abort()
            raise write_error(self.out_dir, exc) from None  # nothing but writes happen here
        return self.staging.commit()

    def abort(self) -> None:
        for writer in (self.stage_one, self.stage_two):
            for w in writer.writers.values():
                w.close()
        self.staging.abort()


def read_split(out_dir: Path, stage: str, split: str) -> pa.Table:
    """One split of `stage_one` or `stage_two` as a pyarrow Table."""
    return pq.read_table(out_dir / stage / f"{split}.parquet")
