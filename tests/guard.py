"""The suite leaves the project's working tree as it found it: a test that writes into the
repository (a params path resolved against the project instead of its tmp folder, ...)
fails the run, and the files are named. Ignored paths (.venv, mlflow.db, ...) are not
watched; files already changed before the run are not blamed."""

from __future__ import annotations

import subprocess

import pytest

from eric.config import PROJECT_ROOT

BEFORE = pytest.StashKey[frozenset]()


def tree_changes(root=PROJECT_ROOT) -> frozenset[str]:
    """`git status` lines of `root` (tracked and untracked, not ignored); empty outside git."""
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                          capture_output=True, text=True, check=False)  # fmt: skip
    return frozenset(done.stdout.splitlines()) if done.returncode == 0 else frozenset()


def pytest_sessionstart(session):
    session.config.stash[BEFORE] = tree_changes()


def written_by_tests(config) -> list[str]:
    return sorted(tree_changes() - config.stash.get(BEFORE, frozenset()))


def pytest_sessionfinish(session, exitstatus):
    if written_by_tests(session.config) and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    written = written_by_tests(config)
    if written:
        terminalreporter.write_line(f"the tests changed the project's working tree ({len(written)}): "
                                    + ", ".join(written[:10]), red=True)
