"""Which entity a name mention is, within one story (`preprocess.mentions: resolve`).

A tagged span is an entity name; the tagger's label decides how names relate:

- PERSON with two or more name tokens ("Tom Quigley") is a person, known by its first
  and last name tokens: two full names are one person when both tokens agree ("John
  F. Kennedy" = "John Kennedy"). "Tom Quigley" and "Anna Quigley" stay two people.
- a one-token name ("Quigley", "Tom", any label: the tagger often calls a character
  ORG) is the person whose first name or surname it is when exactly one tagged person
  of the story has it. Several do: ambiguous, the span gets its own entity (a tagged
  span is always replaced, as in the paper). None does: its own entity ("Ash").
- ORG (several tokens, or one that names no person): the first ORG entity one of whose
  names holds it, or is held by it, as a whole-word sequence ("the Navy" / "Navy"):
  the paper's substring rule, made word-bounded so "Ash" stays out of "Ashley".

Titles ("Mr.", "Dr.") and possessives ("'s") are dropped from a name before it is
compared, except a woman's title before a lone surname: "Mrs. Gorry" is its own entity,
since a story's "Mrs. Gorry" is usually the wife or mother of its Gorry, not him.
`plain_names` says what to look for in untagged text: full names, and first
names and surnames that name exactly one person (AMBIGUOUS otherwise: left as text).
The whole story's tagged spans are read before any decision, so a surname resolves the
same way before and after the full name appears.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TITLES = frozenset(
    "Mr Mrs Ms Miss Mx Dr Sir Dame Lady Lord Professor Prof Captain Capt Detective Det Inspector "
    "Officer Sergeant Sgt Lieutenant Lt Colonel Col General Gen Major Judge Senator Agent Father "
    "Uncle Aunt Saint St King Queen Prince Princess Emperor Empress Duke Duchess".split()
)
WOMENS_TITLES = frozenset("Mrs Ms Miss Lady Dame Madame Mme".split())  # "Mrs. Gorry" is not Patrick Gorry
SUFFIXES = frozenset("Jr Sr II III IV".split())
# "Theramyt Biologics Private Limited" is "Theramyt" again later: the words a company drops
CORPORATE = frozenset("Inc Ltd Limited Private Pvt LLC Corp Corporation Co Company Group Holdings Biologics "
                      "Technologies Solutions Films Pictures Records Studios".split())
AMBIGUOUS = None  # a plain_names value: a short name several people share
PART = "PART"  # the label of a one-word tagged span that is part of a longer, untagged name
_POSSESSIVE = re.compile(r"(?:['’]s|['’])$")
_NAME_TOKEN = re.compile(r"[A-Z][\w'’-]*\w$")  # capitalised, not an initial ("F.")


def name_key(text: str) -> str:
    """`text` without a possessive, a leading "the" and leading titles: what is compared."""
    words = _POSSESSIVE.sub("", text.strip()).split()
    if words and words[0].lower() == "the":
        words = words[1:]
    while len(words) > 1 and words[-1].islower():  # the tagger's "YouTube of"
        words = words[:-1]
    while len(words) > 1 and words[0].rstrip(".") in TITLES and not _womans_surname(words):
        words = words[1:]
    return " ".join(words) or text


def _womans_surname(words: list[str]) -> bool:
    return len(words) == 2 and words[0].rstrip(".") in WOMENS_TITLES


_TITLE_BEFORE = re.compile(rf"(?<!\w)((?:{'|'.join(sorted(WOMENS_TITLES))})\.?)\s+$")


def title_length(name: str) -> int:
    """Characters of a woman's title (and its space) that open `name`; 0 without one."""
    words = name.split(" ")
    return len(words[0]) + 1 if _womans_surname(words) else 0


def with_title(unit: str, start: int, text: str) -> str:
    """`text`, with a woman's title written just before it in `unit` when it is one word:
    the tagger leaves the title out of the span ("Mrs. [Gorry]")."""
    title = _TITLE_BEFORE.search(unit, max(0, start - 8), start) if " " not in text.strip() else None
    return f"{title.group(1)} {text}" if title else text


_NEXT_CAPITAL = re.compile(r" [A-Z]")
_PREVIOUS_CAPITAL = re.compile(r"(?<=.)(?<![.!?:;\"“(] )(?<!^)\b(?P<word>[A-Z][\w'’-]*) $")


