"""Reference lines from the world's generator: what the best predictor could reach.

- `oracle_event_probe`: before each test unit, the generator's exact distribution over the
  next event (eric/world/oracle.py) gives P(event kind | the focal character acts); its most
  likely kind is the best guess any model can make from the prefix, the ceiling of the
  `event` probes (eric/evaluate/world_probes.py). Beside it the training units' majority
  kind, the probes' floor.
- `oracle_line`: the oracle critic's L_CL (the Bayes-optimal InfoNCE scores of the same
  candidates) on exactly the validation batches the training loop scores (same rows, length
  order, batch size, entity draws, hard negatives), weighted per target token as the loop
  weighs its validation means; with ln(candidates), chance. A reference beside chance, not a
  target a tracker must reach: on these candidates a critic that only matches the planned
  entity's placeholder goes below chance too (docs/state-predictor.md, eric/world/oracle.py).
- `contrastive_ratios`: the model's own L_CL / chance at the end of training, train and
  validation (the training stage's plots), to read against the oracle's.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from eric.world.oracle import OracleLoss, event_tables
from eric.world.phrasings import PLACEHOLDER


def _k(placeholder: str) -> int:
    return int(PLACEHOLDER.fullmatch(placeholder).group(1))


def oracle_event_probe(train_rows: list[dict], test_rows: list[dict], seed: int, cast: tuple[int, int],
                       events: int) -> dict:
    """Accuracy of the oracle's most likely kind for the focal character, and of the
    training units' majority kind, over the test units."""
    majority = Counter(e for r in train_rows for e in r["world_events"]).most_common(1)[0][0]
    tables = event_tables(seed, {r["id"] for r in test_rows}, tuple(cast), events)
    right = base = units = 0
    for row in test_rows:
        for n, (kind, focal) in enumerate(zip(row["world_events"], row["world_focal"])):
            acts = {k: p for (k, role), p in tables[row["id"]][n][_k(focal)].items() if role == "a"}
            right += max(acts, key=acts.get) == kind
            base += majority == kind
            units += 1
    return {"accuracy": round(right / units, 4) if units else None,
            "majority": round(base / units, 4) if units else None, "units": units}


def val_batches(tokenizer, val_rows: list[dict], micro_batch_size: int, max_source: int, max_target: int
                ) -> list[list[int]]:
    """The training loop's validation batches on one rank (eric/train/loop.py): longest first."""
    from eric.train.data_order import eval_batches, lengths

    return eval_batches(len(val_rows), micro_batch_size, lengths=lengths(tokenizer, val_rows, max_source, max_target))


def oracle_line(collator, val_rows: list[dict], train_rows: list[dict], batches: list[list[int]], seed: int,
                cast: tuple[int, int], events: int) -> dict:
    """The oracle's L_CL and chance over `batches` (indices into `val_rows`: the loop's
    eval_batches); `train_rows` give the labels' marginal, as the oracle's prior."""
    from eric.train.meters import target_tokens

    tables = event_tables(seed, {r["id"] for r in val_rows}, tuple(cast), events)
    oracle = OracleLoss(tables, collator.entity_class, train_rows)
    loss = chance = weight = 0.0
    for indices in batches:
        rows = [val_rows[i] for i in indices]
        batch = collator(rows)
        value, ln_candidates = oracle(batch, rows)
        w = target_tokens(batch)
        loss, chance, weight = loss + w * value, chance + w * ln_candidates, weight + w
    if not weight or not chance:
        return {"oracle_loss": None, "chance": None, "oracle_vs_chance": None, "val_texts": len(val_rows),
                "batches": len(batches)}
    return {"oracle_loss": round(loss / weight, 4), "chance": round(chance / weight, 4),
            "oracle_vs_chance": round(loss / chance, 4), "val_texts": len(val_rows), "batches": len(batches)}


def cl_ratio(row: dict, prefix: str = "val_") -> float | None:
    """L_CL / chance of one row of the training plots (None where the row has no L_CL)."""
    loss, chance = row.get(f"{prefix}contrastive_loss"), row.get(f"{prefix}contrastive_chance")
    if loss in (None, "") or chance in (None, "") or not float(chance):
        return None
    return round(float(loss) / float(chance), 5)


def read_plot(path: Path) -> list[dict]:
    """A training plot (plots/train/<variant>.csv, <variant>_val.csv); [] when absent."""
    if not path.is_file():
        return []
    with path.open() as handle:
        return list(csv.DictReader(handle))


def contrastive_ratios(plots_dir: Path, variant: str) -> dict:
    """The last train and validation rows' L_CL / chance."""
    train, val = read_plot(plots_dir / f"{variant}.csv"), read_plot(plots_dir / f"{variant}_val.csv")
    return {"train": cl_ratio(train[-1], "") if train else None, "val": cl_ratio(val[-1]) if val else None}
