"""The validation LM loss a model reaches with the states it would predict itself.

The training loop's validation LM loss of ERIC is teacher-forced twice over: the text, as
for any LM, and the state s_n of every unit, read by the sentence encoder from that very
unit. The number comparable with BART's validation LM loss gives ERIC its own states:

  pass 1     the loop's forward (gold states): its LM loss is `lm_loss_gold_states`, and
             it predicts a state for every unit with an entity (`predicted_state_ids`);
  pass k+1   the same rows with `state_ids` = pass k's predicted ids, until the ids stop
             changing: unit n's prediction reads only the states of units before n, so
             pass k fixes unit k-1 for good and N units settle by pass N + 1 (a batch that
             has not, a forward that is not deterministic, is counted in
             `lm_loss_unsettled_batches` and scored with its last pass).

The LM loss of the pass whose states are the ones it predicts is `lm_loss_predicted_states`:
every unit's state came from a prefix built with predicted states. Entities p_n stay the
collated ones (the loop's draw) in both. A model without states gives `lm_loss`.
Means are per target token over all rows, as the loop weighs its validation means; the
evaluate stage passes the loop's own validation rows and batches (`val_batches`).
"""

from __future__ import annotations

import torch

from eric.evaluate.state_probe import _on


def val_batches(tokenizer, val_rows: list[dict], micro_batch_size: int, max_source: int, max_target: int
                ) -> list[list[int]]:
    """The training loop's validation batches on one rank (eric/train/loop.py): longest first."""
    from eric.train.data_order import eval_batches, lengths

    return eval_batches(len(val_rows), micro_batch_size, lengths=lengths(tokenizer, val_rows, max_source, max_target))


@torch.no_grad()
def predicted_state_pass(model, batch: dict, ids: torch.Tensor) -> tuple[object, int, bool]:
    """(the output of the forward whose injected states are its own predictions, forward
    passes after the gold one, whether the ids settled); `ids`: the gold pass's predictions."""
    for passes in range(1, batch["entity_ids"].shape[1] + 2):  # one more than the units: the last confirms
        out = model(**batch, state_ids=ids)
        if torch.equal(out.predicted_state_ids, ids):
            return out, passes, True
        ids = out.predicted_state_ids
    return out, passes, False


@torch.no_grad()
def validation_lm_loss(model, collator, rows: list[dict], batches: list[list[int]]) -> dict:
    """Token-weighted LM loss over `batches` (indices into `rows`: the loop's eval_batches),
    with gold and predicted states for a model with states, else `lm_loss`."""
    model.eval()
    states = getattr(model.config, "use_state", False)
    sums = {"gold": 0.0, "predicted": 0.0}
    tokens = most_passes = unsettled = 0
    for indices in batches:
        batch = _on(model, collator([rows[i] for i in indices]))
        weight = int((batch["labels"] != -100).sum())
        gold = model(**batch)
        sums["gold"] += weight * float(gold.lm_loss)
        ids = gold.predicted_state_ids if states else None
        del gold  # its logits: one batch's worth of memory at a time
        if states:
            own, passes, settled = predicted_state_pass(model, batch, ids)
            sums["predicted"] += weight * float(own.lm_loss)
            most_passes, unsettled = max(most_passes, passes), unsettled + (not settled)
        tokens += weight
    mean = lambda key: round(sums[key] / tokens, 5) if tokens else None  # noqa: E731
    found = {"lm_loss_texts": len(rows), "lm_loss_tokens": tokens}
    if not states:
        return {"lm_loss": mean("gold"), **found}
    return {"lm_loss_gold_states": mean("gold"), "lm_loss_predicted_states": mean("predicted"),
            "lm_loss_state_passes": most_passes, "lm_loss_unsettled_batches": unsettled, **found}
