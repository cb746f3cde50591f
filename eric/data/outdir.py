"""Where preprocess writes: only a folder it owns, replaced whole, atomically.

An out-dir is the run's to replace when it does not exist, is empty, or holds only
what a run writes (stage_one/, stage_two/, stats.json) plus the marker file, or
both stage folders (a DVC checkout restores outputs without the marker), or only
stats.json (git keeps that metric, so a fresh clone has it alone). Anything
else is refused in one line unless `overwrite`; a folder that holds the corpus, the
params file, the current folder or the eric package is refused even then.

The new output is built in a fresh hidden sibling (a name no user folder has) and
swapped with the old one in one rename (Linux renameat2 RENAME_EXCHANGE; elsewhere
two renames, the old output kept until the new one is in place). A failed run
removes its own staging folder only, so the previous output stays intact.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import sys
from pathlib import Path

from eric.data.errors import OutputError

MARKER = ".eric-preprocess"
OUTPUTS = {"stage_one", "stage_two", "stats.json", MARKER}


def check_out_dir(out_dir: Path, overwrite: bool, protected: dict[str, Path]) -> Path:
    """The real path to write `out_dir` at, or OutputError if that could lose a user's files."""
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
    foreign = sorted(entries - OUTPUTS)
    if foreign:
        listed = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        reason = f"it holds {listed}, which eric preprocess did not write"
    elif entries - {"stats.json"} and MARKER not in entries and not {"stage_one", "stage_two"} <= entries:
        reason = f"it has no {MARKER} marker"
    else:
        return real
    raise OutputError(f"out-dir {out} exists and {reason}; choose another --out-dir, or --overwrite to replace it")


class Staging:
    """A fresh folder beside `out_dir` that becomes `out_dir` on commit (with preprocess's
    marker file, unless `marker` is None: another stage's output)."""

    def __init__(self, out_dir: Path, marker: str | None = MARKER):
        self.out_dir, self.marker = out_dir, marker
        self.path = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.partial")
        self.made = [p for p in out_dir.parents if not p.exists()]  # nearest first; removed on abort
        try:
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            self.path.mkdir()  # fails rather than reuse an existing folder
        except OSError as exc:
            raise OutputError(f"out-dir {out_dir}: cannot write there ({exc.strerror or exc})") from None

    def commit(self) -> Path:
        if self.marker is not None:
            (self.path / self.marker).write_text("Written by eric preprocess; the next run replaces this folder.\n")
        if self.out_dir.is_dir() and any(self.out_dir.iterdir()):
            _swap(self.path, self.out_dir)
        else:
            self.path.replace(self.out_dir)  # onto nothing or an empty folder: atomic
        return self.out_dir

    def abort(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        for folder in self.made:
            try:
                folder.rmdir()
            except OSError:  # not empty (someone else's) or gone
                break


def _swap(new: Path, out: Path) -> None:
    """Put `new` in place of the non-empty folder `out`, then delete the old output."""
    if _exchange(new, out):
        shutil.rmtree(new)  # `new` now holds the previous output
        return
    old = out.with_name(f".{out.name}.{secrets.token_hex(4)}.old")
    out.rename(old)
    try:
        new.rename(out)
    except OSError:
        old.rename(out)
        raise
    shutil.rmtree(old)


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
