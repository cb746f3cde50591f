"""Where a unit becomes placeholders: entity spans -> `<e0>`, `<e1>`, ...

Placeholders are numbered by first occurrence in the target. Which mentions are one
entity depends on `mode` (`preprocess.mentions`):

- `resolve` (default): people by name tokens, within the story (eric/data/coreference.py):
  "Tom Quigley" and "Anna Quigley" are two entities; "Quigley", "Quigley's", "Tom" and
  "Mr. Quigley" are Tom's when he is the story's only tagged Quigley / Tom. Untagged
  occurrences of a story's names get the placeholder too, before the first tagged one as
  well as after: numbering is decided after all mentions are known, so it stays by first
  occurrence. A short name several tagged people share stays text (`ambiguous`): which
  of them it means is the reader's inference, and a wrong guess merges two people.
- `paper` (the paper and the authors' code): a new entity string reuses the placeholder
  of the FIRST earlier entity string that contains it or is contained in it (case-
  sensitive substring), so "Ash" after "Ash Williams" is `<e0>` too, and so is any
  "Quigley" after the first full name ending in it. Only tagged spans are replaced.
- `exact`: `paper`, plus later untagged exact occurrences of a tagged string get its
  placeholder (`propagated`); earlier ones stay text (what `propagate_mentions: true` was).

Names left behind (`names_left`, the same count in every mode): occurrences, in the
final target, of a tagged name, or of the first name or surname of a tagged PERSON
(word-bounded, so possessives count), still plain text: what a reader would count.

Cap: at most `max_entities` distinct placeholders per story (the paper's 100).
Decision: a span that would need placeholder number `max_entities` or above is
left as plain text and counted (`over_cap_mentions`); the story is kept, since
dropping it would bias the corpus against the most entity-rich stories.

The way back, `deanonymize`: a target with its recorded mentions put back (references for
scoring, EntityWorld's named texts); a propagated mention records its surface text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from eric.data.coreference import (
    AMBIGUOUS, PART, StoryEntities, given_name_start, in_longer_name, name_key, names_pattern, reader_names, split_pairs,
    title_length, with_title,
)
from eric.data.name_cues import NOT_NAME_WORDS, recurring_names, unit_cues
from eric.data.schema import placeholder

MentionMode = Literal["resolve", "paper", "exact"]


@dataclass(frozen=True)
class Span:
    start: int  # character offsets within its unit
    end: int
    text: str
    label: str = "PERSON"  # the tagger's label (PERSON, ORG)


@dataclass
class Anonymized:
    units: list[str]
    unit_entities: list[list[str]]  # placeholders per unit, in text order, with repeats
    mentions: list[tuple[str, str]]  # (placeholder, surface text) in text order
    n_entities: int
    over_cap_mentions: int = 0
    propagated: int = 0  # plain-text occurrences given a placeholder
    names_left: int = 0  # occurrences of the story's names (and their short forms) still plain text
    ambiguous: int = 0  # of names_left: short names several tagged people share (resolve)
    ambiguous_names: set[str] = field(default_factory=set)


@dataclass
class PlaceholderTable:
    """Entity strings seen so far, in first-occurrence order, and their placeholders."""

    max_entities: int
    strings: list[tuple[str, str]] = field(default_factory=list)  # (string, placeholder)
    n_placeholders: int = 0

    def lookup(self, name: str) -> str | None:
        for known, tag in self.strings:
            if name in known or known in name:
                return tag
        return None

    def assign(self, name: str) -> str | None:
        """Placeholder for `name`, or None when a new one would exceed the cap."""
        tag = self.lookup(name)
        if tag is None:
            if self.n_placeholders >= self.max_entities:
                return None
            tag = placeholder(self.n_placeholders)
            self.n_placeholders += 1
        if all(known != name for known, _ in self.strings):
            self.strings.append((name, tag))
        return tag


def _gaps(replaced: list[tuple], length: int):
    """Character ranges of a unit outside its replaced spans (sorted by start)."""
    cursor = 0
    for start, end, *_ in replaced:
        yield cursor, start
        cursor = end
    yield cursor, length


def _plain_matches(units: list[str], tagged: list[list[tuple]], pattern: re.Pattern | None):
    """(unit index, match) for every word-bounded match of `pattern` outside tagged spans."""
    for index, (unit, found) in enumerate(zip(units, tagged)):
        for gap_start, gap_end in _gaps(sorted(found), len(unit)) if pattern else ():
            for match in pattern.finditer(unit, gap_start, gap_end):
                yield index, match


def _apply(units: list[str], replaced: list[list[tuple[int, int, str, str]]], out: Anonymized) -> None:
    """Write the units with (start, end, tag, surface) replaced; mentions in text order."""
    for unit, spans in zip(units, replaced):
        pieces, tags, cursor = [], [], 0
        for start, end, tag, text in sorted(spans):
            pieces += [unit[cursor:start], tag]
            cursor = end
            tags.append(tag)
            out.mentions.append((tag, text))
        pieces.append(unit[cursor:])
        out.units.append("".join(pieces))
        out.unit_entities.append(tags)


def _count_left(out: Anonymized, spans: list[list[Span]], ambiguous: set[str]) -> None:
    """`names_left`: the reader's count of names still plain text in the final units, the
    input's and the target's tagged names (the same in every mode)."""
    pattern = names_pattern(reader_names([(s.text, s.label) for unit in spans for s in unit]))
    for unit in out.units if pattern else ():
        for match in pattern.finditer(unit):
            out.names_left += 1
            out.ambiguous += match.group() in ambiguous


def anonymize(
    units: list[str], spans: list[list[Span]], max_entities: int, mode: MentionMode = "resolve",
    known: list[Span] = (), other_names: set[str] = frozenset(),
) -> Anonymized:
    """Replace entity spans in every unit; spans per unit must not overlap. `known`: the
    input's spans (unit 1, never replaced): names the story introduces before its target;
    `other_names`: texts the tagger gave another label (places...): never names here."""
    spans = spans[: len(units)]
    if mode == "resolve":
        out = _resolve(units, spans, max_entities, list(known), other_names)
    else:
        out = _paper(units, spans, max_entities, propagate=mode == "exact")
    _count_left(out, [list(known)] + spans, out.ambiguous_names)
    return out


def _resolve(units: list[str], tagged: list[list[Span]], max_entities: int, known: list[Span],
             other_names: set[str]) -> Anonymized:
    """Entities from all the story's names first, then numbering in text order (module docstring)."""
    spans, cued, aliases = _story_spans(units, tagged, known, other_names)
    names = [[_identity(unit, s, unit_spans) for s in unit_spans] for unit, unit_spans in zip(units, spans)]
    named = [s.text for unit_spans in spans for s in unit_spans] + [s.text for s in known] + list(other_names)
    recurring = recurring_names(units, {w for text in named for w in text.split()})
    story = StoryEntities([(s.text, s.label) for s in known] + [name for unit_names in names for name in unit_names]
                          + [(w, "PERSON") for w in sorted(recurring)], aliases)
    plain = story.plain_names()
    found = [[(s.start, s.end, story.entity(*name), s.text, (i, s.start) in cued)
              for s, name in zip(unit_spans, unit_names)] for i, (unit_spans, unit_names) in enumerate(zip(spans, names))]
    for index, match in _plain_matches(units, found, names_pattern(n for n, e in plain.items() if e is not AMBIGUOUS)):
        orgs = [f[:2] for f in found[index] if f[2].kind == "org"]  # "[Scuderia Corsa] Ferrari": two names
        if in_longer_name(units[index], match.start(), match.end(), orgs):
            continue
        start = match.start() + title_length(match.group())  # "Mrs. Gorry": the title stays text, as when tagged
        found[index].append((start, match.end(), plain[match.group()], match.group()[start - match.start():], True))
    out = Anonymized(units=[], unit_entities=[], mentions=[], n_entities=0)
    _apply(units, _numbered(found, max_entities, out), out)
    out.ambiguous_names = {name for name, entity in plain.items() if entity is AMBIGUOUS}
    return out


