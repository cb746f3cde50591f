"""The EDU segmenter (eric/data/edu.py) on hand-segmented sentences, and EDUs as units in preprocess."""

import json

import pyarrow.parquet as pq
import pytest

from eric.config import ParamsError, load_params
from eric.data.edu import candidates, edu_ranges, presplit_doc, unit_offsets
from eric.data.errors import SkipCounter
from eric.data.nlp import load_pipeline
from eric.data.pipeline import Task, segment
from eric.data.readers import RawStory
from tests.conftest import STORY_A

# Gold segmentations by hand, " | " at each EDU boundary, per rule set.
CASES = [
    # coordination: a verb conjoined to the main clause, split at the conjunction
    ("discodvt", "She leaves the house at dawn | but her brother stays behind."),
    ("discodvt", "The soldiers storm the castle | and the king flees to the north."),
    ("discodvt", "Tom is arrested by the police | and brought before the judge."),
    ("discodvt", "The film was released in 1999 | and grossed ten million dollars."),
    ("discodvt", "He tries to warn the village, | but nobody believes his story."),
    ("discodvt", "The ship sinks in the storm | and the crew swim to the island."),
    # a fronted adverbial clause keeps its comma
    ("discodvt", "When the war ends, | Tom returns home to his family."),
    ("discodvt", "Although she loves him, | Mary marries the wealthy banker."),
    ("discodvt", "After his father dies, | John inherits the family farm."),
    ("discodvt", "Because the bridge is down, | the army has to cross the river."),
    ("discodvt", "While the guards are asleep, | the prisoners dig a tunnel."),
    ("discodvt", "If the ransom is not paid, | the gang will kill the girl."),
    # an adverbial clause after the main clause (also under an open complement)
    ("discodvt", "The agents search the house | while the rest of the team waits outside."),
    ("discodvt", "She refuses to leave the city | because her mother is ill."),
    ("discodvt", "The town celebrates for a week | after the dragon is slain."),
    ("discodvt", "He hides the letter in his coat | before anyone can read it."),
    ("discodvt", "The detective smiles | as the killer walks into the trap."),
    # discodvt: one split per sentence, the most balanced
    ("discodvt", "When the storm hits the coast, | the fishermen pull their boats ashore and wait."),
    ("discodvt", "Although she loves him, Mary marries the banker | after her father dies in the war."),
    # not split: phrases, embedded or complement clauses, no marker, short fragments
    ("discodvt", "He buys fish and chips for his mother and sister."),
    ("discodvt", "The man who left the village never came back to see his children."),
    ("discodvt", "He decides to go and find her in the city."),
    ("discodvt", "Realising that the film is incomplete, Vijay demands evidence from his contact."),
    ("discodvt", "He tries but fails."),
    ("discodvt", "He runs and hides."),
    ("discodvt", "She says that the money was stolen by her cousin."),
    ("discodvt", "He meets Anna, who is a nurse at the local hospital."),  # no marker: not DiscoDVT's
    ("discodvt", "The story follows a young woman who moves to Paris after the war."),
    ("discodvt", "As a child, Peter lived with his grandmother in a small village."),
    # clauses: every boundary, non-restrictive relatives too
    ("clauses", "Although she loves him, | Mary marries the wealthy banker | after her father dies."),
    ("clauses", "He meets Anna, | who is a nurse at the local hospital."),
    ("clauses", "They travel to Rome, | where they find the stolen painting."),
    ("clauses", "Sam cannot swim, | but he stays on the beach | while his friends dive."),
    ("clauses", "He waits for the train | until the station closes for the night."),
    ("clauses", "The man who left the village never came back to see his children."),
    ("clauses", "The story follows a young woman who moves to Paris after the war."),
]


@pytest.fixture(scope="module")
def nlp():
    return load_pipeline(split_sentences=False, parse=True)


def segmented(nlp, text: str, rules: str = "discodvt", min_words: int = 3) -> list[str]:
    doc = nlp(presplit_doc(nlp, [text]))
    return [doc.text[s:e] for s, e in edu_ranges(next(doc.sents), rules, min_words)]


@pytest.mark.parametrize("rules, gold", CASES, ids=[f"{r}-{g[:30]}" for r, g in CASES])
def test_hand_segmented(nlp, rules, gold):
    assert segmented(nlp, gold.replace(" | ", " "), rules) == gold.split(" | ")


def test_min_words_keeps_short_fragments_attached(nlp):
    assert segmented(nlp, "He tries but fails.", min_words=3) == ["He tries but fails."]
    assert segmented(nlp, "He tries but fails.", min_words=2) == ["He tries", "but fails."]


def test_candidates_name_their_marker(nlp):
    doc = nlp(presplit_doc(nlp, ["When the war ends, Tom returns home and he marries Anna, who waits."]))
    words = [word for _, word in candidates(next(doc.sents), "clauses")]
    assert words == ["when", "and", "who"]
    assert [word for _, word in candidates(next(doc.sents), "discodvt")] == ["when", "and"]


