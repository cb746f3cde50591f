"""Errors and skip accounting for corpus processing.

Bad input never raises a traceback at the user: a whole-corpus problem is a
`CorpusError` with a one-line message; a bad story is a counted skip, so that
stories in = examples out + stories skipped, always.
"""

from __future__ import annotations

from collections import Counter


class CorpusError(ValueError):
    """The corpus as a whole cannot be read (missing, empty, wrong kind...)."""


class SkipCounter(Counter):
    """Stories skipped, by reason. Reasons are short snake_case strings."""

    def skip(self, reason: str) -> None:
        self[reason] += 1

    def as_dict(self) -> dict[str, int]:
        return dict(sorted(self.items()))


class OutputError(ValueError):
    """The output folder cannot be written safely (not ours, a file, holds the corpus...)."""
