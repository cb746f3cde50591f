"""Duplicate stories, skipped (counted `duplicate`) before the split.

The split hashes titles, so a story repeated under another id or title could land
in train and in test. A story is a duplicate when its normalized text (case-folded,
whitespace collapsed) was seen before: once on the text sent to spaCy (no NLP spent on
it), once on the example itself (input + target units), as two texts that differ only
after the units kept make the same example. A story is found by its content, not its
id: distinct stories that share an id (a corpus's numbering restarting, ten articles
exported with one id) are all kept, each later one under a derived id `<id>~2`, `<id>~3`
..., and counted as id collisions in stats.json. Only 16-byte digests are kept in memory.
"""

from __future__ import annotations

import hashlib


def _digest(parts: tuple[str, ...]) -> bytes:
    text = "\n".join(" ".join(part.split()).casefold() for part in parts)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class Deduper:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}  # id -> how many distinct stories used it
        self.texts: set[bytes] = set()
        self.examples: set[bytes] = set()
        self.id_collisions = 0

    def _seen(self, seen: set, key) -> bool:
        if key in seen:
            return True
        seen.add(key)
        return False

    def story(self, story_id: str, text: str) -> str | None:
        """None when this story's text repeats an earlier one; else the id to keep it under
        (its own, or a derived one when another story already has it)."""
        if self._seen(self.texts, _digest((text,))):
            return None
        uses = self.ids.get(story_id, 0)
        self.ids[story_id] = uses + 1
        if uses == 0:
            return story_id
        self.id_collisions += 1
        derived = f"{story_id}~{uses + 1}"
        while derived in self.ids:  # the corpus itself has an id of that form
            uses += 1
            derived = f"{story_id}~{uses + 1}"
        self.ids[derived] = 1
        return derived

    def example(self, *parts: str) -> bool:
        """True when an earlier story made the same example (unit 1 + target units)."""
        return self._seen(self.examples, _digest(parts))