def test_presplit_doc_keeps_the_given_sentences(nlp):
    units = ["He arrives in town", "the mayor greets him. Then he leaves", "Anna stays."]
    doc = nlp(presplit_doc(nlp, units))
    assert [s.text for s in doc.sents] == units


def test_unit_offsets_limit_and_dropped_last_sentence(nlp):
    units = ["When the war ends, Tom returns home.", "He marries Anna.", "She leaves him because he drinks."]
    doc = nlp(presplit_doc(nlp, units))
    edus = lambda **kw: [doc.text[s:e] for s, e in unit_offsets(doc, **kw)]  # noqa: E731
    assert edus(limit=10) == ["When the war ends,", "Tom returns home.", "He marries Anna.",
                              "She leaves him", "because he drinks."]
    assert edus(limit=3) == ["When the war ends,", "Tom returns home.", "He marries Anna."]
    assert edus(limit=10, drop_last_sentence=True)[-1] == "He marries Anna."


def test_wikiplots_story_input_is_the_first_edu(nlp):
    pp = load_params(None, {"preprocess.unit": "edu", "preprocess.min_target_units": 2}).preprocess
    units = ("When Ash Williams finds the tape, he plays it.", "Linda is possessed and Ash fights her.",
             "Scotty leaves the cabin but Ash stays with Linda.")
    doc = nlp(presplit_doc(nlp, units))
    seg = segment(doc, Task(RawStory("x", "x", units=units), units), pp, SkipCounter())
    assert seg.input == "When Ash Williams finds the tape,"
    assert seg.units == ["he plays it.", "Linda is possessed", "and Ash fights her.",
                         "Scotty leaves the cabin", "but Ash stays with Linda."]
    # entity spans are relative to their EDU; every tagged name after the input is kept
    assert all(u[s.start:s.end] == s.text for u, spans in zip(seg.units, seg.spans) for s in spans)
    tagged = [e.text for e in doc.ents if e.label_ in {"PERSON", "ORG"} and e.start_char > len(seg.input)]
    assert [s.text for spans in seg.spans for s in spans] == tagged
    assert [s.text for s in seg.spans[1]] == ["Linda"]


def test_raw_text_edus_and_too_few_units(nlp):
    pp = load_params(None, {"preprocess.unit": "edu", "preprocess.min_target_units": 3}).preprocess
    text = "Tom leaves the village. He walks for days and he reaches the sea. He stops there."
    skips = SkipCounter()
    seg = segment(nlp(text), Task(RawStory("x", "x", text=text), None), pp, skips)
    assert (seg.input, seg.units) == ("Tom leaves the village.", ["He walks for days", "and he reaches the sea.",
                                                                   "He stops there."])
    short = "Tom leaves the village. He walks for days. He stops there."
    assert segment(nlp(short), Task(RawStory("y", "y", text=short), None), pp, skips) is None
    assert skips.as_dict() == {"too_few_units": 1}


def test_preprocess_with_edus_balances_counts(write_wikiplots, params_for, tmp_path):
    """A five-sentence story has four target sentences but more target EDUs: kept with
    EDUs, skipped (too few units) with sentences; in = out + skipped either way."""
    five = STORY_A[:5]
    for unit, kept in (("sentence", 1), ("edu", 2)):
        path = write_wikiplots([STORY_A, five, ["Too short."]], name=f"{unit}.zip")
        stats = run(params_for(path, "wikiplots", unit=unit, min_target_units=5, split_ratio=[1, 0, 0]))
        saved = json.loads((tmp_path / "out" / "stats.json").read_text())
        assert saved["stories_in"] == 3 == saved["examples_out"] + saved["skipped_total"]
        assert stats.examples == kept and stats.skipped == {"too_few_units": 3 - kept}
    rows = pq.read_table(tmp_path / "out" / "stage_one" / "train.parquet").to_pylist()
    assert rows[0]["source"] == "Ash Williams drives to a cabin in the woods with his friends."
    assert "but returns wounded." in [u.replace("<e0>", "Ash") for u in rows[0]["units"]]


def run(cfg):
    from eric.data.pipeline import run_preprocess

    return run_preprocess(cfg, progress=False, overwrite=True)


def test_unit_values_are_validated():
    with pytest.raises(ParamsError, match="unit"):
        load_params(None, {"preprocess.unit": "clause"})
    with pytest.raises(ParamsError, match="edu_rules"):
        load_params(None, {"preprocess.edu_rules": "rst"})


def test_a_name_crossing_an_edu_boundary_is_dropped(nlp):
    """As with sentences: a span must lie wholly inside one unit."""
    from spacy.tokens import Span

    from eric.data.segment import spans_by_unit

    doc = nlp.make_doc("Anna met John Smith today and Tom left.")
    doc.ents = [Span(doc, 2, 4, label="PERSON"), Span(doc, 6, 7, label="PERSON")]
    per_unit = spans_by_unit(doc, [(0, 13), (14, 39)], {"PERSON"})  # the cut falls inside "John Smith"
    assert per_unit == [[], [per_unit[1][0]]] and per_unit[1][0].text == "Tom"
