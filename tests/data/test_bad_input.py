"""Every bad input is a one-line CorpusError or a counted skip, never a traceback."""

import bz2
import codecs
import gzip
import json
import lzma
import subprocess
import sys
import zipfile
import zlib

import pytest

from eric.data.errors import CorpusError, SkipCounter
from eric.data.pipeline import run_preprocess
from eric.data.readers import read_corpus
from tests.conftest import STORY_A, STORY_B, plots_bytes


def read_all(kind, path):
    skips = SkipCounter()
    return list(read_corpus(kind, path, skips)), skips


def test_empty_plots_file(write_wikiplots):
    with pytest.raises(CorpusError, match="no stories"):
        read_all("wikiplots", write_wikiplots([], [], plots_raw=b""))


def test_empty_jsonl_file(write_jsonl):
    with pytest.raises(CorpusError, match="no stories"):
        read_all("jsonl", write_jsonl([], "e.jsonl"))


def test_titles_missing(write_wikiplots):
    with pytest.raises(CorpusError, match="no 'titles'"):
        read_all("wikiplots", write_wikiplots([STORY_A], titles=False))


def test_titles_count_differs(write_wikiplots):
    with pytest.raises(CorpusError, match="2 stories but 'titles' has 1"):
        read_all("wikiplots", write_wikiplots([STORY_A, STORY_B], ["only one"]))


def test_non_utf8_story_is_a_counted_skip(write_wikiplots):
    raw = plots_bytes([STORY_A]) + b"Caf\xe9 \xff broken\n<EOS>\n" + plots_bytes([STORY_B])
    stories, skips = read_all("wikiplots", write_wikiplots(None, ["a", "b", "c"], plots_raw=raw))
    assert [s.title for s in stories] == ["a", "c"]
    assert skips == {"invalid_utf8": 1}


def test_jsonl_bad_lines_are_counted(write_jsonl):
    lines = [{"text": "Fine."}, b"{not json", b"\xff\xfe", {"title": "no text"}, [1, 2]]
    stories, skips = read_all("jsonl", write_jsonl(lines, "b.jsonl"))
    assert len(stories) == 1
    assert skips == {"invalid_json": 1, "invalid_utf8": 1, "missing_text": 2}


def test_a_jsonl_line_over_the_cap_is_a_counted_skip_never_held_whole(write_jsonl, monkeypatch):
    import eric.data.readers as readers

    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 1000)
    lines = [{"id": "a", "text": "Fine."}, {"id": "huge", "text": "word " * 3000}, {"id": "b", "text": "Also fine."}]
    stories, skips = read_all("jsonl", write_jsonl(lines, "long.jsonl"))
    assert [s.id for s in stories] == ["a", "b"] and skips == {"line_too_long": 1}


@pytest.mark.parametrize(
    "kind, fixture, message",
    [
        ("jsonl", "zip", "zip archive, not JSONL"),
        ("wikiplots", "jsonl", "not a WikiPlots corpus"),
        ("cnn", "zip", "not a CNN corpus"),
    ],
)
def test_kind_mismatch(kind, fixture, message, write_wikiplots, write_jsonl):
    path = write_wikiplots([STORY_A], ["a"]) if fixture == "zip" else write_jsonl([{"text": "x"}])
    with pytest.raises(CorpusError, match=message):
        read_all(kind, path)


def test_jsonl_of_non_json_text_names_the_kind(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("just text\nmore text\n")
    with pytest.raises(CorpusError, match="is corpus.kind right"):
        read_all("jsonl", path)


def test_short_long_and_markup_stories_in_the_pipeline(write_wikiplots, params_for):
    one_line = ["A single sentence story."]
    huge = [f"Line {i} of an endless story." for i in range(10_000)]
    markup = [
        "[[Ash Williams|Ash]] drives to a cabin.",
        "{{cite web}} Linda and '''Ash''' find a tape &amp; a book.<ref>src</ref>",
        *STORY_A[2:],
    ]
    path = write_wikiplots([STORY_A, one_line, huge, markup, STORY_B])
    stats = run_preprocess(params_for(path, "wikiplots"), progress=False)
    assert stats.stories_in == 5
    assert stats.examples == 3
    assert stats.skipped == {"too_few_units": 1, "too_many_units": 1}


def test_markup_residue_is_removed_from_units(write_wikiplots, params_for, tmp_path):
    import pyarrow.parquet as pq

    markup = ["Ash drives to a cabin.", "{{cite web}} Linda and '''Ash''' find a tape &amp; a book.<ref>src</ref>"]
    path = write_wikiplots([markup + STORY_A[2:]])
    run_preprocess(params_for(path, "wikiplots", split_ratio=[1, 0, 0]), progress=False)
    unit = pq.read_table(tmp_path / "out" / "stage_one" / "train.parquet").column("units")[0][0].as_py()
    assert not any(mark in unit for mark in ("{{", "'''", "&amp;", "<ref>", "src"))
    assert unit.endswith("find a tape & a book.")


def test_cli_reports_bad_path_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "eric.cli", "preprocess", "--corpus", str(tmp_path / "missing.zip"),
         "--out-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "corpus path not found" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_a_missing_corpus_is_named_before_an_occupied_out_dir(tmp_path):
    occupied = tmp_path / "out"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("a user's file")
    result = subprocess.run(
        [sys.executable, "-m", "eric.cli", "preprocess", "--corpus", str(tmp_path / "missing.zip"),
         "--out-dir", str(occupied)],
        capture_output=True, text=True,
    )
    assert result.returncode == 2 and "corpus path not found" in result.stderr
    assert (occupied / "notes.txt").read_text() == "a user's file"


def test_gzip_truncated_jsonl_is_one_line_error(tmp_path):
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "a"}\n' * 100)[:40])
    with pytest.raises(CorpusError):
        read_all("jsonl", path)