def _identity(unit: str, span: Span, unit_spans: list[Span]) -> tuple[str, str]:
    """(text, label) that decide a span's entity: "Mrs. Gorry" with its title; a one-word
    PERSON inside a longer name labelled PART (the tagger's "[Na] [Hyun]" is one name too)."""
    covered = [(s.start, s.end) for s in unit_spans if s.label != "PERSON" or s is span]
    if span.label == "PERSON" and in_longer_name(unit, span.start, span.end, covered):
        return span.text, PART
    return with_title(unit, span.start, span.text), span.label


def _story_spans(units: list[str], tagged: list[list[Span]], known: list[Span], other_names: set[str] = frozenset()):
    """The tagged spans with pairs split ("Harold and Vali"), a left-out given name joined
    ("Mare [Winningham]") and the text's cues added (eric/data/name_cues.py); the cues'
    (unit, start); acronym -> the name it abbreviates."""
    people = {name_key(s.text) for unit_spans in [known] + tagged for s in unit_spans if s.label == "PERSON"}
    spans = [[Span(start, start + len(text), text, s.label) for s in sorted(unit_spans, key=lambda s: s.start)
              for start, text in _sides(s, people, other_names)] for unit_spans in tagged]
    words = {w for name in people for w in name.split()}
    stop = NOT_NAME_WORDS | {w for name in other_names for w in name.split()}
    in_full_names = {w for name in people if len(name.split()) > 1 for w in name.split()}
    spans = [_with_given_names(unit, unit_spans, in_full_names, stop) for unit, unit_spans in zip(units, spans)]
    cues = [unit_cues(unit, [(s.start, s.end, s.text, s.label) for s in unit_spans], words)
            for unit, unit_spans in zip(units, spans)]
    aliases = {c.text: (c.alias_of, "ORG") for unit_cues_ in cues for c in unit_cues_ if c.alias_of}
    spans = [sorted(unit_spans + [Span(c.start, c.end, c.text, c.label) for c in unit_cues_], key=lambda s: s.start)
             for unit_spans, unit_cues_ in zip(spans, cues)]
    return spans, {(i, c.start) for i, unit_cues_ in enumerate(cues) for c in unit_cues_}, aliases


