"""Names the tagger missed, found by cues in the text (`preprocess.mentions: resolve` only).

Each cue is narrow, so that what it finds is a name a reader would anonymize:

- "named Agnes", "nicknamed "Cosmo"": the capitalised words after it are a person;
- "Gowri (Sridevi)", "Nichole (Noelle Adam)": capitalised words in brackets right after
  a tagged PERSON are a person too, and so are the words just before brackets holding a
  tagged PERSON (plot summaries credit the actor so);
- "Economic and Social Council (ECOSOC)", "... ORGANIZATION (PICAO)": an acronym in
  brackets is an organisation, the tagged ORG just before it when there is one;
- "S.H.I.E.L.D.": a dotted acronym of four letters or more is an organisation
  ("U.S." and "U.S.A." are places, so shorter ones are left);
- "Audio Engineering Society": capitalised words ending in an organisation's head noun;
- a capitalised word that the tagger never found, written mid-sentence at least three
  times in the target, never in lower case in the story and never tagged with another
  label (a place, a nationality): a recurring name ("Nichole", missed eighteen times).

A cue's span joins the tagged ones (`Cue.alias_of`: the tagged text it names again), and
its name is then looked for elsewhere in the story like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eric.data.coreference import TITLES

_CAP = r"[A-Z][\w'’-]*"
_NAMED = re.compile(rf"(?<!\w)(?:named|nicknamed|nickname)\s+[\"“']?(?P<name>{_CAP}(?:\s+{_CAP})*)")
_BRACKETED = re.compile(rf"\s*\((?P<name>{_CAP}(?:\s+{_CAP})*)\)")
# "Nichole (Noelle Adam)": a role, then the actor in brackets
_CREDITED = re.compile(rf"(?P<name>{_CAP}(?:\s+{_CAP})*)\s*\((?P<actor>{_CAP}(?:\s+{_CAP})*)\)")
_ACRONYM = re.compile(r"\((?P<name>[A-Z]{3,})\)")
_DOTTED = re.compile(r"(?<!\w)(?P<name>(?:[A-Z]\.){4,})")
ORG_HEADS = (
    "Society Association Council University College Academy Institute Foundation Board Agency Commission "
    "Committee Corporation Company Organization Organisation Federation League Union Party Bureau Ministry "
    "School Network Records Studios Club Press Bank Orchestra Laboratory Laboratories Industries Entertainment "
    "Productions Airlines"
).split()
_HEADS = "|".join(ORG_HEADS + [h.upper() for h in ORG_HEADS])
_ORG = re.compile(rf"(?<!\w)(?P<name>{_CAP}(?:\s+(?:(?:of|and|for|the)\s+)?{_CAP})*?\s+(?:{_HEADS}))(?!\w)")
LEADING_WORDS = "The A An At In On By For From With To Of And But After Before During When While".split()
_LEADING = re.compile(rf"(?:(?:{'|'.join(LEADING_WORDS)})\s+)+")
_NOT_NAMES = frozenset("Best Player Chairman CEO President Director Coach Manager Head Chief Vice Captain".split())


@dataclass(frozen=True)
class Cue:
    start: int
    end: int
    text: str
    label: str
    alias_of: str | None = None  # the tagged span's text this one names again


def _free(start: int, end: int, taken: list[tuple[int, int]]) -> bool:
    return all(end <= s or start >= e for s, e in taken)


def unit_cues(unit: str, tagged: list[tuple[int, int, str, str]], people: set[str] = frozenset()) -> list[Cue]:
    """Cue spans of one unit, given its tagged (start, end, text, label) spans and the words
    of the story's PERSON names; no two overlap."""
    taken = [(s, e) for s, e, _, _ in tagged]
    found: list[Cue] = []

    def add(cue: Cue) -> None:
        if _free(cue.start, cue.end, taken):
            found.append(cue)
            taken.append((cue.start, cue.end))

    for m in _ORG.finditer(unit):
        leading = _LEADING.match(m.group("name"))
        start = m.start("name") + (len(leading.group(0)) if leading else 0)
        if len(unit[start:m.end("name")].split()) >= 2:  # "the Society" alone is no name
            add(Cue(start, m.end("name"), unit[start:m.end("name")], "ORG"))
    anchors = tagged + [(c.start, c.end, c.text, c.label) for c in found]
    for start, end, text, label in anchors:  # brackets right after a name
        acronym, credit = _ACRONYM.match(unit, _skip_space(unit, end)), _BRACKETED.match(unit, end)
        if acronym and label == "ORG":
            add(Cue(acronym.start("name"), acronym.end("name"), acronym.group("name"), "ORG", text))
        elif credit and label == "PERSON" and not credit.group("name").isupper():
            add(Cue(credit.start("name"), credit.end("name"), credit.group("name"), "PERSON"))
    for role in _CREDITED.finditer(unit):  # a role credited to someone the story names as a person
        if people & set(role.group("actor").split()):
            leading = _LEADING.match(role.group("name"))
            begin = role.start("name") + (len(leading.group(0)) if leading else 0)
            if begin < role.end("name"):
                add(Cue(begin, role.end("name"), unit[begin:role.end("name")], "PERSON"))
    for pattern, label in ((_NAMED, "PERSON"), (_ACRONYM, "ORG"), (_DOTTED, "ORG")):
        for m in pattern.finditer(unit):
            if not _NOT_NAMES & set(m.group("name").split()):
                add(Cue(m.start("name"), m.end("name"), m.group("name"), label))
    return sorted(found, key=lambda c: c.start)


RECURRING = 3  # mid-sentence occurrences that make an untagged capitalised word a name
_WORD = re.compile(r"(?<![\w'’-])[A-Z][a-z]{2,}(?![\w'’-])")
_NOT_RECURRING = _NOT_NAMES | TITLES | frozenset(
    "Director Professor Doctor Father Mother Uncle Aunt Sister Brother Prime Minister The God Christmas Easter "
    "Earth Heaven Hell Internet Monday Tuesday Wednesday Thursday Friday Saturday Sunday "
    "January February March April May June July August September October November December".split()
)


# capitalised words that open phrases or name roles, times and holidays: never a given name either
NOT_NAME_WORDS = _NOT_RECURRING | frozenset(LEADING_WORDS) | frozenset(
    "Private Corporal Sheriff Deputy Pope Reverend Nurse Commander Admiral Marshal Governor Mayor Pastor Bishop "
    "Cardinal Chancellor Young Old Little Big Misses Messrs".split()
)


def recurring_names(units: list[str], not_names: set[str]) -> set[str]:
    """Untagged capitalised words used as names in `units` (module docstring); `not_names`:
    the story's words that are names already, or tagged with another label."""
    lower = {w for unit in units for w in re.findall(r"\b[a-z]+\b", unit)}
    counts: dict[str, int] = {}
    for unit in units:
        for m in _WORD.finditer(unit):
            before, after = unit[: m.start()].rstrip(), unit[m.end():].lstrip(" .")
            mid_sentence = before and before[-1] not in ".!?:;\"“‘'(—–-"  # not capitalised by its position
            # not in a title's run ("Get Me Out of Here!")
            alone = not re.search(r"[A-Z]\w*$", before) and not after[:1].isupper() and after[:1] not in "!?"
            if mid_sentence and alone:
                counts[m.group()] = counts.get(m.group(), 0) + 1
    return {w for w, n in counts.items()
            if n >= RECURRING and w.lower() not in lower and w not in not_names and w not in _NOT_RECURRING}


def _skip_space(unit: str, index: int) -> int:
    while index < len(unit) and unit[index] == " ":
        index += 1
    return index
