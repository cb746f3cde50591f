"""`eric evaluate` end to end, on texts of the project's own (the paper's table on the authors'
released texts: benchmarks/check_released.py, an optional input)."""

import json
import math
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eric.cli import app
from eric.config import PROJECT_ROOT

PARAMS = PROJECT_ROOT / "params.yaml"


def run(*args):
    return CliRunner().invoke(app, ["evaluate", *map(str, args), "--params", str(PARAMS)])


def printed(output: str) -> dict[str, str]:
    """Metric -> value as shown in the rich table."""
    return dict(re.findall(r"│ ([A-Za-z]+-?\d*)\s*│\s*([\d.]+) │", output))


def test_released_format_scored_by_hand(tmp_path):
    """Two texts in the authors' released layout; every reference-free metric by hand.
    Tokens: [a b a b .] and [a b a c .]. Rpt-16 (window 15): 2/5 and 1/5 -> 30.00;
    D-3: trigrams aba bab ab. aba bac ac. -> 5 distinct / 6 = 83.33; D-4: 4 / 4 -> 100;
    Len 5; Zipf: counts a 4, b 3, . 2, c 1 at ranks 1..4 -> minus the least-squares slope."""
    path = tmp_path / "wikiplots_ERIC.txt"
    path.write_text("prompt one|||<mask>a b<mask>a b .\nprompt two|||<mask>a b a c .\n")
    result = run(path, "--out", tmp_path / "m.json")
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "m.json").read_text())
    assert saved["n_texts"] == 2 and saved["format"] == "released" and saved["skipped_lines"] == 0
    x = [math.log(r) for r in (1, 2, 3, 4)]
    y = [math.log(c) for c in (4, 3, 2, 1)]
    mx, my = sum(x) / 4, sum(y) / 4
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x)
    expected = {"Rpt-16": 30.0, "Rpt-32": 30.0, "Rpt-64": 30.0, "D-3": 500 / 6, "D-4": 100.0, "Len": 5.0,
                "Zipf": -slope}
    assert {k: round(saved[k], 6) for k in expected} == {k: round(v, 6) for k, v in expected.items()}
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