# --- damaged archives and other encodings: named in one line, or read


def broken_stream(good: bytes, wbits: int) -> bytes:
    """`good` compressed (31: gzip, -15: raw deflate), then bytes no inflater accepts."""
    packer = zlib.compressobj(wbits=wbits)
    return packer.compress(good) + packer.flush(zlib.Z_SYNC_FLUSH) + b"\xff" * 64


def jsonl_bytes(n: int) -> bytes:
    return b"".join(json.dumps({"id": str(i), "text": f"Story {i}."}).encode() + b"\n" for i in range(n))


def test_corrupted_gzip_jsonl_names_the_damage(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(broken_stream(jsonl_bytes(300), 31))
    with pytest.raises(CorpusError, match="corrupted gzip data .*invalid block type"):
        read_all("jsonl", path)


def test_corrupted_zip_member_names_the_damage(tmp_path):
    plots = plots_bytes([STORY_A, STORY_B] * 50)
    path = tmp_path / "plots.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("plots", plots)
        zf.writestr("titles", "".join(f"t{i}\n" for i in range(100)))
        info = zf.getinfo("plots")
    raw = bytearray(path.read_bytes())
    name_len = int.from_bytes(raw[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    damaged = broken_stream(plots[:200], -15)
    raw[start : start + len(damaged)] = damaged  # same length: the zip directory stays valid
    path.write_bytes(bytes(raw))
    with pytest.raises(CorpusError, match="corrupted .*zip archive"):
        read_all("wikiplots", path)


def test_corrupted_cnn_tgz_names_the_damage(tmp_path, write_cnn_tgz):
    tar_raw = gzip.decompress(write_cnn_tgz({f"s{i}": f"Story {i} text. " * 200 for i in range(30)}).read_bytes())
    path = tmp_path / "broken.tgz"
    path.write_bytes(broken_stream(tar_raw[: len(tar_raw) // 2], 31))
    with pytest.raises(CorpusError, match="corrupted .*archive .*invalid block type"):
        read_all("cnn", path)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-8-sig"])
def test_jsonl_with_a_byte_order_mark_is_read(tmp_path, encoding):
    text = '{"id": "a", "text": "Zoë met Ash."}\n{"id": "b", "text": "Two."}\n'
    path = tmp_path / "wide.jsonl"
    bom = {"utf-16-be": codecs.BOM_UTF16_BE}.get(encoding, b"")
    path.write_bytes(bom + text.encode(encoding))
    stories, skips = read_all("jsonl", path)
    assert [s.text for s in stories] == ["Zoë met Ash.", "Two."] and not skips


@pytest.mark.parametrize("name, pack", [("c.jsonl.bz2", bz2.compress), ("c.jsonl.xz", lzma.compress)])
def test_bz2_and_xz_jsonl_are_read(tmp_path, name, pack):
    path = tmp_path / name
    path.write_bytes(pack(jsonl_bytes(3)))
    stories, _ = read_all("jsonl", path)
    assert [s.text for s in stories] == ["Story 0.", "Story 1.", "Story 2."]


def test_utf16_wikiplots_names_the_encoding(write_wikiplots):
    raw = plots_bytes([STORY_A]).decode().encode("utf-16")
    with pytest.raises(CorpusError, match="'plots' is UTF-16 text"):
        read_all("wikiplots", write_wikiplots(None, ["a"], plots_raw=raw))


def test_compressed_file_of_the_wrong_kind_is_named(tmp_path):
    path = tmp_path / "c.jsonl.bz2"
    path.write_bytes(bz2.compress(jsonl_bytes(3)))
    with pytest.raises(CorpusError, match="a bz2 file, not a WikiPlots corpus"):
        read_all("wikiplots", path)
