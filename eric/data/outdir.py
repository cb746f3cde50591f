"""Where preprocess writes: only a folder it owns, replaced whole, atomically.

An out-dir is the run's to replace when it does not exist, is empty, or holds only
what a run writes (stage_one/, stage_two/, stats.json) plus the marker file, or
both stage folders (a DVC checkout restores outputs without the marker), or only
stats.json (git keeps that metric, so a fresh clone has it alone). Anything
else is refused in one line unless `overwrite`; a folder that holds the corpus, the
params file, the current folder or the eric package is refused even then.

The new output is built in a fresh hidden sibling (a name no user folder has, with the
run's process id) and swapped with the old one in one rename (Linux renameat2
RENAME_EXCHANGE; elsewhere two renames, the old output kept until the new one is in
place). A failed run removes its own staging folder only, so the previous output stays
intact, and says why in one line (disk full, ...); a killed run's leftovers are removed by
the next run beside the same out-dir, which names them.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import io
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eric.data.errors import OutputError
from eric.data.schema import SPLITS

MARKER = ".eric-preprocess"
OUTPUTS = {"stage_one", "stage_two", "stats.json", MARKER}


@contextmanager
def possible_path(path: Path, flag: str) -> Iterator[None]:
    """An OSError while looking at `path` (a name over the file system's 255 bytes, a loop of
    links, no permission to look) as one line."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{flag} {path}: not a usable path ({exc.strerror or exc})") from None


def check_out_dir(out_dir: Path, overwrite: bool, protected: dict[str, Path]) -> Path:
    """The real path to write `out_dir` at, or OutputError if that could lose a user's files."""
    with possible_path(out_dir, "out-dir"):
        return _check_out_dir(out_dir, overwrite, protected)


def _check_out_dir(out_dir: Path, overwrite: bool, protected: dict[str, Path]) -> Path:
    out = Path(os.path.abspath(out_dir))
    for folder in (out, *out.parents):  # the nearest existing one must be a folder
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                where = "is a file" if folder == out else f"is under {folder}, which is a file"
                raise OutputError(f"out-dir {out} {where}, not a folder")
            break
    real = out.resolve()
    for what, path in protected.items():
        path = path.resolve()
        if path == real or real in path.parents:
            raise OutputError(f"out-dir {out} holds {what} ({path}); choose another folder")
    if not out.is_dir() or overwrite:
        return real  # a symlinked out-dir: its target is replaced, the link stays
    entries = {entry.name for entry in out.iterdir()}
    foreign = sorted(entries - OUTPUTS) or sorted(_foreign_in_stage_folders(out))
    if foreign:
        listed = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        reason = f"it holds {listed}, which eric preprocess did not write"
    elif entries - {"stats.json"} and MARKER not in entries and not {"stage_one", "stage_two"} <= entries:
        reason = f"it has no {MARKER} marker"
    else:
        return real
    raise OutputError(f"out-dir {out} exists and {reason}; choose another --out-dir, or --overwrite to replace it")


def _foreign_in_stage_folders(out: Path) -> list[str]:
    """What stage_one/ and stage_two/ hold besides the split files preprocess writes (a folder
    that merely looks like an output: a user's files inside are not ours to delete)."""
    splits = {f"{split}.parquet" for split in SPLITS}
    found = []
    for stage in ("stage_one", "stage_two"):
        folder = out / stage
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            found.append(stage)
        elif folder.is_dir():
            found += [f"{stage}/{entry.name}" for entry in folder.iterdir() if entry.name not in splits or not entry.is_file()]
    return found


# a write that cannot succeed here: disk full, a file-size limit (Python ignores SIGXFSZ, so the
# write fails with EFBIG), a quota, a read-only file system
WRITE_FAILURES = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS}


def write_error(out_dir: Path, exc: OSError) -> OutputError:
    """A failed write (disk full, a file-size limit, a read-only folder), in one line."""
    return OutputError(f"out-dir {out_dir}: cannot write ({exc.strerror or exc}); the previous output is "
                       "unchanged and the partial one removed")


def _leftover(sibling: Path, out_dir: Path) -> bool:
    """A staging (or swapped-out) sibling of `out_dir` whose run is gone: named
    .<out>.<pid>-<hex>.partial|.old, and no process <pid> runs (a pid we cannot read is kept)."""
    prefix, name = f".{out_dir.name}.", sibling.name
    if not name.startswith(prefix) or not name.endswith((".partial", ".old")):
        return False
    pid = name[len(prefix):].split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    return False


def remove_leftovers(out_dir: Path) -> list[str]:
    """Remove what killed runs left beside `out_dir` (kill -9 skips every clean-up); say so."""
    parent = out_dir.parent
    gone = sorted(p.name for p in parent.iterdir() if p.is_dir() and _leftover(p, out_dir)) if parent.is_dir() else []
    for name in gone:
        shutil.rmtree(parent / name, ignore_errors=True)
    if gone:
        print(f"removed {len(gone)} folder(s) that interrupted runs left beside {out_dir}: {', '.join(gone)}",
              file=sys.stderr)
    return gone


