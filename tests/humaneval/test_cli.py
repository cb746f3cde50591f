"""The two commands end to end: prepare from a project's samples, simulated annotators'
answers in all three formats, score to a Table-3 layout (markdown, report, MLflow);
bad input exits with one line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from eric.cli import app
from eric.evaluate.report import ReportInputs, to_html, to_markdown
from eric.humaneval.command import read_scores
from eric.humaneval.study import read_key
from eric.humaneval.table import report_section
from tests.humaneval.conftest import simulate, write_labelstudio_export, write_mturk_results, write_page_exports

runner = CliRunner()


def _prepare(tmp_path, params_file, *extra):
    out = tmp_path / "study"
    result = runner.invoke(app, ["humaneval", "prepare", "--a", "eric", "--b", "bart", "--n", "10",
                                 "--out", str(out), "--params", str(params_file), *extra])
    assert result.exit_code == 0, result.output
    return out, read_key(out / "key.json")


def test_prepare_then_score_three_formats(tmp_path, params_file, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    out, key = _prepare(tmp_path, params_file)
    answers = simulate(key, seed=11)
    by_worker = {w: [a for a in answers if a["annotator"] == w] for w in ("worker1", "worker2", "worker3")}
    files = [*write_page_exports(key, by_worker["worker1"], tmp_path / "page"),  # one annotator per format
             write_mturk_results(key, by_worker["worker2"], tmp_path / "mturk.csv"),
             write_labelstudio_export(key, by_worker["worker3"], tmp_path / "ls.json")]
    scores = tmp_path / "scores"
    result = runner.invoke(app, ["humaneval", "score", *map(str, files), "--key", str(out / "key.json"),
                                 "--out", str(scores)])
    assert result.exit_code == 0, result.output
    assert "| Comparison | Informativeness (Win / Lose / Tie) | Coherence (Win / Lose / Tie) |" in result.output
    assert "| ERIC vs. BART |" in result.output
    [scored] = read_scores(scores)
    assert scored["items_scored"] == 10 and scored["problems"] == {}
    info = scored["informativeness"]
    assert info["win"] + info["lose"] + info["tie"] == 100.0

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    [run] = client.search_runs([client.get_experiment_by_name("wikiplots-mini").experiment_id],
                               filter_string="tags.stage = 'humaneval'")
    assert run.data.tags["variant"] == "eric_vs_bart"
    assert run.data.metrics["informativeness.win"] == info["win"]
    assert run.data.params["study_id"] == key.study_id

    report = ReportInputs(metrics={}, humaneval=report_section(read_scores(scores)))
    assert "## Manual evaluation (as the paper's Table 3)" in to_markdown(report, {})
    assert "ERIC vs. BART" in to_html(report, {})


def test_problems_are_warned_and_strict_fails(tmp_path, params_file):
    out, key = _prepare(tmp_path, params_file)
    answers = [a for a in simulate(key) if a["annotator"] != "worker3" or a["item_id"] != key.items[0]["item_id"]]
    files = [str(p) for p in write_page_exports(key, answers, tmp_path / "page")]
    args = ["humaneval", "score", *files, "--key", str(out / "key.json"), "--out", str(tmp_path / "s"), "--no-mlflow"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0
    assert "fewer annotators than the key asks for (not scored): 1" in result.output
    assert "9 of 10 items scored" in result.output
    strict = runner.invoke(app, [*args, "--strict"])
    assert strict.exit_code == 2 and "Traceback" not in strict.output
    assert "error: study" in strict.output and len(strict.output.strip().splitlines()) == 1


def test_bad_input_exits_with_one_line(tmp_path, params_file):
    out, key = _prepare(tmp_path, params_file)
    (tmp_path / "junk.json").write_text("{")
    (tmp_path / "other.json").write_text(json.dumps({"format": "eric-humaneval-answers", "study_id": "zzz",
                                                     "annotator": "x", "answers": [{"item_id": "001"}]}))
    cases = [
        (["humaneval", "score", str(tmp_path / "junk.json"), "--key", str(out / "key.json")], "not JSON"),
        (["humaneval", "score", str(tmp_path / "other.json"), "--key", str(out / "key.json")], "study zzz"),
        (["humaneval", "score", str(tmp_path / "junk.json"), "--key", str(tmp_path / "junk.json")], "key file"),
        (["humaneval", "prepare", "--a", "eric", "--b", "nothing", "--params", str(params_file)], "no samples"),
        (["humaneval", "prepare", "--a", "eric", "--b", "bart", "--n", "0", "--params", str(params_file)],
         "at least 1"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
