"""Tests in a shuffled order (`--random-order SEED`, or `random` for a new seed, printed in the
header; `off` for the files' own order): test files in a shuffled order, and the tests of each file shuffled too, so a test
that needs another test's files or state fails. pytest-randomly does this; it is not in this
project's offline package index, so the few lines it needs live here.

    python -m pytest --random-order random      # a new order; the header prints its seed
    python -m pytest --random-order 123456      # that order again
    python -m pytest --random-order off         # the files' own order

pyproject's addopts shuffle every run (as pytest-randomly does), CI's included.
"""

from __future__ import annotations

import os
import random

import pytest

SEED = pytest.StashKey[str]()


def pytest_addoption(parser):
    parser.addoption("--random-order", metavar="SEED", default=os.environ.get("ERIC_TEST_ORDER"),
                     help="shuffle files and the tests within each with SEED ('random': a new seed, printed); "
                          "'off': the files' own order; default: $ERIC_TEST_ORDER, else the files' own order")


def pytest_configure(config):
    seed = config.getoption("--random-order")
    if seed == "random":
        seed = str(random.SystemRandom().randrange(1_000_000))
    if seed and seed != "off":
        config.stash[SEED] = seed


def pytest_report_header(config):
    seed = config.stash.get(SEED, None)
    return f"test order: shuffled with seed {seed} (--random-order {seed} repeats it)" if seed else None


def pytest_collection_modifyitems(config, items):
    seed = config.stash.get(SEED, None)
    if not seed:
        return
    rng = random.Random(seed)
    files: dict[str, list] = {}
    for item in items:  # a file's tests stay together: its module-scoped fixtures are built once
        files.setdefault(str(item.path), []).append(item)
    groups = list(files.values())
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    items[:] = [item for group in groups for item in group]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The seed again at the end (a quiet run has no header), where a failure is read."""
    seed = config.stash.get(SEED, None)
    if seed:
        terminalreporter.write_line(f"test order: shuffled with seed {seed} (--random-order {seed} repeats it)")
