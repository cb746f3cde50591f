"""The paper's Table 1 figures per split, plus skip accounting (stats.json, a DVC metric).

Lengths count NLTK WordPunct tokens, as the paper does: input = unit 1, output =
the target units with their original names (before anonymization).

Mention coverage, per split (counts, not means): `mentions` replaced by a placeholder
(`propagated` of them untagged occurrences, by `preprocess.mentions`), and `names_left`,
the occurrences still plain text in its target of a story's tagged names and of its
tagged people's first names and surnames (`ambiguous` of them: short names several
people share); `name_coverage` = mentions / (mentions + names_left), the share a reader
finds anonymized.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from nltk.tokenize import WordPunctTokenizer

from eric.data.schema import SPLITS

_TOKENIZER = WordPunctTokenizer()


def count_tokens(text: str) -> int:
    return len(_TOKENIZER.tokenize(text))


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

    @property
    def examples(self) -> int:
        return sum(s.examples for s in self.splits.values())

    @property
    def stories_in(self) -> int:
        return self.examples + sum(self.skipped.values())

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
            "name_coverage": name_coverage(*(sum(getattr(s, k) for s in self.splits.values()) for k in ("mentions", "names_left"))),
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
        }
        for key, label in labels.items():
            lines.append(f"| {label} | " + " | ".join(str(rows[s][key]) for s in SPLITS) + " |")
        return "\n".join(lines)

    def summary(self) -> str:
        skipped = ", ".join(f"{k}={v}" for k, v in self.skipped.items()) or "none"
        keys = ("mentions", "propagated", "names_left", "ambiguous")
        total = {key: sum(getattr(s, key) for s in self.splits.values()) for key in keys}
        coverage = name_coverage(total["mentions"], total["names_left"])
        return (
            f"{self.stories_in} stories in = {self.examples} examples out + "
            f"{sum(self.skipped.values())} skipped ({skipped}); "
            f"{self.over_cap_mentions} mentions over the entity cap; "
            f"{total['mentions']} mentions replaced ({total['propagated']} by propagation), "
            f"{total['names_left']} names left as text ({total['ambiguous']} ambiguous), name coverage "
            f"{'–' if coverage is None else f'{coverage:.1%}'} ({self.mentions_mode} mode); {self.seconds:.1f}s\n"
            + self.markdown_table()
        )
