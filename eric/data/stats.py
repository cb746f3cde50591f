"""The paper's Table 1 figures per split, plus skip accounting (stats.json, a DVC metric).

Lengths count NLTK WordPunct tokens, as the paper does: input = unit 1, output =
the target units with their original names (before anonymization).
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


@dataclass
class SplitStats:
    examples: int = 0
    stage_two_examples: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    units: int = 0
    entities: int = 0

    def add(self, input_text: str, output_text: str, n_units: int, n_entities: int) -> None:
        self.examples += 1
        self.stage_two_examples += n_entities > 0
        self.input_tokens += count_tokens(input_text)
        self.output_tokens += count_tokens(output_text)
        self.units += n_units
        self.entities += n_entities

    def table_row(self) -> dict:
        n = max(self.examples, 1)
        return {
            "examples": self.examples,
            "stage_two_examples": self.stage_two_examples,
            "input_len": round(self.input_tokens / n, 1),
            "output_len": round(self.output_tokens / n, 1),
            "units": round(self.units / n, 1),
            "entities": round(self.entities / n, 1),
        }


@dataclass
class PreprocessStats:
    corpus: str
    splits: dict[str, SplitStats] = field(default_factory=lambda: {s: SplitStats() for s in SPLITS})
    skipped: dict[str, int] = field(default_factory=dict)
    over_cap_mentions: int = 0
    stories_over_cap: int = 0
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
            "seconds": round(self.seconds, 1),
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
        }
        for key, label in labels.items():
            lines.append(f"| {label} | " + " | ".join(str(rows[s][key]) for s in SPLITS) + " |")
        return "\n".join(lines)

    def summary(self) -> str:
        skipped = ", ".join(f"{k}={v}" for k, v in self.skipped.items()) or "none"
        return (
            f"{self.stories_in} stories in = {self.examples} examples out + "
            f"{sum(self.skipped.values())} skipped ({skipped}); "
            f"{self.over_cap_mentions} mentions over the entity cap; {self.seconds:.1f}s\n"
            + self.markdown_table()
        )
