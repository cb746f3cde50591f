"""`eric preprocess` as a user runs it: paths from the current folder, one-line errors."""

import pytest
from typer.testing import CliRunner

from eric.cli import app
from eric.config import PROJECT_ROOT
from tests.conftest import STORY_A, STORY_B


@pytest.fixture
def in_folder(tmp_path, monkeypatch, write_wikiplots):
    """The current folder is tmp_path (no params.yaml), holding plots.zip."""
    write_wikiplots([STORY_A, STORY_B])
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(app, ["preprocess", *args])


def test_relative_paths_resolve_against_the_current_folder(in_folder):
    result = invoke("--params", str(PROJECT_ROOT / "params.yaml"), "--corpus", "plots.zip", "--out-dir", "out")
    assert result.exit_code == 0, result.output
    assert (in_folder / "out" / "stats.json").is_file()
    assert "| plots | train |" in result.stdout  # named after the corpus file


def test_outside_a_project_the_defaults_apply(in_folder):
    result = invoke("--corpus", "plots.zip")
    assert result.exit_code == 0, result.output
    assert (in_folder / "data" / "processed" / "stats.json").is_file()


def test_an_out_dir_eric_did_not_write_is_a_one_line_error(in_folder):
    (in_folder / "mine").mkdir()
    (in_folder / "mine" / "notes.txt").write_text("keep")
    result = invoke("--corpus", "plots.zip", "--out-dir", "mine")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "error: out-dir" in result.stderr and "--overwrite" in result.stderr
    assert (in_folder / "mine" / "notes.txt").read_text() == "keep"
    assert invoke("--corpus", "plots.zip", "--out-dir", "mine", "--overwrite").exit_code == 0


def test_the_papers_mention_rule_is_one_flag_away(in_folder):
    import json

    assert invoke("--corpus", "plots.zip", "--mentions", "paper").exit_code == 0
    assert json.loads((in_folder / "data" / "processed" / "stats.json").read_text())["mentions_mode"] == "paper"
    bad = invoke("--corpus", "plots.zip", "--mentions", "fuzzy", "--overwrite")
    assert bad.exit_code != 0 and "mentions" in bad.output + bad.stderr
