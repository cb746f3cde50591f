"""tests/guard.py: a run whose tests write into the working tree fails and names the files."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from tests import guard


def test_tree_changes_lists_new_and_modified_files_but_not_ignored_ones(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("ignored.db\n")
    assert guard.tree_changes(tmp_path) == {"?? .gitignore"}
    (tmp_path / "ignored.db").write_text("x")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "eric.json").write_text("{}")
    assert guard.tree_changes(tmp_path) == {"?? .gitignore", "?? metrics/eric.json"}


def test_a_file_written_during_the_run_fails_it_and_earlier_changes_are_not_blamed(monkeypatch):
    config = SimpleNamespace(stash=pytest.Stash())
    session = SimpleNamespace(config=config, exitstatus=0)
    monkeypatch.setattr(guard, "tree_changes", lambda root=None: frozenset({" M README.md"}))
    guard.pytest_sessionstart(session)
    guard.pytest_sessionfinish(session, 0)
    assert session.exitstatus == 0  # changed before the run: not the tests' doing
    monkeypatch.setattr(guard, "tree_changes", lambda root=None: frozenset({" M README.md", "?? metrics/headline/eric.json"}))
    assert guard.written_by_tests(config) == ["?? metrics/headline/eric.json"]
    guard.pytest_sessionfinish(session, 0)
    assert session.exitstatus == 1
