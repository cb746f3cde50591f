"""A variant's headline figures: the paper's Table 2, B-1 at equal length, coherence, states used
and the validation LM loss, rounded as the report shows them. The report stage writes one small file per variant (`evaluate.headline_dir`/<variant>.json),
the only files DVC declares as metrics, so `dvc metrics show`, `dvc metrics diff` and `dvc exp
show` fit a terminal; every other figure stays in metrics/evaluate/ and metrics/train/ (outputs,
not metrics). README's headline is eric/evaluate/readme_headline.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

from eric.data.outdir import replace_text
from eric.evaluate.scoring import METRIC_NAMES

# the extra columns: name -> what they read (all percent or counts, as in the report). Names without
# spaces, and few: `dvc metrics show` splits its header on spaces and must fit a terminal (MAUVE's
# spread and the LM loss with predicted states are in metrics/evaluate/ and README's headline)
MATCHED, COHERENCE, STATES, LM_LOSS = "B-1-eq", "Coh", "States", "LM-loss"
HEADLINE_NAMES = (*METRIC_NAMES, MATCHED, COHERENCE, STATES, LM_LOSS)
# evaluate's LM loss of a variant with states, with the states it predicts itself (README's headline)
PREDICTED_KEY = "lm_loss_predicted_states"


def headline(variant: str, evaluated: dict, trained: dict | None, matched: float | None = None) -> dict[str, float | int | None]:
    """{name: value} in HEADLINE_NAMES order; None where the variant has no such figure
    (BART's states, coherence on a split with no swap to score)."""
    out: dict[str, float | int | None] = {name: _rounded(evaluated.get(name), 2) for name in METRIC_NAMES}
    out[MATCHED] = _rounded(matched, 2)
    accuracy = ((evaluated.get("coherence") or {}).get(variant) or {}).get("accuracy")
    out[COHERENCE] = _rounded(None if accuracy is None else 100 * accuracy, 1)
    out[STATES] = evaluated.get("states_used")
    out[LM_LOSS] = _rounded((trained or {}).get("final_val_lm_loss"), 3)  # teacher-forced: gold states, if any
    return out


def _rounded(value, digits: int) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return round(float(value), digits)


def write_headlines(folder: Path, evaluated: dict[str, dict], trained: dict[str, dict],
                    matched: dict[str, float] | None = None) -> list[Path]:
    """<folder>/<variant>.json for every evaluated variant; files of variants no longer
    evaluated are removed (the folder is the report stage's own output)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for variant, metrics in evaluated.items():
        path = folder / f"{variant}.json"
        figures = headline(variant, metrics, trained.get(variant), (matched or {}).get(variant))
        replace_text(path, json.dumps(figures, indent=1) + "\n")
        written.append(path)
    for stale in set(folder.glob("*.json")) - set(written):
        stale.unlink()
    return written
