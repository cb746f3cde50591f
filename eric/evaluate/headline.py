"""A variant's headline figures: the paper's Table 2, coherence, states used and the
validation LM loss, rounded as the report shows them. The report stage writes one small
file per variant (`evaluate.headline_dir`/<variant>.json), the only files DVC declares as
metrics, so `dvc metrics show`, `dvc metrics diff` and `dvc exp show` fit a terminal;
every other figure stays in metrics/evaluate/ and metrics/train/ (outputs, not metrics)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from eric.evaluate.scoring import METRIC_NAMES

# the extra columns: name -> what they read (all percent or counts, as in the report)
COHERENCE, STATES, LM_LOSS = "Coh", "States", "LM-loss"
HEADLINE_NAMES = (*METRIC_NAMES, COHERENCE, STATES, LM_LOSS)


def headline(variant: str, evaluated: dict, trained: dict | None) -> dict[str, float | int | None]:
    """{name: value} in HEADLINE_NAMES order; None where the variant has no such figure
    (BART's states, coherence on a split with no swap to score)."""
    out: dict[str, float | int | None] = {name: _rounded(evaluated.get(name), 2) for name in METRIC_NAMES}
    accuracy = ((evaluated.get("coherence") or {}).get(variant) or {}).get("accuracy")
    out[COHERENCE] = _rounded(None if accuracy is None else 100 * accuracy, 1)
    out[STATES] = evaluated.get("states_used")
    out[LM_LOSS] = _rounded((trained or {}).get("final_val_lm_loss"), 3)
    return out


def _rounded(value, digits: int) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return round(float(value), digits)


def write_headlines(folder: Path, evaluated: dict[str, dict], trained: dict[str, dict]) -> list[Path]:
    """<folder>/<variant>.json for every evaluated variant; files of variants no longer
    evaluated are removed (the folder is the report stage's own output)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for variant, metrics in evaluated.items():
        path = folder / f"{variant}.json"
        path.write_text(json.dumps(headline(variant, metrics, trained.get(variant)), indent=1) + "\n")
        written.append(path)
    for stale in set(folder.glob("*.json")) - set(written):
        stale.unlink()
    return written
