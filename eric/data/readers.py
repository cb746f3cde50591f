"""Corpus readers: WikiPlots, CNN stories, JSONL -> `RawStory` records.

Readers do no NLP. A reader raises `CorpusError` (one line) when the corpus as a
whole is unusable, and counts a skip for each story it cannot read, so the
pipeline can report stories in = examples out + skipped.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import select
import stat
import tarfile
import tempfile
import zipfile
import zlib
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
    """Stories of a corpus. `skips` collects per-story read failures. A pipe or device
    (`--corpus <(zcat plots.gz)`, a named pipe) is first copied whole into a temporary file:
    the readers look at a file's first bytes and open it again, which on a pipe lost them."""
    if not path.exists():
        raise CorpusError(f"corpus path not found: {path}")
    readers = {"wikiplots": read_wikiplots, "cnn": read_cnn, "jsonl": read_jsonl}
    if kind not in readers:
        raise CorpusError(f"unknown corpus kind {kind!r} (wikiplots, cnn or jsonl)")
    mode = path.stat().st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        spool = spool_stream(path)
        return _removed_after(readers[kind](spool, skips), spool)
    return readers[kind](path, skips)


PIPE_WAIT_S = 60.0  # how long a pipe may stay silent (a named pipe nobody writes to)
MAX_STREAM_BYTES = 2 << 30  # a stream past this is refused (/dev/zero would fill the disk)


def spool_stream(path: Path, wait_s: float | None = None, limit: int | None = None) -> Path:
    """Copy a pipe or device to a temporary file, every byte, or CorpusError: nothing arrives
    for `wait_s` seconds, or more than `limit` bytes do."""
    wait_s, limit = wait_s or PIPE_WAIT_S, limit or MAX_STREAM_BYTES
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a named pipe without a writer: no hang on open
    out = tempfile.NamedTemporaryFile(prefix="eric-corpus-", delete=False)
    try:
        total = 0
        while chunk := _next_chunk(fd, path, wait_s):
            total += len(chunk)
            if total > limit:
                raise CorpusError(f"{path}: a stream of more than {limit >> 20} MiB; give the corpus as a file")
            out.write(chunk)
    except BaseException:
        out.close()
        os.unlink(out.name)
        raise
    finally:
        os.close(fd)
    out.close()
    return Path(out.name)


def _next_chunk(fd: int, path: Path, wait_s: float) -> bytes:
    """The next bytes of a non-blocking stream (b"" at its end)."""
    while True:
        if not select.select([fd], [], [], wait_s)[0]:
            raise CorpusError(f"{path}: nothing arrived for {wait_s:.0f} s (a named pipe nobody writes to?)")
        try:
            return os.read(fd, 1 << 20)
        except BlockingIOError:  # woken without data: wait again
            continue


def _removed_after(stories: Iterator[RawStory], spool: Path) -> Iterator[RawStory]:
    try:
        yield from stories
    finally:
        spool.unlink(missing_ok=True)


# What a file is, from its first bytes, so a wrong or damaged input is named.
_MAGIC = [
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK", "zip"),
    (codecs.BOM_UTF32_LE, "UTF-32"),  # before UTF-16: its BOM starts the same way
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
]
# errors of a damaged archive or compressed stream (zlib.error is not an OSError)
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, tarfile.TarError)


def sniff(head: bytes) -> str | None:
    """The format named by a file's first 512 bytes, or None (plain text, or unknown)."""
    if head[257:262] == b"ustar":
        return "tar"
    return next((name for magic, name in _MAGIC if head.startswith(magic)), None)


def file_format(path: Path) -> str | None:
    with path.open("rb") as f:
        return sniff(f.read(512))


def _wide_encoding(head: bytes) -> str | None:
    """'utf-16' / 'utf-32' when `head` starts with their byte-order mark."""
    found = sniff(head)
    return found.lower() if found in ("UTF-16", "UTF-32") else None


def _decode(raw: bytes) -> str | None:
    """UTF-8 (a BOM is dropped), or UTF-16/32 with a BOM; None if not decodable."""
    try:
        return raw.decode(_wide_encoding(raw[:4]) or "utf-8-sig")
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
        found = file_format(path)
        raise CorpusError(
            f"{path}: {f'a {found} file, ' if found else ''}not a WikiPlots corpus "
            "(expected plots.zip or a folder with plots + titles)"
        )
    try:
        archive = zipfile.ZipFile(path)
    except READ_ERRORS as exc:
        raise CorpusError(f"{path}: corrupted zip archive ({exc})") from None
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


def _check_utf8(path: Path, name: str, head: bytes) -> None:
    wide = _wide_encoding(head)
    if wide:
        raise CorpusError(
            f"{path}: '{name}' is {wide.upper()} text; WikiPlots files must be UTF-8 "
            f"(convert: iconv -f {wide.upper()} -t UTF-8)"
        )


