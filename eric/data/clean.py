"""Strip HTML / wiki markup residue from raw text before segmentation.

Scraped corpora keep fragments like `[[Link|text]]`, `{{cite}}`, `<ref>..</ref>`,
`<!-- notes -->`, `&amp;` or `'''bold'''`. They would become tokens the model learns
to copy, and they confuse the sentence splitter. Cleaning keeps the visible text only.

Linear time on any input: every pattern either stops at the next bracket of its
kind or uses possessive quantifiers, so an unclosed `<ref>` or `[http://...` fails
fast instead of rescanning the rest of the text (hostile input was quadratic).
"""

from __future__ import annotations

import html
import re

# an unclosed comment hides the rest of the page, as in MediaWiki
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
# a ref's body stops at the next <ref or </ref: an unclosed one costs its own span only
_REF = re.compile(r"<ref\b[^<>]*+/>|<ref\b[^<>]*+>(?:[^<]++|<(?!/?ref\b))*+</ref\s*>", re.I)
_TAG = re.compile(r"</?[A-Za-z][^<>]{0,200}>")
_TEMPLATE = re.compile(r"\{\{([^{}]*)\}\}")
_NAMED_ARG = re.compile(r"\s*([\w-]+)\s*=(.*)", re.S)
_LINK = re.compile(r"\[\[(?:[^\[\]|]*+\|)*+([^\[\]|]*+)\]\]")  # the last part is the shown text
_EXTLINK = re.compile(r"\[https?://[^\s\[\]]*+\s*+([^\[\]]*+)\]")
_QUOTES = re.compile(r"'{2,}")
_RESIDUE = re.compile(r"\[\[|\]\]|\{\{|\}\}")
_SPACE = re.compile(r"\s+")

# Templates that show one of their arguments (which positional one): {{nowrap|St
# Bartholomew's}} reads "St Bartholomew's". Every other template ({{cite ...}},
# infoboxes) is dropped whole.
_SHOWN_ARG = {
    **dict.fromkeys(["nowrap", "nobr", "small", "smaller", "big", "larger", "sc", "smallcaps"], 0),
    **dict.fromkeys(["em", "strong", "sic", "abbr", "quote", "quotation", "blockquote", "cquote"], 0),
    "lang": 1,  # {{lang|fr|Le Monde}}; {{lang-fr|Le Monde}} shows argument 0
}


def _template(match: re.Match) -> str:
    name, *args = match.group(1).split("|")
    name = name.strip().lower()
    index = _SHOWN_ARG.get(name, 0 if name.startswith("lang-") else None)
    if index is None:
        return " "
    positional = [a for a in args if not _NAMED_ARG.match(a)]
    if index < len(positional):
        return positional[index]
    named = {m.group(1).lower(): m.group(2) for m in map(_NAMED_ARG.match, args) if m}
    return named.get("text", named.get("quote", " "))


def clean_markup(text: str) -> str:
    """Visible text of `text`, whitespace collapsed."""
    text = html.unescape(text)
    text = _COMMENT.sub(" ", text)
    text = _REF.sub(" ", text)
    text = _TAG.sub(" ", text)
    for _ in range(3):  # nested templates, innermost first
        text, found = _TEMPLATE.subn(_template, text)
        if not found:
            break
    for _ in range(3):  # a link inside a file caption: [[File:x|thumb|A [[B]] c]]
        text, found = _LINK.subn(r"\1", text)
        if not found:
            break
    text = _EXTLINK.sub(r"\1", text)
    text = _QUOTES.sub("", text)
    text = _RESIDUE.sub(" ", text)
    return _SPACE.sub(" ", text).strip()
