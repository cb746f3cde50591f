"""The study's measurements beyond the training curves (run.py calls them).

oracle_line: the oracle's L_CL (eric/world/oracle.py) on exactly the validation batches the
training loop scores (same rows, length order, batch size, entity draws, hard negatives),
weighted per target token as the loop weighs its validation means.

probe_arm: does a trained model's predicted state of the planned entity tell the unit's event
kind? A majority-vote probe (eric/evaluate/state_probe.py) fitted on training units, scored on
the test split against the majority class, with a bootstrap interval; the gold state (the
sentence encoder's, from the unit itself) beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "stages"))

PROBE_TRAIN_TEXTS = 1500  # training stories the probe is fitted on


def _setup(params_path: Path):
    from eric.config import load_params, resolve_path
    from eric.data.collate import StageOneCollator
    from eric.data.tokenizer import load_tokenizer

    params = load_params(params_path)
    m = params.model
    tokenizer = load_tokenizer(resolve_path(params.tokenizer.out_dir), m.max_entities)
    collator = StageOneCollator(tokenizer, max_source_length=m.max_source_length,
                                max_target_length=m.max_target_length, max_entities=m.max_entities,
                                entity_choice=m.entity_choice, hard_negatives=m.hard_negatives, seed=params.seed)
    return params, tokenizer, collator, resolve_path(params.preprocess.out_dir) / "stage_one"


def _rows(path: Path, limit: int | None = None) -> list[dict]:
    from eric.train.job import read_rows
    from eric.world.corpus import WORLD_COLUMNS

    columns = ["id", "source", "target", "unit_entities", *(name for name, _ in WORLD_COLUMNS)]
    return read_rows(path, columns, limit)


def oracle_line(params_path: Path) -> dict:
    from train_stage_one import lengths

    from eric.train.data_order import eval_batches
    from eric.train.meters import target_tokens
    from eric.world.oracle import OracleLoss, event_tables

    params, tokenizer, collator, data = _setup(params_path)
    m, world = params.model, params.corpus.world
    val = _rows(data / "val.parquet", params.train.max_val_examples)
    train = _rows(data / "train.parquet")
    tables = event_tables(world.seed, {r["id"] for r in val}, tuple(world.cast),
                          params.preprocess.max_target_units)
    oracle = OracleLoss(tables, collator.entity_class, train)
    batches = eval_batches(len(val), params.train.micro_batch_size,
                           lengths=lengths(tokenizer, val, m.max_source_length, m.max_target_length))
    loss = chance = weight = 0.0
    for indices in batches:
        rows = [val[i] for i in indices]
        batch = collator(rows)
        value, ln_candidates = oracle(batch, rows)
        w = target_tokens(batch)
        loss, chance, weight = loss + w * value, chance + w * ln_candidates, weight + w
    return {"oracle_loss": round(loss / weight, 4), "chance": round(chance / weight, 4),
            "oracle_vs_chance": round(loss / chance, 4), "val_texts": len(val), "batches": len(batches)}


def _event_kind(row: dict, unit: int) -> str:
    return row["world_events"][unit]


def probe_arm(params_path: Path, model_dir: Path) -> dict:
    import torch

    from eric.evaluate.state_probe import agreement, majority_probe, prediction_cosines, unit_state_pairs
    from eric.generate.loading import load_stage_one

    torch.set_num_threads(1)
    params, _, collator, data = _setup(params_path)
    model, _ = load_stage_one(model_dir, "cpu")
    train = unit_state_pairs(model, collator, _rows(data / "train.parquet", PROBE_TRAIN_TEXTS), _event_kind)
    test_rows = _rows(data / "test.parquet")
    test = unit_state_pairs(model, collator, test_rows, _event_kind)
    return {"label": "event kind of the unit", "train_texts": PROBE_TRAIN_TEXTS,
            "predicted": majority_probe(train, test, "predicted").to_dict(),
            "gold": majority_probe(train, test, "gold").to_dict(),
            "predicted_is_gold": round(agreement(test), 4),
            "predicted_cosines": prediction_cosines(model, collator, test_rows)}


GROUPS = {"sentence encoder": "sentence_encoder.", "state predictor": "state_predictor.",
          "codebook": "state_space.codebook", "decoder layers": "model.decoder.layers."}


def gradient_norms(params_path: Path, model_dir: Path | None = None, texts: int = 16) -> dict:
    """L2 norm of each loss's gradient on each part of the model, on the first validation texts
    (a trained model from `model_dir`, or a fresh one of the arm's config when None)."""
    import torch

    from eric.generate.loading import load_stage_one
    from eric.model.variants import build_model

    torch.set_num_threads(1)
    params, tokenizer, collator, data = _setup(params_path)
    if model_dir is None:
        torch.manual_seed(params.seed)
        model = build_model(params.model, "eric", tokenizer)
    else:
        model, _ = load_stage_one(model_dir, "cpu")
    model.train()
    batch = collator(_rows(data / "val.parquet", texts))
    out = model(**batch)
    norms = {}
    for name in ("lm_loss", "entity_loss", "contrastive_loss"):
        model.zero_grad(set_to_none=True)
        getattr(out, name).backward(retain_graph=True)
        norms[name] = {group: round(_norm(model, prefix), 5) for group, prefix in GROUPS.items()}
    return norms


def _norm(model, prefix: str) -> float:
    grads = [p.grad.float().norm() ** 2 for n, p in model.named_parameters() if n.startswith(prefix) and p.grad is not None]
    return float(sum(grads) ** 0.5) if grads else 0.0
