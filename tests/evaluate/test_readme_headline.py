"""README's headline: B-1 beside length, MAUVE's spread, the recipe, the LM losses labelled."""

from __future__ import annotations

from eric.evaluate.readme_headline import readme_block
from eric.evaluate.report import ReportInputs
from tests.evaluate.test_headline import EVALUATED, TRAINED


def _readme(**eric_extra) -> str:
    bart = {"B-1": 15.0, "Len": 171.4, "MAUVE": 11.0, "mauve_min": 6.5, "mauve_max": 15.8}
    inputs = ReportInputs({"eric": {**EVALUATED, **eric_extra}, "bart": bart},
                          training={"eric": TRAINED, "bart": {"steps": 200, "final_val_lm_loss": 6.18}},
                          matched={"eric": 26.18, "bart": 27.8})
    return readme_block(inputs, "tiny run")


def test_readme_puts_length_beside_b1_names_the_recipe_and_shows_mauves_spread():
    text = _readme()
    header, _, eric, bart = text.splitlines()[:4]
    assert header.startswith("| Model | B-1 | Len | B-1 eq. len | B-2 |") and "| Len |" not in header[30:]
    assert eric.startswith("| ERIC (decoupled) | 19.63 | 215 | 26.18 |")
    assert bart.startswith("| BART | 15.00 | 171 | 27.80 |")  # no recipe: no states
    assert "| 7.24 (3.12–12.50) |" in eric and "| 11.00 (6.50–15.80) |" in bart
    assert "10 seeds from 42" in text and "brevity penalty" in text and "tiny run" in text


def test_readme_labels_the_teacher_forced_lm_loss_and_shows_the_predicted_one_when_measured():
    text = _readme()
    training = text.split("\n\n")[1].splitlines()
    assert training[0].endswith("| Val loss | Val LM loss |")  # no predicted column without a measurement
    assert training[2].endswith("| 12.550 | 5.994 (gold states) |") and training[3].endswith("| 6.180 |")
    assert "not comparable with the loss of a model without states (the loss with predicted states is not measured" in text
    measured = _readme(lm_loss_predicted_states=6.4321).split("\n\n")[1].splitlines()
    assert measured[0].endswith("| Val LM loss | Val LM loss, predicted states |")
    assert measured[2].endswith("| 5.994 (gold states) | 6.432 |") and measured[3].endswith("| 6.180 | – |")
