"""`eric ... --help` shows every default a command documents (rich reads `[...]` as markup)."""

from __future__ import annotations

import click
import typer
from typer.testing import CliRunner

from eric.cli import app


def _commands(command: click.Command, path: tuple[str, ...] = ()):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_no_help_text_hides_a_default_in_brackets():
    """A `[default: ...]` written into help vanishes from the rendered help: it goes in show_default."""
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            assert "[" not in (getattr(param, "help", None) or ""), (" ".join(path), param.name)


def test_the_show_command_prints_its_computed_defaults():
    result = CliRunner().invoke(app, ["show", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0
    assert "when params corpus.kind is world" in result.output and "evaluate.max_units" in result.output
