"""Merge step: put the stage-two mentions into the stage-one text.

Each placeholder occurrence takes the next mention generated for it. Fallbacks,
counted per occurrence: when its mentions run out, the placeholder reuses its last
one (`reused_last`, ~2.5% in the paper); when none was generated for it, a name
drawn from the training mentions (`random_name`, ~1.1%), kept for its later
occurrences so that one entity keeps one name.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

PLACEHOLDER = re.compile(r"<e\d+>")


def parse_mentions(stage_two: str) -> list[tuple[str, str]]:
    """`<e0> Ash Williams <e1> Linda` -> [("<e0>", "Ash Williams"), ("<e1>", "Linda")]."""
    pieces = PLACEHOLDER.split(stage_two)
    tags = PLACEHOLDER.findall(stage_two)
    pairs = [(tag, text.strip()) for tag, text in zip(tags, pieces[1:])]
    return [(tag, text) for tag, text in pairs if text]


@dataclass
class MergeResult:
    text: str
    fallbacks: Counter = field(default_factory=Counter)  # occurrences by kind


class NamePool:
    """Names to fall back on, drawn reproducibly from the training mentions."""

    def __init__(self, names: list[str], seed: int = 0):
        self.names = sorted(set(n for n in names if n)) or ["Alex"]
        self.rng = random.Random(seed)

    def draw(self) -> str:
        return self.rng.choice(self.names)


def merge_mentions(text: str, mentions: list[tuple[str, str]], pool: NamePool) -> MergeResult:
    queues: dict[str, deque[str]] = defaultdict(deque)
    for tag, mention in mentions:
        queues[tag].append(mention)
    last: dict[str, str] = {}
    result = MergeResult(text="")

    def fill(match: re.Match) -> str:
        tag = match.group(0)
        if queues[tag]:
            last[tag] = queues[tag].popleft()
            result.fallbacks["generated"] += 1
        elif tag in last:
            result.fallbacks["reused_last" if tag not in drawn else "random_name"] += 1
        else:
            last[tag] = pool.draw()
            drawn.add(tag)
            result.fallbacks["random_name"] += 1
        return last[tag]

    drawn: set[str] = set()
    result.text = PLACEHOLDER.sub(fill, text)
    return result
