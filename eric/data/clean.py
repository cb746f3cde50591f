"""Strip HTML / wiki markup residue from raw text before segmentation.

Scraped corpora keep fragments like `[[Link|text]]`, `{{cite}}`, `<ref>..</ref>`,
`&amp;` or `'''bold'''`. They would become tokens the model learns to copy, and
they confuse the sentence splitter. Cleaning keeps the visible text only.
"""

from __future__ import annotations

import html
import re

_REF = re.compile(r"<ref[^>]*?/>|<ref[^>]*>.*?</ref>", re.I | re.S)
_TAG = re.compile(r"</?[A-Za-z][^<>]{0,200}>")
_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)?([^\[\]]*)\]\]")
_EXTLINK = re.compile(r"\[https?://\S+\s*([^\]]*)\]")
_QUOTES = re.compile(r"'{2,}")
_RESIDUE = re.compile(r"\[\[|\]\]|\{\{|\}\}")
_SPACE = re.compile(r"\s+")


def clean_markup(text: str) -> str:
    """Visible text of `text`, whitespace collapsed."""
    text = html.unescape(text)
    text = _REF.sub(" ", text)
    text = _TAG.sub(" ", text)
    for _ in range(3):  # nested templates
        text = _TEMPLATE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _EXTLINK.sub(r"\1", text)
    text = _QUOTES.sub("", text)
    text = _RESIDUE.sub(" ", text)
    return _SPACE.sub(" ", text).strip()