def in_longer_name(unit: str, start: int, end: int, covered: list[tuple[int, int]] = ()) -> bool:
    """A one-word name written next to another capitalised word outside the `covered`
    (tagged) spans ("Tom Hanks", "Han So Ran", "Quigley Industries"): a different,
    longer name, not this story's Tom or Han."""
    if " " in unit[start:end]:
        return False
    free = lambda i: all(not s <= i < e for s, e in covered)  # noqa: E731
    following = _NEXT_CAPITAL.match(unit, end)
    previous = _PREVIOUS_CAPITAL.search(unit, max(0, start - 40), start)
    return bool(following and free(end + 1)) or bool(
        previous and previous.group("word").rstrip(".") not in TITLES and free(previous.start("word")))


def _full_name(key: str) -> bool:
    """Two words or more, one of them a name: "Tom Quigley", "P. C. Pickard"."""
    return len(key.split()) >= 2 and bool(name_tokens(key)) and not _womans_surname(key.split())


def name_tokens(key: str) -> list[str]:
    """The tokens of a name a reader would call a first name or surname."""
    return [t for t in key.split() if _NAME_TOKEN.match(t) and t.rstrip(".") not in SUFFIXES and t not in TITLES]


@dataclass(eq=False)
class Entity:
    kind: str  # person | org | short (a one-token name, no full name known) | ambiguous
    names: list[str] = field(default_factory=list)  # keys of its tagged spans, first seen first
    first: str | None = None
    last: str | None = None


class StoryEntities:
    """The entities of one story, from all its tagged spans as (text, label) in text order."""

    def __init__(self, spans: list[tuple[str, str]], aliases: dict[str, tuple[str, str]] | None = None):
        """`aliases`: a span's text -> the (text, label) of the span it names again ("ECOSOC")."""
        self.by_name: dict[str, Entity] = {}  # a key seen tagged -> its entity
        self.by_short: dict[str, list[Entity]] = {}  # first name or surname -> people with it
        self.orgs: list[Entity] = []
        for text, label in spans:  # people with full names first: a surname may come before them
            key = name_key(text)
            if label == "PERSON" and _full_name(key):
                self._person(key)
        self.span_entity = {}
        for text, label in spans:
            of = (aliases or {}).get(text)
            entity = self._resolve(name_key(of[0]), of[1]) if of else self._resolve(name_key(text), label)
            self.span_entity[(text, label)] = self._name(name_key(text), entity) if of else entity

    def _person(self, key: str) -> None:
        tokens = name_tokens(key)
        first, last = (tokens[0] if len(tokens) > 1 else None), tokens[-1]  # "P. C. Pickard": a surname only
        person = next((p for p in self.by_short.get(last, []) if (p.first, p.last) == (first, last)), None)
        if person is None:
            person = Entity("person", first=first, last=last)
            for short in {first, last} - {None}:
                self.by_short.setdefault(short, []).append(person)
        self._name(key, person)

    def _name(self, key: str, entity: Entity) -> Entity:
        if key not in entity.names:
            entity.names.append(key)
        self.by_name.setdefault(key, entity)
        return entity

    def _resolve(self, key: str, label: str) -> Entity:
        if label == PART:  # "[Hyun]" of "Na Hyun": not Lee Ji Hyun, whatever she is called
            return self.by_name.get(key) or self._name(key, Entity("short"))
        if key in self.by_name:
            return self.by_name[key]
        people = self.by_short.get(key, []) if len(key.split()) == 1 else []
        if len(people) == 1:
            return people[0]
        if len(people) > 1:
            return self._name(key, Entity("ambiguous"))
        if label == "PERSON":
            return self._name(key, Entity("short" if len(key.split()) == 1 else "person"))
        return self._org(key)

    def _org(self, key: str) -> Entity:
        inside = re.compile(rf"(?<!\w){re.escape(key)}(?!\w)")
        for org in self.orgs:
            if any(inside.search(name) or re.search(rf"(?<!\w){re.escape(name)}(?!\w)", key) for name in org.names):
                return self._name(key, org)
        org = Entity("org")
        self.orgs.append(org)
        words = key.split()
        while len(words) > 1 and words[-1].rstrip(".") in CORPORATE:
            words = words[:-1]
        if len(words) < len(key.split()) and name_tokens(words[0]):
            self.by_name.setdefault(" ".join(words), org)  # looked for in plain text, not shown
        return self._name(key, org)

    def entity(self, text: str, label: str) -> Entity:
        return self.span_entity[(text, label)]

    def plain_names(self) -> dict[str, Entity | None]:
        """Strings that, untagged, are a mention: full names and unshared short names of
        people (AMBIGUOUS when shared), names of orgs and one-token names."""
        names: dict[str, Entity | None] = {}
        for short, people in self.by_short.items():
            names[short] = people[0] if len(people) == 1 else AMBIGUOUS
        for key, entity in self.by_name.items():
            names[key] = AMBIGUOUS if entity.kind == "ambiguous" else entity
        return names


