"""Discourse markers: the words that open a unit and signal how it relates to its neighbour.

The marker set is DisSent's 15 (Nie et al., 2019), from whose dependency patterns
DiscoDVT (Ji and Huang, EMNLP 2021) extracts its EDUs and relation labels; the
ERIC authors' WikiPlots EDUs come from DiscoDVT. DiscoDVT labels a relation by the
marker itself; `RELATION_CLASS` groups the markers into the four top-level PDTB
senses, each by the sense the marker usually signals (ambiguous ones: "while" is
mostly contrast, "as" mostly temporal, "since" either).

DiscoDVT's released code labels a pair of adjacent EDUs with one of 20 classes
(`DIRECTED_RELATIONS`): "none" (no marker links them; supervised like the others) or
one of its 10 markers with a direction, "12" when the marker opens the second unit
("He fell. | Then he rose.", "He fell | because he slipped.") and "21" when it opens
the first ("Because he slipped, | he fell."); "then21" is not a class (an unlisted
label counts as "none"). `directed_relation` reads these off two units' text.

`opening_marker` reads text only, so it cannot tell "As he leaves" (a marker) from
"As a child" (a preposition): the EDU segmenter (eric/data/edu.py) only ever opens a
unit with a marker it found in the parse, but a sentence-initial word is taken at
face value.
"""

from __future__ import annotations

import re

TEMPORAL, CONTINGENCY, COMPARISON, EXPANSION = "temporal", "contingency", "comparison", "expansion"

RELATION_CLASS: dict[str, str] = {
    "after": TEMPORAL,
    "before": TEMPORAL,
    "then": TEMPORAL,
    "when": TEMPORAL,
    "as": TEMPORAL,
    "because": CONTINGENCY,
    "so": CONTINGENCY,
    "if": CONTINGENCY,
    "but": COMPARISON,
    "although": COMPARISON,
    "though": COMPARISON,
    "still": COMPARISON,
    "while": COMPARISON,
    "and": EXPANSION,
    "also": EXPANSION,
}
MARKERS: tuple[str, ...] = tuple(sorted(RELATION_CLASS))

# DiscoDVT's own label set (cdjhz/DiscoDVT preprocess/encode_bpe.py:7-10), index 0 = "none";
# its 10 markers are those of its dependency patterns (preprocess/extract_discourse.py:14-48).
DIRECTED_MARKERS: tuple[str, ...] = (
    "after", "also", "although", "and", "as", "before", "so", "still", "because", "then",
)
NO_RELATION = "none"
DIRECTED_RELATIONS: tuple[str, ...] = (
    NO_RELATION,
    *(f"{m}{d}" for m in DIRECTED_MARKERS for d in ("12", "21") if f"{m}{d}" != "then21"),
)

# Words that may stand before a marker without changing it: "even though", "just as".
_INTENSIFIERS = frozenset({"even", "just", "only", "right", "shortly", "soon", "long"})
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")


def opening_marker(text: str) -> str | None:
    """The discourse marker (lower case) that opens `text`, or None.

    Leading punctuation is skipped (", but he stays" -> "but"), as is one intensifier
    before a marker ("even though" -> "though")."""
    words = [w.lower() for w in _WORD.findall(text[:64])[:2]]
    if not words:
        return None
    if not _starts_with_word(text, words[0]):
        return None
    if words[0] in RELATION_CLASS:
        return words[0]
    if len(words) == 2 and words[0] in _INTENSIFIERS and words[1] in RELATION_CLASS:
        return words[1]
    return None


def opening_relation(text: str) -> str | None:
    """The relation class of the marker opening `text` (see RELATION_CLASS), or None."""
    marker = opening_marker(text)
    return None if marker is None else RELATION_CLASS[marker]


def directed_relation(first: str, second: str) -> str:
    """DiscoDVT's directed label of two adjacent units (see DIRECTED_RELATIONS): "<m>12" if a
    marker m opens `second`, else "<m>21" if m opens `first` and `first` does not end its
    sentence (the marker clause comes first: "Because he slipped, | he fell."), else "none";
    a label outside the set (a marker DiscoDVT does not use, "then21") is "none"."""
    label = NO_RELATION
    opening = opening_marker(second)
    if opening is not None:
        label = f"{opening}12"
    else:
        opening = opening_marker(first)
        if opening is not None and not _ends_sentence(first):
            label = f"{opening}21"
    return label if label in DIRECTED_RELATIONS else NO_RELATION


def _ends_sentence(text: str) -> bool:
    return text.rstrip(" \t\n\"'”’)").endswith((".", "!", "?"))


def _starts_with_word(text: str, word: str) -> bool:
    """True if `word` is the first word of `text` (not glued to a symbol or digit: "so-called")."""
    stripped = text.lstrip(" \t\n,;:—–-\"'“‘(")
    rest = stripped[len(word) :]
    return stripped[: len(word)].lower() == word and not (rest[:1].isalnum() or rest[:1] in "-_")
