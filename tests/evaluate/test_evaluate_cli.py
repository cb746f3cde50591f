"""`eric evaluate` end to end, including the paper's Table 2 on the authors' released texts."""

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eric.cli import app
from eric.config import PROJECT_ROOT

RELEASED = PROJECT_ROOT.parent / "shared" / "data" / "eric-released" / "wikiplots_ERIC.txt"
PARAMS = PROJECT_ROOT / "params.yaml"


def run(*args):
    return CliRunner().invoke(app, ["evaluate", *map(str, args), "--params", str(PARAMS)])


def printed(output: str) -> dict[str, str]:
    """Metric -> value as shown in the rich table."""
    return dict(re.findall(r"│ ([A-Za-z]+-?\d*)\s*│\s*([\d.]+) │", output))


def test_released_eric_generations_reproduce_table_2(tmp_path):
    assert RELEASED.is_file(), f"{RELEASED} is needed (the authors' released generations)"
    result = run(RELEASED, "--out", tmp_path / "m.json")
    assert result.exit_code == 0, result.output
    shown = printed(result.output)
    # Paper, Table 2 (ERIC, WikiPlots): exact to the printed digit.
    assert {k: shown[k] for k in ("Rpt-16", "Rpt-32", "Rpt-64", "D-3", "D-4", "Zipf", "Len")} == {
        "Rpt-16": "16.22", "Rpt-32": "28.12", "Rpt-64": "37.06",
        "D-3": "75.94", "D-4": "93.02", "Zipf": "1.11", "Len": "236",
    }  # fmt: skip
    saved = json.loads((tmp_path / "m.json").read_text())
    assert saved["n_texts"] == 1000 and saved["format"] == "released" and saved["skipped_lines"] == 0
    assert "B-1" not in saved and "MAUVE" not in saved  # no references given


def test_parquet_with_references_writes_metrics_json(tmp_path):
    gens = ["<sent> Ash finds the cabin . <sent> Ash runs .", "<sent> The ship sinks ."]
    refs = ["<sent> Ash finds the cabin . <sent> Linda hides .", "<sent> The ship sails ."]
    path = tmp_path / "samples.parquet"
    table = pa.table({"input": ["In the woods .", "At sea ."], "final_text": gens, "reference": refs})
    pq.write_table(table, path)
    result = run(path, "--no-mauve", "--out", tmp_path / "out" / "metrics.json")
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert saved["n_references"] == 2 and saved["references"] == "(own column)"
    assert 0 < saved["B-2"] < saved["B-1"] < 100
    assert 0 < saved["MSJ-2"] < saved["MSJ-1"] < 100
    assert "MAUVE" not in saved
    assert printed(result.output)["B-1"] == f"{saved['B-1']:.2f}"


def test_references_file_and_max_units_override(tmp_path):
    (tmp_path / "gen.txt").write_text("a b c . d e f .\nx y z .\n")
    (tmp_path / "ref.txt").write_text("a b c . d e f .\nx y z .\n")
    result = run(tmp_path / "gen.txt", "-r", tmp_path / "ref.txt", "--no-mauve", "--out", tmp_path / "m.json")
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "m.json").read_text())
    assert saved["B-1"] == pytest.approx(100.0) and saved["MSJ-2"] == pytest.approx(100.0)


def test_minilm_mauve_through_the_cli(tmp_path):
    themes = ["Ash fights demons in the cabin .", "The crew sails into a storm .", "A detective solves it ."]
    gens = [f"<sent> {themes[i % 3]} <sent> Day {i} ends ." for i in range(24)]
    refs = [f"<sent> {themes[(i + 1) % 3]} <sent> Night {i} falls ." for i in range(24)]
    path = tmp_path / "gen.jsonl"
    path.write_text("".join(json.dumps({"text": g, "reference": r}) + "\n" for g, r in zip(gens, refs)))
    result = run(path, "--mauve", "--seed", "5", "--out", tmp_path / "m.json")
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "m.json").read_text())
    assert 0 < saved["MAUVE"] <= 100
    assert saved["mauve_seed"] == 5 and saved["mauve_featurizer"].startswith("all-MiniLM-L6-v2")
    assert "MAUVE: all-MiniLM-L6-v2" in result.output


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--featurizer", "/no/such/gpt2"], "not 'minilm' and not a local GPT-2 folder"),
        (["--max-units", "0"], "evaluate.max_units"),
        (["--format", "xml"], "unknown format"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, extra, message):
    (tmp_path / "gen.txt").write_text("a story .\nanother .\n")
    result = run(tmp_path / "gen.txt", "-r", tmp_path / "gen.txt", *extra)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
