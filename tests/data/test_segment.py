"""The sentence splitter (spaCy senter) and the mapping of entity spans to units."""

from eric.data.nlp import load_pipeline
from eric.data.pipeline import Task, segment
from eric.data.readers import RawStory
from eric.config import load_params
from eric.data.errors import SkipCounter
from eric.data.segment import join_units, sentence_offsets, spans_by_unit


def test_splitter_keeps_abbreviations_and_initials_together():
    nlp = load_pipeline(split_sentences=True)
    text = "Mr. J. R. Smith went to Washington. He met Dr. Watson there at 5 p.m. on Friday. Then he left."
    sents = [text[s:e] for s, e in sentence_offsets(nlp(text), limit=10)]
    assert sents == [
        "Mr. J. R. Smith went to Washington.",
        "He met Dr. Watson there at 5 p.m. on Friday.",
        "Then he left.",
    ]


def test_sentence_offsets_respects_limit():
    nlp = load_pipeline(split_sentences=True)
    assert len(sentence_offsets(nlp("One. Two. Three. Four."), limit=2)) == 2


def test_entity_spans_are_unit_relative():
    nlp = load_pipeline(split_sentences=False)
    units = ["The film opens in a village.", "John Smith works for the FBI in Chicago."]
    text, offsets = join_units(units)
    spans = spans_by_unit(nlp(text), offsets, {"PERSON", "ORG"})
    assert spans[0] == []
    assert [(units[1][s.start : s.end], s.text) for s in spans[1]] == [("John Smith", "John Smith"), ("FBI", "FBI")]


def test_raw_text_segmentation_respects_unit_window():
    params = load_params(None, {"preprocess.max_target_units": 5, "preprocess.min_target_units": 2})
    text = " ".join(f"Sentence number {i} is here." for i in range(1, 11))
    nlp = load_pipeline(split_sentences=True)
    seg = segment(nlp(text), Task(RawStory("x", "x", text=text), None), params.preprocess, SkipCounter())
    assert seg.input == "Sentence number 1 is here."
    assert seg.units == [f"Sentence number {i} is here." for i in range(2, 7)]


def test_truncated_raw_text_drops_the_possibly_cut_sentence():
    params = load_params(None, {"preprocess.min_target_units": 1})
    text = "First one here. Second one here. Third one is cut"
    nlp = load_pipeline(split_sentences=True)
    seg = segment(nlp(text), Task(RawStory("x", "x", text=text), None, truncated=True), params.preprocess, SkipCounter())
    assert seg.units == ["Second one here."]
