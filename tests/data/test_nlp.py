"""preprocess.spacy_model: the NER pipeline is a setting, a package or a folder; what a kept
component listens to stays with it; a missing model is one line."""

from __future__ import annotations

import pytest
import spacy

from eric.config import DEFAULT_SPACY_MODEL
from eric.data.errors import CorpusError
from eric.data.nlp import _open, load_pipeline

TEXT = "Ash Williams drives Linda to the cabin. Linda works for Acme Corporation."


def entities(nlp) -> list[tuple[str, str]]:
    return [(e.text, e.label_) for e in nlp(TEXT).ents]


def test_a_saved_pipeline_folder_tags_what_its_package_tags(tmp_path):
    _open(DEFAULT_SPACY_MODEL).to_disk(tmp_path / "sm")
    from_folder = load_pipeline(split_sentences=True, model=str(tmp_path / "sm"))
    from_package = load_pipeline(split_sentences=True)
    assert from_folder.pipe_names == from_package.pipe_names == ["senter", "ner"]
    assert entities(from_folder) == entities(from_package) and ("Ash Williams", "PERSON") in entities(from_package)


def test_a_shared_tok2vec_that_ner_listens_to_is_kept(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec")
    listener = {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "*"}
    nlp.add_pipe("ner", config={"model": {"@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner",
                                          "extra_state_tokens": False, "hidden_width": 32, "maxout_pieces": 2,
                                          "use_upper": True, "tok2vec": listener}})
    nlp.add_pipe("sentencizer")  # neither kept nor listened to
    nlp.get_pipe("ner").add_label("PERSON")
    nlp.initialize()
    nlp.to_disk(tmp_path / "shared")
    loaded = load_pipeline(split_sentences=False, model=str(tmp_path / "shared"))
    assert loaded.pipe_names == ["tok2vec", "ner"]
    loaded("Linda drives.")  # runs: the listener still has its upstream


def test_a_missing_model_is_one_line_naming_the_setting(tmp_path):
    with pytest.raises(CorpusError, match=r"spaCy model 'en_core_web_xl' not found \(preprocess.spacy_model\)"):
        load_pipeline(split_sentences=False, model="en_core_web_xl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match=r"empty: not a spaCy pipeline folder \(preprocess.spacy_model\)"):
        load_pipeline(split_sentences=False, model=str(tmp_path / "empty"))
