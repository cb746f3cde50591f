"""Elementary discourse units (EDUs): sentences split at clause boundaries of spaCy's parse.

The paper's WikiPlots units are DiscoDVT's EDUs: each sentence is split where a
clause opened by a discourse marker meets the rest, at most once per sentence,
at the most balanced such point (the authors' released texts show it: 99% of
their sentences have at most two units). Candidate boundaries, in a sentence's
main clause only (the root and the verbs coordinated with it):

  coordination  a verb conjoined to the main clause with a conjunction:
                "She leaves | but he stays."   ("fish and chips" is no clause)
  adverbial     a subordinate clause opened by a subordinator or wh-adverb, after
                the main clause ("He stays | because she asks.") or before it,
                the comma kept with it ("When the war ends, | Tom returns.")
  relative      a non-restrictive relative clause that ends the sentence:
                "He meets Anna, | who is a nurse."   ("the man who left" stays)

`rules`: "discodvt" (the paper's) keeps boundaries opened by a discourse marker
(eric/data/discourse.py) and the most balanced one per sentence; "clauses" keeps
every boundary, as an RST-style segmenter would. Either way a split never leaves
a unit of fewer than `min_words` words: short fragments stay attached.
"""

from __future__ import annotations

from typing import Literal

from spacy.tokens import Doc, Span, Token

from eric.data.discourse import RELATION_CLASS

Rules = Literal["discodvt", "clauses"]

_VERBAL = {"VERB", "AUX"}
_WH = {"WDT", "WP", "WP$", "WRB"}
_NOT_SUBORDINATORS = {"that", "than", "whether"}  # complement and comparative clauses


def presplit_doc(nlp, units: list[str] | tuple[str, ...]) -> Doc:
    """A tokenized Doc of `units` joined by spaces, each unit exactly one sentence:
    the parser respects preset sentence starts (True and False alike)."""
    units = [u.strip() for u in units]
    doc = nlp.make_doc(" ".join(units))
    starts, cursor = set(), 0
    for unit in units:
        starts.add(cursor)
        cursor += len(unit) + 1
    for token in doc:
        token.is_sent_start = token.idx in starts
    return doc


def unit_offsets(doc: Doc, limit: int, rules: Rules = "discodvt", min_words: int = 3,
                 drop_last_sentence: bool = False) -> list[tuple[int, int]]:
    """Character ranges of the first `limit` EDUs of `doc`; `drop_last_sentence` leaves
    out the final sentence (cut by a character budget)."""
    sents = list(doc.sents)
    if drop_last_sentence:
        sents = sents[:-1]
    out: list[tuple[int, int]] = []
    for sent in sents:
        out.extend(edu_ranges(sent, rules, min_words))
        if len(out) >= limit:
            break
    return out[:limit]


def edu_ranges(sent: Span, rules: Rules = "discodvt", min_words: int = 3) -> list[tuple[int, int]]:
    """Character ranges of the EDUs of one sentence, whitespace trimmed; empty if blank."""
    doc = sent.doc
    cuts = _select(sent, candidates(sent, rules), rules, min_words)
    edges = [sent.start, *cuts, sent.end]
    out = []
    for first, stop in zip(edges, edges[1:]):
        start, end = doc[first].idx, doc[stop - 1].idx + len(doc[stop - 1])
        text = doc.text[start:end]
        lead = len(text) - len(text.lstrip())
        if text.strip():
            out.append((start + lead, start + len(text.rstrip())))
    return out


def candidates(sent: Span, rules: Rules = "clauses") -> list[tuple[int, str]]:
    """(token index where a new EDU starts, its discourse marker or wh-word) per rule found,
    for "discodvt" only those whose marker is in DiscoDVT's list."""
    found = {}
    for token in sent:
        for rule in (_coordination, _adverbial, _relative):
            hit = rule(token, sent)
            if hit is not None:
                found.setdefault(hit[0], hit[1])
    out = sorted(found.items())
    if rules == "discodvt":
        out = [(i, word) for i, word in out if word in RELATION_CLASS]
    return out


def _select(sent: Span, found: list[tuple[int, str]], rules: Rules, min_words: int) -> list[int]:
    """Boundaries kept: none leaving a unit under `min_words` words; for "discodvt"
    the single most balanced one (earliest on a tie)."""
    words = _word_prefix(sent)  # words[k] = words in sent[:k]
    total = words[-1]
    kept: list[int] = []
    for index, _ in found:
        k = index - sent.start
        if k <= 0 or total - words[k] < min_words:
            continue
        if words[k] - (words[kept[-1] - sent.start] if kept else 0) >= min_words:
            kept.append(index)
    if rules == "discodvt" and kept:
        return [min(kept, key=lambda i: (abs(total - 2 * words[i - sent.start]), i))]
    return kept


def _word_prefix(sent: Span) -> list[int]:
    counts = [0]
    for token in sent:
        counts.append(counts[-1] + (not (token.is_punct or token.is_space)))
    return counts


def _in_main_clause(token: Token, through: tuple[str, ...] = ("conj",)) -> bool:
    """The sentence root, or a verb linked to it by a chain of `through` arcs (conj:
    coordinated with it; xcomp: its open complement, "refuses to leave")."""
    while token.dep_ in through and token.head is not token:
        token = token.head
    return token.dep_ == "ROOT"


def _coordination(token: Token, sent: Span) -> tuple[int, str] | None:
    """"He runs | and she hides": a verbal conj of the main clause, split at its conjunction."""
    head = token.head
    if token.dep_ != "conj" or token.pos_ not in _VERBAL or head.pos_ not in _VERBAL:
        return None
    if not _in_main_clause(head):
        return None
    ccs = [c for c in head.children if c.dep_ == "cc" and head.i < c.i < token.i]
    ccs += [c for c in token.children if c.dep_ == "cc" and c.i < token.i]
    if not ccs:
        return None
    cc = max(ccs, key=lambda c: c.i)  # the conjunction nearest the conjunct
    return cc.i, cc.lower_


def _adverbial(token: Token, sent: Span) -> tuple[int, str] | None:
    """A subordinate clause of the main clause opened by a subordinator or wh-adverb."""
    if token.dep_ != "advcl" or not _in_main_clause(token.head, ("conj", "xcomp")):
        return None
    left, right = token.left_edge.i, token.right_edge.i
    markers = [
        c for c in token.children
        if c.i <= left + 1 and (c.dep_ == "mark" or (c.dep_ == "advmod" and c.tag_ == "WRB"))
    ]
    if not markers or markers[0].lower_ in _NOT_SUBORDINATORS:
        return None
    if left > token.head.i:  # after the main clause: the marker opens the unit
        return left, markers[0].lower_
    after = right + 1
    while after < sent.end and sent.doc[after].is_punct:
        after += 1  # the comma closing a fronted clause stays with it
    if after >= sent.end or after > token.head.i:
        return None
    return after, markers[0].lower_  # the marker opens the unit before the boundary


def _relative(token: Token, sent: Span) -> tuple[int, str] | None:
    """"He meets Anna, | who is a nurse.": a comma-set wh-relative that ends the sentence."""
    if token.dep_ != "relcl":
        return None
    doc, left = sent.doc, token.left_edge.i
    last_word = max((t.i for t in sent if not t.is_punct), default=sent.start)
    if left <= sent.start or token.right_edge.i < last_word:
        return None
    if doc[left - 1].text != "," or doc[left].tag_ not in _WH or doc[left].lower_ == "that":
        return None
    return left, doc[left].lower_
