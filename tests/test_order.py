"""The shuffled test order is pytest-randomly's (requirements.txt): every run of the suite shuffles
the test files and the tests within each (and reseeds random, numpy and torch before each test),
with its seed printed in the header and, for a quiet run, again at the end (tests/conftest.py);
`-p randomly --randomly-seed=N` replays that order and those seeds."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from eric.config import PROJECT_ROOT


@pytest.fixture
def three_files(pytester):
    """Three files of five tests each, run by pytest in this process, outside the project's configuration."""
    pytester.makepyfile(**{f"test_{n}": "".join(f"def test_{n}{k}():\n    pass\n" for k in range(5)) for n in "abc"})
    return pytester


def _collected(pytester, *args: str) -> list[str]:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "-q", *args)
    return [line.split("::")[1] for line in result.outlines if "::" in line]


def test_a_seed_gives_one_shuffled_order_with_every_test_and_files_together(three_files):
    plain = _collected(three_files, "-p", "no:randomly")
    first = _collected(three_files, "-p", "randomly", "--randomly-seed=7")
    assert first == _collected(three_files, "-p", "randomly", "--randomly-seed=7")
    assert sorted(first) == sorted(plain) and len(plain) == 15
    assert first != plain and first != _collected(three_files, "-p", "randomly", "--randomly-seed=8")
    files = [name[5] for name in first]  # test_a3 -> "a"
    assert [f for k, f in enumerate(files) if k == 0 or files[k - 1] != f] == sorted(set(files), key=files.index)
    header = three_files.runpytest_inprocess("-p", "no:cacheprovider", "-p", "randomly", "--randomly-seed=7")
    header.assert_outcomes(passed=15)
    assert "Using --randomly-seed=7" in header.outlines


def test_without_the_plugin_the_files_keep_their_own_order(three_files):
    assert _collected(three_files, "-p", "no:randomly") == [f"test_{n}{k}" for n in "abc" for k in range(5)]
    result = three_files.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    assert not [line for line in result.outlines if "randomly-seed" in line]


def test_the_suite_runs_shuffled_and_a_quiet_run_prints_its_seed_at_the_end():
    """The project's own configuration (pyproject's quiet addopts, tests/conftest.py): the plugin is
    on without being asked for, and the seed is printed where a failure is read."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "tests/test_order.py"],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, check=False).stdout
    last = r"^Using --randomly-seed=\d+ \(pass it to repeat this order and these seeds\)$"
    assert re.search(last, out, re.MULTILINE), out[-2000:]