def _sides(span: Span, people: set[str], other_names: set[str]) -> list[tuple[int, str]]:
    """A span's names (coreference.split_pairs); of two, a side the story tags as something else
    ("Chatsworth" of "Chatsworth, Spacey", a town elsewhere) is text."""
    sides = split_pairs(span.start, span.text, span.label, people)
    return sides if len(sides) == 1 else [(start, text) for start, text in sides if text not in other_names]


def _with_given_names(unit: str, unit_spans: list[Span], in_full_names: set[str], stop: set[str]) -> list[Span]:
    """A unit's spans (sorted), a one-word PERSON span with the given name written just before it
    (coreference.given_name_start) unless its word is in another full name of the story (a second
    person would then share it, and it would turn ambiguous) or an earlier span covers the given name."""
    out = []
    for span in unit_spans:
        begin = None
        if span.label == "PERSON" and " " not in span.text and span.text not in in_full_names:
            begin = given_name_start(unit, span.start, stop)
        if begin is not None and all(earlier.end <= begin for earlier in out):
            span = Span(begin, span.end, unit[begin:span.end], span.label)
        out.append(span)
    return out


def _numbered(found: list[list[tuple]], max_entities: int, out: Anonymized) -> list[list[tuple[int, int, str, str]]]:
    """Placeholders by each entity's first occurrence; an entity past the cap stays text."""
    tags: dict = {}
    replaced = []
    for unit_found in found:
        kept = []
        for start, end, entity, text, untagged in sorted(unit_found, key=lambda f: f[0]):
            if entity not in tags and len(tags) < max_entities:
                tags[entity] = placeholder(len(tags))
            if entity not in tags:
                out.over_cap_mentions += not untagged
                continue
            out.propagated += untagged
            kept.append((start, end, tags[entity], text))
        replaced.append(kept)
    out.n_entities = len(tags)
    return replaced


def _paper(units: list[str], spans: list[list[Span]], max_entities: int, propagate: bool) -> Anonymized:
    """The authors' substring merge over tagged spans; `propagate`: later exact repeats too."""
    table = PlaceholderTable(max_entities)
    out = Anonymized(units=[], unit_entities=[], mentions=[], n_entities=0)
    tagged: list[list[tuple[int, int, str, str]]] = []  # per unit: (start, end, tag, text)
    first_tagged: dict[str, tuple[int, int]] = {}  # name -> (unit, start) of its first span
    for index, unit_spans in enumerate(spans):
        found = []
        for span in sorted(unit_spans, key=lambda s: s.start):
            tag = table.assign(span.text)
            if tag is None:
                out.over_cap_mentions += 1
                continue
            first_tagged.setdefault(span.text, (index, span.start))
            found.append((span.start, span.end, tag, span.text))
        tagged.append(found)
    replaced = [list(found) for found in tagged]
    if propagate:
        tag_of = dict(table.strings)
        for index, match in _plain_matches(units, tagged, names_pattern(first_tagged)):
            name = match.group()
            if first_tagged[name] < (index, match.start()):
                replaced[index].append((match.start(), match.end(), tag_of[name], name))
                out.propagated += 1
    _apply(units, replaced, out)
    out.n_entities = table.n_placeholders
    return out


PLACEHOLDER_PATTERN = re.compile(r"<e\d+>")


def deanonymize(target: str, mentions: list[dict]) -> str:
    """Put back the surface mentions: each placeholder occurrence takes the next
    mention recorded for it (mentions are stored in text order); none left: its last."""
    queues: dict[str, list[str]] = defaultdict(list)
    for m in mentions:
        queues[m["placeholder"]].append(m["mention"])
    used: dict[str, int] = defaultdict(int)

    def restore(match: re.Match) -> str:
        name = match.group(0)
        options = queues.get(name)
        if not options:
            return name
        mention = options[min(used[name], len(options) - 1)]
        used[name] += 1
        return mention

    return PLACEHOLDER_PATTERN.sub(restore, target)
