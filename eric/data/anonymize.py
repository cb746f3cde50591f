"""Where a unit becomes placeholders: entity spans -> `<e0>`, `<e1>`, ...

Placeholders are numbered by first occurrence in the target. Merge rule (paper and
authors' code): a new entity string reuses the placeholder of the FIRST earlier
entity string that contains it or is contained in it (case-sensitive substring),
so "Ash" after "Ash Williams" is `<e0>` too. Only spans the tagger found are
replaced; an untagged later mention of a name stays text (the paper's behaviour).

Names left behind are counted (`names_left`): occurrences, in the plain text of the
target, of a name the tagger found somewhere in the story (exact string, word-
bounded). With `propagate`, such an occurrence AFTER the name's first tagged one
gets the name's placeholder too (`propagated`); earlier ones stay text, so that
placeholders keep their first-occurrence numbering.

Cap: at most `max_entities` distinct placeholders per story (the paper's 100).
Decision: a span that would need placeholder number `max_entities` or above is
left as plain text and counted (`over_cap_mentions`); the story is kept, since
dropping it would bias the corpus against the most entity-rich stories.

The way back, `deanonymize`: a target with its recorded mentions put back (references for
scoring, EntityWorld's named texts).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from eric.data.schema import placeholder


@dataclass(frozen=True)
class Span:
    start: int  # character offsets within its unit
    end: int
    text: str


@dataclass
class Anonymized:
    units: list[str]
    unit_entities: list[list[str]]  # placeholders per unit, in text order, with repeats
    mentions: list[tuple[str, str]]  # (placeholder, surface text) in text order
    n_entities: int
    over_cap_mentions: int = 0
    propagated: int = 0  # plain-text occurrences given a placeholder (propagate=True)
    names_left: int = 0  # occurrences of tagged names still plain text


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


def _names_pattern(names: list[str]) -> re.Pattern | None:
    """Any of `names`, whole words only, the longest first ("Ash Williams" before "Ash")."""
    if not names:
        return None
    alternation = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternation})(?!\w)")


def _gaps(replaced: list[tuple], length: int):
    """Character ranges of a unit outside its replaced spans (sorted by start)."""
    cursor = 0
    for start, end, *_ in replaced:
        yield cursor, start
        cursor = end
    yield cursor, length


def anonymize(
    units: list[str], spans: list[list[Span]], max_entities: int, propagate: bool = False
) -> Anonymized:
    """Replace entity spans in every unit; spans per unit must not overlap."""
    table = PlaceholderTable(max_entities)
    out = Anonymized(units=[], unit_entities=[], mentions=[], n_entities=0)
    tagged: list[list[tuple[int, int, str, str]]] = []  # per unit: (start, end, tag, text)
    first_tagged: dict[str, tuple[int, int]] = {}  # name -> (unit, start) of its first span
    for index, unit_spans in enumerate(spans[: len(units)]):
        found = []
        for span in sorted(unit_spans, key=lambda s: s.start):
            tag = table.assign(span.text)
            if tag is None:
                out.over_cap_mentions += 1
                continue
            first_tagged.setdefault(span.text, (index, span.start))
            found.append((span.start, span.end, tag, span.text))
        tagged.append(found)
    names = _names_pattern(list(first_tagged))
    tag_of = dict(table.strings)
    for index, (unit, found) in enumerate(zip(units, tagged)):
        replaced = list(found)
        for gap_start, gap_end in _gaps(found, len(unit)) if names else ():
            for match in names.finditer(unit, gap_start, gap_end):
                name = match.group()
                if propagate and first_tagged[name] < (index, match.start()):
                    replaced.append((match.start(), match.end(), tag_of[name], name))
                    out.propagated += 1
                else:
                    out.names_left += 1
        pieces, tags, cursor = [], [], 0
        for start, end, tag, text in sorted(replaced):
            pieces += [unit[cursor:start], tag]
            cursor = end
            tags.append(tag)
            out.mentions.append((tag, text))
        pieces.append(unit[cursor:])
        out.units.append("".join(pieces))
        out.unit_entities.append(tags)
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
