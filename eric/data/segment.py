"""Units (sentences) and the entity spans inside the target units, from spaCy docs.

WikiPlots arrives one sentence per line: its units are kept and only the target
text goes through NER (unit 1 on its own, for the names it introduces, so that the
target's tagging does not depend on it). Raw text (CNN, JSONL) goes through `senter` + `ner` in one
pass; units are the sentences. The finer unit, EDUs (`preprocess.unit: edu`), is
eric/data/edu.py: its character ranges go through the same `spans_by_unit`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eric.data.anonymize import Span
from eric.data.clean import clean_markup


@dataclass
class Segmented:
    input: str  # unit 1
    units: list[str]  # target units (2..16)
    spans: list[list[Span]]  # entity spans per target unit
    input_spans: list[Span] | None = None  # unit 1's; None: not tagged with the target (WikiPlots' lines)
    other_names: set[str] = field(default_factory=set)  # texts tagged with labels not anonymized (places...)


def other_names(doc, labels: set[str]) -> set[str]:
    return {ent.text for ent in doc.ents if ent.label_ not in labels}


def join_units(units: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """One text for NER and the character range of each unit inside it."""
    offsets, cursor = [], 0
    for unit in units:
        offsets.append((cursor, cursor + len(unit)))
        cursor += len(unit) + 1
    return " ".join(units), offsets


def spans_by_unit(doc, offsets: list[tuple[int, int]], labels: set[str]) -> list[list[Span]]:
    """Entity spans of `labels` falling wholly inside a unit, unit-relative offsets."""
    per_unit: list[list[Span]] = [[] for _ in offsets]
    index = 0
    for ent in doc.ents:
        if ent.label_ not in labels:
            continue
        while index < len(offsets) and offsets[index][1] < ent.end_char:
            index += 1
        if index == len(offsets):
            break
        start, _ = offsets[index]
        if ent.start_char >= start:  # spans crossing a unit boundary are dropped
            per_unit[index].append(Span(ent.start_char - start, ent.end_char - start, ent.text, ent.label_))
    return per_unit


def clean_units(lines: tuple[str, ...]) -> list[str]:
    """Pre-split units with markup residue removed; units left empty disappear."""
    return [u for u in (clean_markup(line) for line in lines) if u]


def sentence_offsets(doc, limit: int) -> list[tuple[int, int]]:
    """Character ranges of the first `limit` non-empty sentences."""
    out = []
    for sent in doc.sents:
        text = sent.text.strip()
        if text:
            start = sent.start_char + (len(sent.text) - len(sent.text.lstrip()))
            out.append((start, start + len(text)))
            if len(out) == limit:
                break
    return out
