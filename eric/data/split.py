"""Deterministic train/val/test assignment by a hash of the story's title (or id).

sha1 rather than Python's `hash()` (salted per process) so that every machine
puts every story in the same split; stories sharing a title (sections of one
article) share a split, which keeps near-duplicates out of the test set.
"""

from __future__ import annotations

import hashlib

from eric.data.schema import SPLITS


def assign_split(key: str, ratio: tuple[int, int, int]) -> str:
    bucket = int.from_bytes(hashlib.sha1(key.encode("utf-8")).digest()[:8], "big") % sum(ratio)
    for name, weight in zip(SPLITS, ratio):
        if bucket < weight:
            return name
        bucket -= weight
    raise AssertionError("unreachable: bucket < sum(ratio)")
