"""Corpus readers: WikiPlots, CNN stories, JSONL -> `RawStory` records.

Readers do no NLP. A reader raises `CorpusError` (one line) when the corpus as a
whole is unusable, and counts a skip for each story it cannot read, so the
pipeline can report stories in = examples out + skipped.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eric.data.errors import CorpusError, SkipCounter

EOS_LINE = b"<EOS>"


@dataclass(frozen=True)
class RawStory:
    id: str
    title: str
    units: tuple[str, ...] | None = None  # pre-segmented corpora (WikiPlots)
    text: str | None = None  # raw text to segment (CNN, JSONL)


def read_corpus(kind: str, path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    """Stories of a corpus. `skips` collects per-story read failures."""
    if not path.exists():
        raise CorpusError(f"corpus path not found: {path}")
    readers = {"wikiplots": read_wikiplots, "cnn": read_cnn, "jsonl": read_jsonl}
    if kind not in readers:
        raise CorpusError(f"unknown corpus kind {kind!r} (wikiplots, cnn or jsonl)")
    return readers[kind](path, skips)


def _decode(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- WikiPlots: `plots` (one sentence per line, <EOS> after each story) + `titles`


def _wikiplots_files(path: Path) -> tuple[callable, bytes]:
    """An opener for `plots` and the bytes of `titles`, from a zip or a folder."""
    if path.is_dir():
        plots, titles = path / "plots", path / "titles"
        if not plots.is_file():
            raise CorpusError(f"{path}: not a WikiPlots folder (no 'plots' file)")
        if not titles.is_file():
            raise CorpusError(f"{path}: WikiPlots 'titles' file is missing")
        return (lambda: plots.open("rb")), titles.read_bytes()
    if not zipfile.is_zipfile(path):
        raise CorpusError(
            f"{path}: not a WikiPlots corpus (expected plots.zip or a folder with plots + titles)"
        )
    archive = zipfile.ZipFile(path)
    members = {Path(n).name: n for n in archive.namelist() if not n.endswith("/")}
    if "plots" not in members:
        raise CorpusError(f"{path}: zip has no 'plots' member (is corpus.kind right?)")
    if "titles" not in members:
        raise CorpusError(f"{path}: zip has no 'titles' member")
    return (lambda: archive.open(members["plots"])), archive.read(members["titles"])


def _split_stories(lines: Iterator[bytes]) -> Iterator[list[bytes]]:
    story: list[bytes] = []
    for line in lines:
        line = line.rstrip(b"\r\n")
        if line.strip() == EOS_LINE:
            yield story
            story = []
        elif line.strip():
            story.append(line.strip())
    if story:  # a last story without its <EOS>
        yield story


def read_wikiplots(path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    open_plots, titles_raw = _wikiplots_files(path)
    titles = titles_raw.decode("utf-8", errors="replace").splitlines()
    with open_plots() as f:
        n_stories = sum(1 for _ in _split_stories(f))
    if n_stories == 0:
        raise CorpusError(f"{path}: 'plots' holds no stories")
    if n_stories != len(titles):
        raise CorpusError(
            f"{path}: 'plots' has {n_stories} stories but 'titles' has {len(titles)} lines"
        )
    with open_plots() as f:
        for index, (lines, title) in enumerate(zip(_split_stories(f), titles)):
            units = [_decode(line) for line in lines]
            if any(u is None for u in units):
                skips.skip("invalid_utf8")
                continue
            yield RawStory(id=f"wikiplots-{index}", title=title.strip(), units=tuple(units))


# --- CNN: `.story` files (folder or .tgz); text before the first @highlight


def _cnn_text(raw: str) -> str:
    body = raw.split("@highlight", 1)[0]
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    # CNN paragraphs often lack a final period; without it they merge into one sentence
    return " ".join(line if line[-1] in ".!?\"')" else line + "." for line in lines)


def _cnn_sources(path: Path) -> Iterator[tuple[str, bytes]]:
    if path.is_dir():
        files = sorted(path.rglob("*.story"))
        if not files:
            raise CorpusError(f"{path}: no .story files (is corpus.kind right?)")
        for file in files:
            yield file.stem, file.read_bytes()
        return
    if not tarfile.is_tarfile(path):
        raise CorpusError(f"{path}: not a CNN corpus (expected a folder of .story files or a .tgz)")
    with tarfile.open(path) as tar:
        found = False
        for member in tar:
            if member.isfile() and member.name.endswith(".story"):
                found = True
                yield Path(member.name).stem, tar.extractfile(member).read()
        if not found:
            raise CorpusError(f"{path}: archive holds no .story files")


def read_cnn(path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    for story_id, raw in _cnn_sources(path):
        text = _decode(raw)
        if text is None:
            skips.skip("invalid_utf8")
            continue
        yield RawStory(id=story_id, title=story_id, text=_cnn_text(text))


# --- JSONL: {"text": ..., "id"?: ..., "title"?: ...} per line, optionally gzipped


def _open_jsonl(path: Path):
    if path.is_dir():
        raise CorpusError(f"{path}: is a folder, expected a .jsonl or .jsonl.gz file")
    with path.open("rb") as probe:
        magic = probe.read(4)
    if magic.startswith(b"PK"):
        raise CorpusError(f"{path}: is a zip archive, not JSONL (is corpus.kind right?)")
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")
    return path.open("rb")


def read_jsonl(path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    good = bad = 0
    with _open_jsonl(path) as f:
        try:
            for number, raw in enumerate(io.BufferedReader(f), start=1):
                if not raw.strip():
                    continue
                story = _jsonl_story(raw, number, skips)
                if story is None:
                    bad += 1
                    continue
                good += 1
                yield story
        except (OSError, EOFError) as exc:
            raise CorpusError(f"{path}: unreadable ({exc})") from None
    if good == 0:
        hint = " (no line is a JSON object with 'text': is corpus.kind right?)" if bad else ""
        raise CorpusError(f"{path}: holds no stories{hint}")


def _jsonl_story(raw: bytes, number: int, skips: SkipCounter) -> RawStory | None:
    line = _decode(raw)
    if line is None:
        skips.skip("invalid_utf8")
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        skips.skip("invalid_json")
        return None
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        skips.skip("missing_text")
        return None
    story_id = str(record.get("id") or f"line-{number}")
    title = str(record.get("title") or story_id)
    return RawStory(id=story_id, title=title, text=record["text"])