def read_wikiplots(path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    try:
        yield from _read_wikiplots(path, skips)
    except READ_ERRORS as exc:
        where = "zip archive" if path.is_file() else "WikiPlots folder"
        raise CorpusError(f"{path}: corrupted or unreadable {where} ({exc})") from None


def _read_wikiplots(path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    open_plots, titles_raw = _wikiplots_files(path)
    _check_utf8(path, "titles", titles_raw[:4])
    titles = titles_raw.decode("utf-8-sig", errors="replace").splitlines()
    with open_plots() as f:
        _check_utf8(path, "plots", f.read(4))
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
    try:
        is_tar = tarfile.is_tarfile(path)
    except READ_ERRORS:
        is_tar = False
    if not is_tar:
        found = file_format(path)
        if found in ("gzip", "bz2", "xz"):  # a compressed file that is no tar: damaged, or not CNN
            raise CorpusError(f"{path}: a {found} file that holds no readable tar archive (corrupted, or not CNN)")
        raise CorpusError(
            f"{path}: {f'a {found} file, ' if found else ''}not a CNN corpus "
            "(expected a folder of .story files or a .tgz)"
        )
    with tarfile.open(path) as tar:
        found = False
        for member in tar:
            if member.isfile() and member.name.endswith(".story"):
                found = True
                yield Path(member.name).stem, tar.extractfile(member).read()
        if not found:
            raise CorpusError(f"{path}: archive holds no .story files")


def read_cnn(path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    try:
        yield from _read_cnn(path, skips)
    except READ_ERRORS as exc:
        raise CorpusError(f"{path}: corrupted or unreadable archive ({exc})") from None


def _read_cnn(path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    for story_id, raw in _cnn_sources(path):
        text = _decode(raw)
        if text is None:
            skips.skip("invalid_utf8")
            continue
        yield RawStory(id=story_id, title=story_id, text=_cnn_text(text))


# --- JSONL: {"text": ..., "id"?: ..., "title"?: ...} per line; plain, gzip, bz2 or xz;
# UTF-8, or UTF-16/32 with a byte-order mark

_DECOMPRESS = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}


def _open_jsonl(path: Path, found: str | None):
    if found in ("zip", "tar"):
        raise CorpusError(f"{path}: is a {found} archive, not JSONL (is corpus.kind right?)")
    return _DECOMPRESS.get(found, open)(path, "rb")


MAX_LINE_BYTES = 64 << 20  # a JSON-lines story longer than this is skipped (`line_too_long`), never held whole
TOO_LONG = "\x00too long"  # what _text_lines yields for such a line


def _text_lines(stream) -> Iterator[str | None]:
    """Lines as text (None: a line that is not UTF-8; TOO_LONG: one over MAX_LINE_BYTES, read
    past in chunks). UTF-8 is decoded line by line, so one bad line is one counted skip;
    UTF-16/32 (BOM) is decoded as a stream."""
    buffered = io.BufferedReader(stream)
    wide = _wide_encoding(buffered.peek(4)[:4])
    if wide:
        yield from io.TextIOWrapper(buffered, encoding=wide)
        return
    while raw := buffered.readline(MAX_LINE_BYTES + 1):
        if len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n"):
            yield _decode(raw)
            continue
        while (rest := buffered.readline(1 << 20)) and not rest.endswith(b"\n"):
            pass  # the rest of the long line, never kept
        yield TOO_LONG


def read_jsonl(path: Path, skips: SkipCounter) -> Iterator[RawStory]:
    if path.is_dir():
        raise CorpusError(f"{path}: is a folder, expected a .jsonl or .jsonl.gz file")
    found = file_format(path)
    good = bad = 0
    try:
        with _open_jsonl(path, found) as f:
            for number, line in enumerate(_text_lines(f), start=1):
                if line is not None and not line.strip():
                    continue
                story = _jsonl_story(line, number, skips)
                if story is None:
                    bad += 1
                    continue
                good += 1
                yield story
    except (*READ_ERRORS, UnicodeDecodeError) as exc:
        damaged = f"corrupted {found} data" if found in _DECOMPRESS else f"unreadable {found or 'text'} file"
        raise CorpusError(f"{path}: {damaged} ({exc})") from None
    if good == 0:
        hint = " (no line is a JSON object with 'text': is corpus.kind right?)" if bad else ""
        raise CorpusError(f"{path}: holds no stories{hint}")


def _jsonl_story(line: str | None, number: int, skips: SkipCounter) -> RawStory | None:
    if line is None or line is TOO_LONG:
        skips.skip("invalid_utf8" if line is None else "line_too_long")
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
