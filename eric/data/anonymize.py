"""Where a unit becomes placeholders: entity spans -> `<e0>`, `<e1>`, ...

Placeholders are numbered by first occurrence in the target. Merge rule (paper and
authors' code): a new entity string reuses the placeholder of the FIRST earlier
entity string that contains it or is contained in it (case-sensitive substring),
so "Ash" after "Ash Williams" is `<e0>` too. Only spans the tagger found are
replaced; an untagged later mention of a name stays text.

Cap: at most `max_entities` distinct placeholders per story (the paper's 100).
Decision: a span that would need placeholder number `max_entities` or above is
left as plain text and counted (`over_cap_mentions`); the story is kept, since
dropping it would bias the corpus against the most entity-rich stories.
"""

from __future__ import annotations

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


def anonymize(units: list[str], spans: list[list[Span]], max_entities: int) -> Anonymized:
    """Replace entity spans in every unit; spans per unit must not overlap."""
    table = PlaceholderTable(max_entities)
    out = Anonymized(units=[], unit_entities=[], mentions=[], n_entities=0)
    for unit, unit_spans in zip(units, spans):
        pieces, tags, cursor = [], [], 0
        for span in sorted(unit_spans, key=lambda s: s.start):
            tag = table.assign(span.text)
            if tag is None:
                out.over_cap_mentions += 1
                continue
            pieces += [unit[cursor : span.start], tag]
            cursor = span.end
            tags.append(tag)
            out.mentions.append((tag, span.text))
        pieces.append(unit[cursor:])
        out.units.append("".join(pieces))
        out.unit_entities.append(tags)
    out.n_entities = table.n_placeholders
    return out
