"""The paper's Table 1 figures per split, plus skip accounting (stats.json, a DVC metric).

Lengths count NLTK WordPunct tokens, as the paper does: input = unit 1, output =
the target units with their original names (before anonymization).

Mention coverage, per split (counts, not means): `mentions` replaced by a placeholder
(`propagated` of them untagged occurrences, by `preprocess.mentions`), and `names_left`,
the occurrences still plain text in its target of a story's tagged names and of its
tagged people's first names and surnames (`ambiguous` of them: short names several
people share); `name_coverage` = mentions / (mentions + names_left), the share a reader
finds anonymized.

`names_left` is a lower bound: it cannot see a name the tagger never tagged. Beside it,
`capitalized_left` (per split and in total) is an upper-bound proxy: the words of the
anonymized target still written capitalised mid-sentence (not a unit's first word, not
after . ! ? or an opening quote, not a placeholder, not in `NOT_NAME_WORDS`: I, days,
months, the titles written before names). It counts every name left as text, those in
`names_left` and those the tagger missed, and also places, nationalities and other
proper nouns, which stay text by design.

`tagger_check` counts the targets' words before anonymization: `words`, `cased` (Word-
cased, sentence-initial ones too), `capitalized` (mid-sentence, as above), `tagged` (of
those, inside a tagged PERSON/ORG) and `stop_words` (in the tagger language's stop list).
Its `warnings`, printed once by the preprocess stage, name text the tagger was not made
for: few capitalised words tagged (`MIN_TAGGED_SHARE`: all-caps text, a language whose
names the model misses), almost no Word-cased words (`MIN_CASED_SHARE`: lower- or upper-
cased text) or few of its language's stop words (`MIN_STOP_SHARE`: another language,
whose capitalised nouns the tagger turns into names).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nltk.tokenize import WordPunctTokenizer

from eric.data.coreference import TITLES
from eric.data.schema import SPLITS

_TOKENIZER = WordPunctTokenizer()

# Capitalised mid-sentence for a reason other than naming someone: the pronoun, days,
# months and the titles before names (coreference.TITLES: Mr, Dr, King...; the name after
# the title is counted). Kept short: anything else capitalised counts.
NOT_NAME_WORDS = TITLES | frozenset(
    "I Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June "
    "July August September October November December".split()
)
# The tagger check (tagger_check), judged on MIN_WORDS words or more (the tagged share on
# MIN_CAPITALIZED capitalised words or more: a text may name few). On the embedded
# WikiPlots corpus the tagger tags 70% of the mid-sentence capitalised words (the rest:
# places, nationalities, titles of works), 8% of all-caps text's; 16% of the words are
# Word-cased (each sentence opens with one), none in lower- or upper-cased text; 48% are
# English stop words (none of the first 300 stories under 35%), 3% of a German plot's
# (whose nouns the tagger tags as names: 73% of its capitalised words, the signal above
# cannot see it).
MIN_TAGGED_SHARE = 0.25
MIN_CASED_SHARE = 0.01
MIN_STOP_SHARE = 0.2
MIN_WORDS = 1000
MIN_CAPITALIZED = 100
# a full stop after these (or after an initial) ends no sentence
_ABBREVIATIONS = frozenset("Mr Mrs Ms Mx Dr St Jr Sr Prof Capt Det Sgt Lt Col Gen Mme".split())
_SENTENCE_END = frozenset(".!?")
_OPENING_QUOTES = frozenset("\"“‘'")


def count_tokens(text: str) -> int:
    return len(_TOKENIZER.tokenize(text))


@dataclass
class Capitals:
    """The word counts of `tagger_check` (module docstring)."""

    words: int = 0
    cased: int = 0
    capitalized: int = 0
    tagged: int = 0
    stop_words: int = 0

    def add(self, other: Capitals) -> None:
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)


def capitals(unit: str, spans=(), stop_words: frozenset[str] = frozenset()) -> Capitals:
    """The counts of one unit; `spans`: its tagged names (anything with .start and .end)."""
    out, initial, previous = Capitals(), True, ""
    for start, end in _TOKENIZER.span_tokenize(unit):
        token = unit[start:end]
        if not token[0].isalnum():  # punctuation: a full stop after a title or an initial ends nothing
            ends = bool(_SENTENCE_END & set(token)) and not (previous in _ABBREVIATIONS or len(previous) == 1)
            opens = token[-1] in _OPENING_QUOTES and end < len(unit) and unit[end].isalnum()
            initial = initial or ends or opens
            continue
        if token[0].isalpha():
            out.words += 1
            out.cased += token[0].isupper() and not token.isupper()
            out.stop_words += token.lower() in stop_words
            if token[0].isupper() and not initial and token not in NOT_NAME_WORDS:
                out.capitalized += 1
                out.tagged += any(s.start <= start and end <= s.end for s in spans)
        initial, previous = False, token
    return out


def name_coverage(replaced: int, left: int) -> float | None:
    """The share of name mentions anonymized; None with no names at all."""
    return round(replaced / (replaced + left), 4) if replaced + left else None


@dataclass
class SplitStats:
    examples: int = 0
    stage_two_examples: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    units: int = 0
    entities: int = 0
    mentions: int = 0
    propagated: int = 0
    names_left: int = 0
    ambiguous: int = 0
    capitalized_left: int = 0  # capitalised words left in the anonymized targets (module docstring)
    before: Capitals = field(default_factory=Capitals)  # the targets' words before anonymization

    def add(
        self, input_text: str, output_text: str, n_units: int, n_entities: int,
        mentions: int = 0, propagated: int = 0, names_left: int = 0, ambiguous: int = 0,
    ) -> None:
        self.examples += 1
        self.stage_two_examples += n_entities > 0
        self.input_tokens += count_tokens(input_text)
        self.output_tokens += count_tokens(output_text)
        self.units += n_units
        self.entities += n_entities
        self.mentions += mentions
        self.propagated += propagated
        self.names_left += names_left
        self.ambiguous += ambiguous

    def table_row(self) -> dict:
        n = max(self.examples, 1)
        return {
            "examples": self.examples,
            "stage_two_examples": self.stage_two_examples,
            "input_len": round(self.input_tokens / n, 1),
            "output_len": round(self.output_tokens / n, 1),
            "units": round(self.units / n, 1),
            "entities": round(self.entities / n, 1),
            "mentions": self.mentions,
            "propagated": self.propagated,
            "names_left": self.names_left,
            "ambiguous": self.ambiguous,
            "name_coverage": name_coverage(self.mentions, self.names_left),
            "capitalized_left": self.capitalized_left,
        }


@dataclass
class PreprocessStats:
    corpus: str
    splits: dict[str, SplitStats] = field(default_factory=lambda: {s: SplitStats() for s in SPLITS})
    skipped: dict[str, int] = field(default_factory=dict)
    over_cap_mentions: int = 0
    stories_over_cap: int = 0
    mentions_mode: str = "resolve"  # preprocess.mentions
    id_collisions: int = 0  # distinct stories that shared an id, kept under a derived one (eric/data/dedupe.py)
    seconds: float = 0.0
    stop_words: frozenset[str] = frozenset()  # the tagger language's (set by the pipeline); none: no language check

    @property
    def examples(self) -> int:
        return sum(s.examples for s in self.splits.values())

    @property
    def stories_in(self) -> int:
        return self.examples + sum(self.skipped.values())

    def add_capitals(self, split: str, units: list[str], spans: list[list], anonymized: list[str]) -> None:
        """A target's words before anonymization, with its tagged `spans` per unit (the tagger
        check), and its capitalised words left in the `anonymized` units."""
        counts = self.splits[split]
        for unit, unit_spans in zip(units, spans):
            counts.before.add(capitals(unit, unit_spans, self.stop_words))
        counts.capitalized_left += sum(capitals(unit).capitalized for unit in anonymized)

    def total(self, key: str) -> int:
        return sum(getattr(s, key) for s in self.splits.values())

    def capitals(self) -> Capitals:
        out = Capitals()
        for s in self.splits.values():
            out.add(s.before)
        return out

    def warnings(self) -> list[str]:
        """One line per sign that the text is not what the tagger reads (module docstring)."""
        c, out = self.capitals(), []
        if c.words < MIN_WORDS:
            return out
        where = f"{self.corpus}'s targets"
        if c.capitalized >= MIN_CAPITALIZED and c.tagged < MIN_TAGGED_SHARE * c.capitalized:
            out.append(f"{where}: the tagger tagged {c.tagged} of {c.capitalized} capitalised mid-sentence words "
                       f"as names (under {MIN_TAGGED_SHARE:.0%}; missed names stay text): is the text in "
                       f"preprocess.spacy_model's language, and normally cased?")
        if c.cased < MIN_CASED_SHARE * c.words:
            out.append(f"{where}: {c.cased} of {c.words} words open with a capital followed by lower case (under "
                       f"{MIN_CASED_SHARE:.0%}): is the text lower- or upper-cased? The tagger (preprocess.spacy_model) "
                       f"finds names by their capitals")
        if self.stop_words and c.stop_words < MIN_STOP_SHARE * c.words:
            out.append(f"{where}: {c.stop_words} of {c.words} words are stop words of preprocess.spacy_model's "
                       f"language (under {MIN_STOP_SHARE:.0%}): is the text in another language? Its tagger may "
                       f"turn common capitalised words into placeholders")
        return out

    def to_dict(self) -> dict:
        return {
            "corpus": self.corpus,
            "stories_in": self.stories_in,
            "examples_out": self.examples,
            "skipped_total": sum(self.skipped.values()),
            "skipped": self.skipped,
            "over_cap_mentions": self.over_cap_mentions,
            "stories_over_cap": self.stories_over_cap,
            "mentions_mode": self.mentions_mode,
            "name_coverage": name_coverage(self.total("mentions"), self.total("names_left")),
            "names_left": self.total("names_left"),  # a lower bound: names the tagger tagged
            "capitalized_left": self.total("capitalized_left"),  # an upper-bound proxy (module docstring)
            "tagger_check": {**asdict(self.capitals()), "warnings": self.warnings()},
            "id_collisions": self.id_collisions,  # not `seconds`: printed (summary), never in the output
            **{split: s.table_row() for split, s in self.splits.items()},
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    def markdown_table(self) -> str:
        rows = {split: s.table_row() for split, s in self.splits.items()}
        lines = [f"| {self.corpus} | " + " | ".join(SPLITS) + " |", "|---|" + "---:|" * len(SPLITS)]
        labels = {
            "examples": "#Example",
            "input_len": "Ipt Len.",
            "output_len": "Opt Len.",
            "units": "Avg. #Units",
            "entities": "Avg. #Ent.",
            "mentions": "Mentions replaced",
            "names_left": "Names left as text",
            "name_coverage": "Name coverage",
            "capitalized_left": "Capitalised words left",
        }
        for key, label in labels.items():
            lines.append(f"| {label} | " + " | ".join(str(rows[s][key]) for s in SPLITS) + " |")
        return "\n".join(lines)

    def summary(self) -> str:
        skipped = ", ".join(f"{k}={v}" for k, v in self.skipped.items()) or "none"
        keys = ("mentions", "propagated", "names_left", "ambiguous", "capitalized_left")
        total = {key: sum(getattr(s, key) for s in self.splits.values()) for key in keys}
        coverage = name_coverage(total["mentions"], total["names_left"])
        return (
            f"{self.stories_in} stories in = {self.examples} examples out + "
            f"{sum(self.skipped.values())} skipped ({skipped}); "
            f"{self.over_cap_mentions} mentions over the entity cap; "
            f"{total['mentions']} mentions replaced ({total['propagated']} by propagation), "
            f"{total['names_left']} names left as text ({total['ambiguous']} ambiguous; "
            f"{total['capitalized_left']} capitalised words left, names the tagger missed among them), name coverage "
            f"{'–' if coverage is None else f'{coverage:.1%}'} ({self.mentions_mode} mode); {self.seconds:.1f}s\n"
            + self.markdown_table()
        )
