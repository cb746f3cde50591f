"""The one-stage form of a stage-one example: what the paper's BART and baselines read.

ERIC writes a story with placeholders and a second model writes the names (two stages);
the baselines it is compared with write real names in one stage. A one-stage row is the
same example with its recorded mentions put back (`deanonymize`) and no placeholder in any
unit, so both forms train on the same units, splits and sources (sources keep their names
in both).
"""

from __future__ import annotations

from eric.data.anonymize import deanonymize

COLUMNS = ("mentions",)  # what the conversion reads beyond a training row's columns


def one_stage_row(row: dict) -> dict:
    """`row` with the real names in its target and no placeholders per unit."""
    return {**row, "target": deanonymize(row["target"], row.get("mentions") or []),
            "unit_entities": [[] for _ in row["unit_entities"]]}