class Staging:
    """A fresh folder beside `out_dir` that becomes `out_dir` on commit (with preprocess's
    marker file, unless `marker` is None: another stage's output). Its name carries this
    process's id, so a later run can tell a dead run's leftover from a running one's."""

    def __init__(self, out_dir: Path, marker: str | None = MARKER):
        self.out_dir, self.marker = out_dir, marker
        self.path = out_dir.with_name(f".{out_dir.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
        self.made = [p for p in out_dir.parents if not p.exists()]  # nearest first; removed on abort
        try:
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            remove_leftovers(out_dir)
            self.path.mkdir()  # fails rather than reuse an existing folder
        except OSError as exc:
            raise OutputError(f"out-dir {out_dir}: cannot write there ({exc.strerror or exc})") from None

    def commit(self) -> Path:
        try:
            if self.marker is not None:
                (self.path / self.marker).write_text("Written by eric preprocess; the next run replaces this folder.\n")
            if self.out_dir.is_dir() and any(self.out_dir.iterdir()):
                _swap(self.path, self.out_dir)
            else:
                self.path.replace(self.out_dir)  # onto nothing or an empty folder: atomic
        except OSError as exc:
            self.abort()
            raise write_error(self.out_dir, exc) from None
        return self.out_dir

    def abort(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        for folder in self.made:
            try:
                folder.rmdir()
            except OSError:  # not empty (someone else's) or gone
                break


def check_out_file(out: Path, inputs: dict[str, Path | None], ours: Callable[[Path], bool], overwrite: bool,
                   command: str) -> Path:
    """The real path (symlinks resolved) a command may write its one-file output `out` at, or
    OutputError: never a folder, never one of its `inputs` (named by what they are, whatever
    spelling or link points there, and even with `overwrite`), and an existing file only
    when `ours(file)` says an earlier run of `command` wrote it, or with `overwrite`."""
    with possible_path(out, "--out"):
        return _check_out_file(out, inputs, ours, overwrite, command)


def _check_out_file(out: Path, inputs: dict[str, Path | None], ours: Callable[[Path], bool], overwrite: bool,
                    command: str) -> Path:
    real = out.resolve()
    if real.is_dir():
        raise OutputError(f"--out {out} is a folder; give a file path")
    for what, path in inputs.items():
        if path is not None and path.exists() and real == path.resolve():
            raise OutputError(f"--out {out} is {what}; choose another path")
    if real.exists() and not overwrite and not ours(real):
        raise OutputError(f"--out {out} exists and `{command}` did not write it; choose another path, "
                          "or --overwrite to replace it")
    return real


def replace_file(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all: a sibling temporary file renamed over it (one rename),
    removed again if the write fails (disk full: OutputError, the earlier file unchanged)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(data)
        temporary.replace(path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc}); an earlier file there is unchanged") from None


def replace_text(path: Path, text: str) -> None:
    """`replace_file` for text (UTF-8)."""
    replace_file(path, text.encode())


def replace_figure(figure, path: Path, **savefig) -> None:
    """A matplotlib figure saved whole or not at all (`replace_file` of its rendered bytes)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png", **savefig)
    replace_file(Path(path), buffer.getvalue())


@contextmanager
def output_lock(target: Path) -> Iterator[None]:
    """Hold an advisory lock on `target` (a file `.<name>.lock` beside it) for a whole run, so
    that a second run writing the same output refuses in one line instead of racing to
    replace it (the last one silently winning). The lock file goes when the run ends."""
    target = Path(target).resolve()  # `out`, `./out` and a link to it are one output
    lock = target.with_name(f".{target.name}.lock")
    try:
        made = [p for p in lock.parents if not p.exists()]  # nearest first; removed again if left empty
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # no folder to hold a lock (a parent is a file, read-only, a name too long): the run says why
        fd = None
    if fd is None:
        yield
        return
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(f"{target}: another run is writing it now (lock {lock}); wait for it to end, "
                              "or choose another output") from None
        if lock.exists() and os.stat(lock).st_ino == os.fstat(fd).st_ino:
            break
        os.close(fd)  # the run that held it removed it meanwhile: lock the new one
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)
        for folder in made:
            try:
                folder.rmdir()
            except OSError:  # the run wrote into it
                break


def _swap(new: Path, out: Path) -> None:
    """Put `new` in place of the non-empty folder `out`, then delete the old output."""
    if _exchange(new, out):
        _remove_previous(new, out)  # `new` now holds the previous output
        return
    old = out.with_name(f".{out.name}.{os.getpid()}-{secrets.token_hex(4)}.old")
    out.rename(old)
    try:
        new.rename(out)
    except OSError:
        old.rename(out)
        raise
    _remove_previous(old, out)


def _remove_previous(old: Path, out: Path) -> None:
    """Delete the swapped-out previous output. The new one is already in place, so a failure
    here (a read-only folder in it) is said, not an error: the run succeeded."""
    try:
        shutil.rmtree(old)
    except OSError as exc:
        print(f"out-dir {out}: the new output is in place, but the previous one could not be removed "
              f"({exc.strerror or exc}); it is left at {old}", file=sys.stderr)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux >= 3.15); False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:  # glibc < 2.28, musl
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL):  # kernel or filesystem without it
        return False
    raise OSError(code, os.strerror(code), str(b))
