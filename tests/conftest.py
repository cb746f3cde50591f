"""Shared fixtures: small corpora written to tmp_path in each format."""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path

# DVC binds its log handlers to sys.stdout / stderr when first imported: imported first inside a
# test, they kept that test's captured streams, closed after it ("I/O operation on closed file")
import dvc  # noqa: F401
import pytest

from eric.config import PROJECT_ROOT, load_params

pytest_plugins = ["tests.guard", "pytester"]  # the working tree left alone; pytester: tests/test_order.py


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """pytest-randomly's seed again at the end, where a failure is read: a quiet run (pyproject's
    `-q`) shows no header, where pytest-randomly prints it."""
    seed = config.getoption("randomly_seed", None)
    if seed is not None and config.getoption("randomly_reorganize", False):
        terminalreporter.write_line(f"Using --randomly-seed={seed} (pass it to repeat this order and these seeds)")


def pytest_configure(config):
    """Under pytest-xdist (pyproject's addopts) each worker is one of several processes on the
    machine's cores: one thread each (torch's, and its child processes' through
    OMP_NUM_THREADS), not a pool per core in every worker."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)


# stages/ and flows/ are script folders (DVC and Prefect run their files by path); their
# modules import their siblings by bare name, so tests import them that way too
for _folder in ("stages", "flows"):
    if str(PROJECT_ROOT / _folder) not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT / _folder))


@pytest.fixture(autouse=True)
def no_launcher_env_between_tests(monkeypatch):
    """In-process training sets the launcher variables (MASTER_PORT, ...: eric/train/runtime.py);
    left in os.environ, they would make a later test's child process take this process's port
    for a launcher's. Each test starts without them and leaves none behind."""
    from tests.e2e.services import LAUNCHER_ENV

    for key in (*LAUNCHER_ENV, "ERIC_OWN_MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)

WIKIPLOTS_MINI = PROJECT_ROOT / "corpora" / "wikiplots-mini" / "plots.zip"  # the embedded default
WIKIBIO_MINI = PROJECT_ROOT / "tests" / "fixtures" / "wikibio-25.jsonl.gz"  # 25 articles of the second corpus

STORY_A = [
    "Ash Williams drives to a cabin in the woods with his friends.",
    "Ash and Linda find a tape recorder in the cellar.",
    "The tape releases an evil force that possesses Linda.",
    "Ash Williams fights the demons through the night.",
    "Scotty leaves to find help but returns wounded.",
    "Linda attacks Ash, who buries her near the cabin.",
    "At dawn Ash believes the evil has gone.",
]
STORY_B = [
    "A young reporter arrives in a small town.",
    "Mary Jones works at the Daily Planet with her editor.",
    "The Daily Planet sends her to cover a strike.",
    "Mary meets the union leader Tom Carter.",
    "Tom Carter asks Mary to publish the miners' story.",
    "Her editor refuses and Mary quits the paper.",
]


def plots_bytes(stories: list[list[str]]) -> bytes:
    return "".join("\n".join(s) + "\n<EOS>\n" for s in stories).encode()


@pytest.fixture
def write_wikiplots(tmp_path: Path):
    def write(stories, titles=None, name="plots.zip", plots_raw: bytes | None = None) -> Path:
        titles = titles if titles is not None else [f"Story {i}" for i in range(len(stories))]
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("plots", plots_raw if plots_raw is not None else plots_bytes(stories))
            if titles is not False:
                zf.writestr("titles", "\n".join(titles) + "\n")
        return path

    return write


@pytest.fixture
def write_jsonl(tmp_path: Path):
    def write(lines: list, name="corpus.jsonl.gz") -> Path:
        raw = b"".join(
            (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines
        )
        path = tmp_path / name
        path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
        return path

    return write


@pytest.fixture
def write_cnn_tgz(tmp_path: Path):
    def write(stories: dict[str, str]) -> Path:
        path = tmp_path / "cnn_stories.tgz"
        with tarfile.open(path, "w:gz") as tar:
            for name, text in stories.items():
                data = text.encode()
                info = tarfile.TarInfo(f"cnn/stories/{name}.story")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    return write


@pytest.fixture
def params_for(tmp_path: Path):
    """Params pointing at a corpus, writing into tmp_path/out."""

    def make(path: Path, kind: str, **preprocess):
        overrides = {"corpus.path": str(path), "corpus.kind": kind, "preprocess.out_dir": str(tmp_path / "out")}
        overrides.update({f"preprocess.{k}": v for k, v in preprocess.items()})
        return load_params(None, overrides)

    return make
