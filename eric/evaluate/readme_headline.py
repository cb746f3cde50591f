"""README's headline, rendered by `python -m studies.render` from the committed pipeline run:
Table 2 with Len and B-1 at equal length beside B-1 (B-1 follows length), MAUVE with its
seeds' lowest and highest score, each ERIC row naming its state-space recipe, and training
with the LM losses labelled by the states they read. Apart from eric/evaluate/headline.py,
whose figures the review stage reads without the report's imports."""

from __future__ import annotations

from eric.evaluate.headline import PREDICTED_KEY
from eric.evaluate.report import MATCHED_NOTE, MISSING, TRAINING_COLUMNS, ReportInputs, display_name
from eric.evaluate.report import markdown_table, table_rows, training_rows
from eric.evaluate.scoring import METRIC_NAMES, format_value

FRONT = ("B-1", "Len", "B-1 eq. len")  # B-1 beside what it follows: the texts' length


def readme_block(inputs: ReportInputs, about: str) -> str:
    """Table 2 with Len and B-1 at equal length beside B-1 and the ERIC rows naming their
    recipe, then training with the LM losses labelled; `about`: how the run was made."""
    header = ["Model", *FRONT, *(n for n in METRIC_NAMES if n not in FRONT)]
    rows = []
    for variant, row in zip(inputs.metrics, table_rows(inputs)):
        cells = dict(zip(["Model", *METRIC_NAMES], row))
        matched = inputs.matched.get(variant)
        cells["B-1 eq. len"] = MISSING if matched is None else format_value("B-1", matched)
        cells["Model"] = _model(variant, inputs.training.get(variant) or {})
        rows.append([cells[name] for name in header])
    train_header, train_rows = _training(inputs)
    notes = [(f"`dvc repro` on params.yaml ({about}): `metrics/`, committed with its `dvc.lock`; the full "
              "report is `reports/results.md`."),
             "Len: mean tokens per text. B-1 eq. len: B-1 at equal length. " + MATCHED_NOTE,
             ("MAUVE: the mean over its k-means seeds, in parentheses the lowest and highest seed's score "
              f"({_seeds(inputs)}). ERIC (recipe): `model.state_space.recipe`, docs/state-space.md."),
             ("Val LM loss: teacher-forced; a model with states reads the gold state of every unit, computed "
              "by the sentence encoder from that very unit" + _lm_note(inputs))]
    return "\n".join([markdown_table(header, rows), "", markdown_table(train_header, train_rows), "",
                      *(f"{n}\n" for n in notes)]).rstrip("\n") + "\n"


def _model(variant: str, trained: dict) -> str:
    recipe = trained.get("state_space_recipe")
    return display_name(variant) + (f" ({recipe})" if recipe else "")


def _training(inputs: ReportInputs) -> tuple[list[str], list[list[str]]]:
    """The training table; a model with states has its LM loss marked as read with gold states,
    and the loss with its own predicted states joins it where evaluate measured one."""
    header = ["Model", *TRAINING_COLUMNS]
    lm = header.index("Val LM loss")
    rows = []
    for variant, row in zip(inputs.training, training_rows(inputs)):
        trained = inputs.training[variant]
        row = [_model(variant, trained), *row[1:]]
        if trained.get("state_space_recipe") and row[lm] != MISSING:
            row[lm] += " (gold states)"
        rows.append(row)
    predicted = {v: m.get(PREDICTED_KEY) for v, m in inputs.metrics.items()}
    if any(value is not None for value in predicted.values()):
        header.insert(lm + 1, "Val LM loss, predicted states")
        for variant, row in zip(inputs.training, rows):
            value = predicted.get(variant)
            row.insert(lm + 1, MISSING if value is None else f"{value:.3f}")
    return header, rows


def _lm_note(inputs: ReportInputs) -> str:
    if any(m.get(PREDICTED_KEY) is not None for m in inputs.metrics.values()):
        return (", so it is not comparable with the loss of a model without states; the loss with the "
                "states the model predicts itself (evaluate, on the same validation rows) is.")
    return (", so it is not comparable with the loss of a model without states (the loss with predicted "
            "states is not measured in this run).")


def _seeds(inputs: ReportInputs) -> str:
    first = next(iter(inputs.metrics.values()), {})
    if first.get("mauve_seeds") is None:
        return f"one seed, {first.get('mauve_seed')}: scored before the spread was recorded"
    return f"{first['mauve_seeds']} seeds from {first.get('mauve_seed')}"
