import zipfile

import pytest

from eric.data.errors import CorpusError, SkipCounter
from eric.data.readers import read_corpus
from tests.conftest import STORY_A, STORY_B, plots_bytes


def read_all(kind, path):
    skips = SkipCounter()
    return list(read_corpus(kind, path, skips)), skips


def test_wikiplots_zip_pairs_stories_with_titles(write_wikiplots):
    stories, skips = read_all("wikiplots", write_wikiplots([STORY_A, STORY_B], ["Evil Dead", "Strike"]))
    assert [s.title for s in stories] == ["Evil Dead", "Strike"]
    assert stories[0].units == tuple(STORY_A)
    assert stories[1].id == "wikiplots-1"
    assert not skips


def test_wikiplots_folder_layout(tmp_path):
    folder = tmp_path / "wp"
    folder.mkdir()
    (folder / "plots").write_bytes(plots_bytes([STORY_A]))
    (folder / "titles").write_text("Evil Dead\n")
    stories, _ = read_all("wikiplots", folder)
    assert stories[0].units[-1] == STORY_A[-1]


def test_wikiplots_last_story_without_eos_is_kept(write_wikiplots):
    raw = plots_bytes([STORY_A]) + "\n".join(STORY_B).encode()
    stories, _ = read_all("wikiplots", write_wikiplots(None, ["a", "b"], plots_raw=raw))
    assert len(stories) == 2 and stories[1].units == tuple(STORY_B)


def test_cnn_tgz_keeps_text_before_highlights_and_adds_periods(write_cnn_tgz):
    text = "First line without period\n\nSecond line.\n\n@highlight\n\nA highlight"
    stories, _ = read_all("cnn", write_cnn_tgz({"abc123": text}))
    assert stories[0].id == "abc123"
    assert stories[0].text == "First line without period. Second line."


def test_cnn_folder_of_story_files(tmp_path):
    (tmp_path / "x.story").write_text("Hello there\n@highlight\nno")
    stories, _ = read_all("cnn", tmp_path)
    assert stories[0].text == "Hello there."


def test_jsonl_plain_and_gzip(write_jsonl):
    rows = [{"id": "a", "title": "T", "text": "One."}, {"text": "Two."}]
    for name in ("c.jsonl", "c.jsonl.gz"):
        stories, _ = read_all("jsonl", write_jsonl(rows, name))
        assert [(s.id, s.title, s.text) for s in stories] == [("a", "T", "One."), ("line-2", "line-2", "Two.")]


def test_wikiplots_reads_the_shared_mini_corpus_completely(tmp_path):
    from tests.conftest import WIKIPLOTS_MINI

    with zipfile.ZipFile(WIKIPLOTS_MINI) as zf:
        n_titles = len(zf.read("titles").decode().splitlines())
    stories, skips = read_all("wikiplots", WIKIPLOTS_MINI)
    assert len(stories) + sum(skips.values()) == n_titles == 2984


@pytest.mark.parametrize("kind", ["wikiplots", "cnn", "jsonl"])
def test_nonexistent_path(kind, tmp_path):
    with pytest.raises(CorpusError, match="not found"):
        read_all(kind, tmp_path / "nope")
