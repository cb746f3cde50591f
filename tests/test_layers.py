"""The layer contract (.importlinter, import-linter): a module of `eric` imports only from
the layers below it (cli > review > humaneval > evaluate > generate > train > tracking >
model > world > data > config > env)."""

from __future__ import annotations

import os
import subprocess
import sys

from eric.config import PROJECT_ROOT

LINT = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()", "--no-cache"]


def _lint(cwd, config=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    args = [*LINT, *(["--config", str(config)] if config else [])]
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_eric_keeps_its_layers():
    done = _lint(PROJECT_ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken." in done.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The same kind of contract on a two-layer package whose lower layer imports the upper."""
    pkg = tmp_path / "toy"
    for module, body in {"__init__.py": "", "data.py": "from toy import evaluate\n", "evaluate.py": "X = 1\n"}.items():
        (pkg / module).parent.mkdir(parents=True, exist_ok=True)
        (pkg / module).write_text(body)
    config = tmp_path / ".importlinter"
    config.write_text("[importlinter]\nroot_package = toy\n\n[importlinter:contract:layers]\nname = toy layers\n"
                      "type = layers\nlayers =\n    toy.evaluate\n    toy.data\n")
    done = _lint(tmp_path, config)
    assert done.returncode == 1 and "toy.data is not allowed to import toy.evaluate" in done.stdout
