"""The out-dir: a run writes only what it owns and never deletes what it did not create."""

import json

import pytest

from eric.data import pipeline
from eric.data.errors import CorpusError, OutputError
from eric.data.outdir import MARKER, _exchange
from eric.data.pipeline import run_preprocess
from tests.conftest import STORY_A, STORY_B


@pytest.fixture
def corpus(write_wikiplots):
    return write_wikiplots([STORY_A, STORY_B])


def run(params_for, corpus, out, **kw):
    return run_preprocess(params_for(corpus, "wikiplots", out_dir=str(out)), progress=False, **kw)


def test_a_folder_eric_did_not_write_is_refused_and_kept(params_for, corpus, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(OutputError, match=r"mine exists and it holds notes.txt.*--overwrite"):
        run(params_for, corpus, mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_overwrite_replaces_a_folder_eric_did_not_write(params_for, corpus, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("replace me")
    run(params_for, corpus, mine, overwrite=True)
    assert sorted(p.name for p in mine.iterdir()) == [MARKER, "stage_one", "stage_two", "stats.json"]


@pytest.mark.parametrize("overwrite", [False, True])
def test_the_corpus_folder_is_refused_even_with_overwrite(params_for, corpus, overwrite):
    with pytest.raises(OutputError, match="holds the corpus"):
        run(params_for, corpus, corpus.parent, overwrite=overwrite)
    assert corpus.is_file()


def test_a_rerun_replaces_its_own_output_and_a_dvc_checkout(params_for, corpus, tmp_path):
    out = tmp_path / "out"
    run(params_for, corpus, out)
    assert (out / MARKER).is_file()
    (out / "stage_two" / "train.parquet").unlink()
    run(params_for, corpus, out)  # marked as ours: replaced whole
    assert (out / "stage_two" / "train.parquet").is_file()
    (out / MARKER).unlink()  # `dvc checkout` restores the outputs but not the marker
    run(params_for, corpus, out)
    assert (out / MARKER).is_file() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_a_fresh_clone_with_only_the_committed_stats_is_replaced(params_for, corpus, tmp_path):
    out = tmp_path / "processed"
    out.mkdir()
    (out / "stats.json").write_text("{}")  # git keeps this metric; the stage folders are DVC's
    run(params_for, corpus, out)
    assert json.loads((out / "stats.json").read_text())["examples_out"] == 2 and (out / MARKER).is_file()


def test_a_lone_stage_folder_without_marker_is_refused(params_for, corpus, tmp_path):
    out = tmp_path / "processed"
    (out / "stage_one").mkdir(parents=True)
    with pytest.raises(OutputError, match="no .eric-preprocess marker"):
        run(params_for, corpus, out)


def test_a_failed_run_leaves_the_previous_output_and_a_users_tmp_folder(params_for, corpus, tmp_path, monkeypatch):
    out, users = tmp_path / "out", tmp_path / "out.tmp"
    users.mkdir()
    (users / "keep.txt").write_text("mine")
    run(params_for, corpus, out)
    before = (out / "stats.json").read_text()

    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pipeline, "anonymize", crash)
    with pytest.raises(RuntimeError):
        run(params_for, corpus, out)
    assert (out / "stats.json").read_text() == before and json.loads(before)["examples_out"] == 2
    assert (users / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.tmp", "plots.zip"]


def test_out_dir_that_is_a_file_is_one_line_error(params_for, corpus, tmp_path):
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(OutputError, match="file.txt is a file, not a folder"):
        run(params_for, corpus, file)
    with pytest.raises(OutputError, match="is under .*file.txt, which is a file"):
        run(params_for, corpus, file / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt", "plots.zip"]


def test_exchange_swaps_two_folders_atomically(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    if not _exchange(a, b):
        pytest.skip("no renameat2 on this system (the two-rename fallback is used)")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


def test_a_symlinked_out_dir_keeps_its_link_and_gets_the_output(params_for, corpus, tmp_path):
    target, link = tmp_path / "big-disk" / "processed", tmp_path / "out"
    target.mkdir(parents=True)
    link.symlink_to(target)
    run(params_for, corpus, link)
    run(params_for, corpus, link)
    assert link.is_symlink() and (target / "stats.json").is_file() and (target / MARKER).is_file()


def test_a_failed_run_removes_the_folders_it_made(params_for, tmp_path, write_jsonl):
    corpus = write_jsonl([b"{not json"], "bad.jsonl")
    with pytest.raises(CorpusError):
        run_preprocess(params_for(corpus, "jsonl", out_dir=str(tmp_path / "new" / "deep" / "out")), progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]