_PAIR = re.compile(r"(?P<a>[A-Z][^&]*?)\s+(?:and|&)\s+(?P<b>[A-Z].*)$")
_LIST = re.compile(r"(?:the\s+)?(?P<a>[A-Z][^,]*?),\s+(?P<b>[A-Z][^,]*)$")  # the tagger's "Chatsworth, Spacey"
_OPEN_BRACKET = re.compile(r"(?P<a>[^()]*?[\w.])\s+\((?P<b>[A-Z][^()]*)$")  # the tagger's "Eva (Imogen Poots"


def split_pairs(start: int, text: str, label: str, people: set[str]) -> list[tuple[int, str]]:
    """A span naming two names as its two names, with their offsets: always a span that opens a
    bracket it does not close ("Eva (Imogen Poots": a character and her actress); "Harold and
    Vali", or two names the tagger ran together over a comma ("Cornell, Moog"), when it is a
    PERSON span, or another (the tagger's "Raja & Sandhya" ORG) when a side is a name or name
    word the story tags PERSON elsewhere ("Marks & Spencer" stays whole); "Sammy Davis, Jr."
    and "Acme, Inc." stay whole; any other span as itself."""
    bracket = _OPEN_BRACKET.match(text)
    if bracket:  # a span that opens a bracket it does not close holds a name and what the bracket credits
        return [(start + bracket.start(g), bracket.group(g)) for g in ("a", "b")]
    for pattern in (_PAIR, _LIST):
        pair = pattern.match(text)
        if pair is None or (pattern is _LIST and pair.group("b").rstrip(".") in SUFFIXES | CORPORATE):
            continue
        sides = {name_key(pair.group("a")), name_key(pair.group("b"))}
        in_names = pattern is _LIST and any(sides & set(name.split()) for name in people)
        if label == "PERSON" or people & sides or in_names:
            return [(start + pair.start(g), pair.group(g)) for g in ("a", "b")]
    return [(start, text)]


_GIVEN = re.compile(r"(?<![\w'’.-])(?P<word>[A-Z][a-z][\w'’-]*) $")


def given_name_start(unit: str, start: int, stop_words: set[str]) -> int | None:
    """Where a one-word name at `start` really begins when a given name the tagger left out is
    written just before it, mid-sentence ("co-valedictorian with Mare [Winningham]", "about
    Gaspard [Coriolis]"): the given name's offset, else None. A capitalised word that opens a
    sentence ("Later [Tom]") or is a title or a `stop_words` word (a place, a role) is none."""
    given = _GIVEN.search(unit, max(0, start - 40), start)
    if given is None or given.group("word") in stop_words or given.group("word").rstrip(".") in TITLES:
        return None
    before = unit[: given.start()].rstrip()
    if not before or before[-1] in ".!?:;\"“‘'—–":
        return None
    return given.start("word")


def reader_names(spans: list[tuple[str, str]]) -> set[str]:
    """What a reader counts as a name of the story: each tagged name, and the first name
    and surname of each tagged PERSON (possessives follow from word-bounded matching)."""
    names = set()
    for text, label in spans:
        key = name_key(text)
        names.add(key)
        tokens = name_tokens(key)
        if label == "PERSON" and _full_name(key):
            names.update((tokens[0], tokens[-1]))
    return names


def names_pattern(names) -> re.Pattern | None:
    """Any of `names`, whole words only, the longest first ("Ash Williams" before "Ash")."""
    names = [n for n in names if n]
    if not names:
        return None
    alternation = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternation})(?!\w)")
