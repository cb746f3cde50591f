"""Duplicate stories, skipped (counted `duplicate`) before the split.

The split hashes titles, so a story repeated under another id or title could land
in train and in test. A story is a duplicate when its id was seen before, or its
normalized text (case-folded, whitespace collapsed) was: once on the text sent to
spaCy (no NLP spent on it), once on the example itself (input + target units), as
two texts that differ only after the units kept make the same example. Only 16-byte
digests are kept in memory.
"""

from __future__ import annotations

import hashlib


def _digest(parts: tuple[str, ...]) -> bytes:
    text = "\n".join(" ".join(part.split()).casefold() for part in parts)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class Deduper:
    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.texts: set[bytes] = set()
        self.examples: set[bytes] = set()

    def _seen(self, seen: set, key) -> bool:
        if key in seen:
            return True
        seen.add(key)
        return False

    def story(self, story_id: str, text: str) -> bool:
        """True when this story repeats an earlier one (by id or by text)."""
        return self._seen(self.ids, story_id) or self._seen(self.texts, _digest((text,)))

    def example(self, *parts: str) -> bool:
        """True when an earlier story made the same example (unit 1 + target units)."""
        return self._seen(self.examples, _digest(parts))
