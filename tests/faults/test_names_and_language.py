"""Names the tagger never saw: stats.json's honest complement to names_left (capitalized_left), and
the preprocess warnings when the text is not what the tagger reads (another language, casing)."""

import json

import pytest

from eric.data.anonymize import Span
from eric.data.errors import SkipCounter
from eric.data.pipeline import run_preprocess
from eric.data.readers import read_corpus
from eric.data.schema import SPLITS
from eric.data.stats import MIN_WORDS, PreprocessStats, capitals
from tests.conftest import WIKIPLOTS_MINI

# Counted: Harriet (missed by the tagger, mid-sentence), Quigley (a full stop after "Mr" ends
# no sentence), FBI. Not counted: Then and She (sentence-initial), Go (after an opening quote),
# Monday, Mr and I (NOT_NAME_WORDS), the placeholders.
ANONYMIZED = 'Then <e0> met Harriet at the mill on Monday. She saw Mr. Quigley and the FBI. "Go home," I said to <e1>.'


def test_capitalized_left_counts_mid_sentence_capitals_that_are_no_placeholder_or_listed_word():
    assert capitals(ANONYMIZED).capitalized == 3


def test_capitalized_left_is_reported_per_split_and_in_total_beside_names_left():
    original = "Then Tom met Harriet at the mill. She saw Ann there."
    spans = [Span(5, 8, "Tom"), Span(42, 45, "Ann")]  # the tagger missed Harriet
    anonymized = "Then <e0> met Harriet at the mill. She saw <e1> there."
    stats = PreprocessStats("c")
    stats.add_capitals("train", [original], [spans], [anonymized])
    stats.add_capitals("test", [ANONYMIZED], [[]], [ANONYMIZED])
    saved = stats.to_dict()
    assert [saved[s]["capitalized_left"] for s in SPLITS] == [1, 0, 3]
    assert saved["capitalized_left"] == 4 and saved["names_left"] == 0
    check = saved["tagger_check"]  # before anonymization: Tom, Harriet, Ann + the 3 above; Tom and Ann tagged
    assert (check["capitalized"], check["tagged"]) == (6, 2) and check["warnings"] == []  # too few words to judge


GERMAN = [
    "Der junge Bauer Johann lebt mit seiner Mutter auf einem kleinen Hof am Rande des Dorfes.",
    "Eines Morgens findet er im Wald einen verletzten Hund, den er mit nach Hause nimmt.",
    "Seine Mutter ist zuerst dagegen, weil das Geld für Futter kaum reicht.",
    "Doch der Hund rettet bald darauf die Kinder des Nachbarn aus dem brennenden Haus.",
    "Der Bürgermeister lädt Johann und seine Mutter zu einem Fest auf dem Marktplatz ein.",
    "Dort trifft Johann die Lehrerin Anna, die gerade aus der Stadt gekommen ist.",
    "Die beiden verbringen den ganzen Abend miteinander und sprechen über Bücher und Reisen.",
    "Am nächsten Tag erfährt Johann, dass der Hof wegen alter Schulden verkauft werden soll.",
    "Der Händler aus der Stadt bietet der Mutter einen lächerlichen Preis für das Land.",
    "Johann beschließt, im Winter in der Fabrik zu arbeiten, um die Schulden zu bezahlen.",
    "Die Arbeit ist hart, und die Nächte in der Baracke sind kalt und lang.",
    "Anna schreibt ihm jede Woche einen Brief und schickt ihm Geld aus ihrem Lohn.",
    "Im Frühling kehrt Johann mit genug Geld zurück und rettet den Hof seiner Familie.",
    "Der Händler verlässt wütend das Dorf und kommt nie wieder zurück.",
    "Am Ende heiraten Johann und Anna in der kleinen Kirche neben der Schule.",
    "Der Hund sitzt während der ganzen Zeremonie vor der Tür und wartet auf sie.",
]


def english(n: int, case=lambda unit: unit) -> list[list[str]]:
    stories = (s for s, _ in zip(read_corpus("wikiplots", WIKIPLOTS_MINI, SkipCounter()), range(n)))
    return [[case(unit) for unit in story.units] for story in stories]


@pytest.mark.parametrize(("text", "signs"), [
    ("german", ["stop words of preprocess.spacy_model's language (under 20%): is the text in another language?"]),
    ("lower", ["words open with a capital followed by lower case (under 1%): is the text lower- or upper-cased?"]),
    ("upper", ["capitalised mid-sentence words as names (under 25%", "words open with a capital followed by lower case"]),
    ("english", []),
])
def test_text_the_tagger_was_not_made_for_is_warned_of_once_and_recorded(
        text, signs, write_wikiplots, params_for, tmp_path, capsys):
    stories = {"german": lambda: [GERMAN[i:] + GERMAN[:i] for i in range(6)], "lower": lambda: english(6, str.lower),
               "upper": lambda: english(6, str.upper), "english": lambda: english(6)}[text]()
    run_preprocess(params_for(write_wikiplots(stories), "wikiplots"), progress=False)
    check = json.loads((tmp_path / "out" / "stats.json").read_text())["tagger_check"]
    assert check["words"] >= MIN_WORDS  # enough text to be judged
    printed = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert printed == [f"warning: {line}" for line in check["warnings"]]  # each once, on one line
    assert len(printed) == len(signs) and all(sign in line for sign, line in zip(signs, printed))
    assert all(line.startswith("warning: wikiplots-mini's targets: ") for line in printed)
