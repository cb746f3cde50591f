"""From the sample stage's own output (the tiny project's real sampler, as `dvc repro`
runs it) to Table 3 in the report: prepare with the project's params, three simulated
annotators, score into the default folder, and the report stage picks it up."""

from __future__ import annotations

from typer.testing import CliRunner

from eric.cli import app
from eric.humaneval.study import read_key
from tests.generate.conftest import _tiny_models_on_one_thread, tiny_project  # noqa: F401 (fixtures)
from tests.humaneval.conftest import simulate, write_page_exports


def test_samples_to_table_3_in_the_report(tiny_project, tmp_path):  # noqa: F811
    import evaluate as evaluate_stage  # stages/ is on sys.path (tests/generate/conftest.py)
    import report as report_stage
    import sample as sample_stage

    params = tiny_project / "params.yaml"
    for variant in ("eric", "bart"):
        sample_stage.run.fn(variant, str(params))
        evaluate_stage.run.fn(variant, str(params))  # the report needs every variant's metrics
    runner = CliRunner()
    prepared = runner.invoke(app, ["humaneval", "prepare", "--a", "eric", "--b", "bart", "--params", str(params)])
    assert prepared.exit_code == 0, prepared.output
    study = tiny_project / "outputs" / "humaneval" / "eric_vs_bart"
    assert all((study / f).is_file() for f in ("key.json", "page/annotate.html", "mturk/batch.csv",
                                               "mturk/question.html", "labelstudio/config.xml",
                                               "labelstudio/tasks.json"))
    key = read_key(study / "key.json")
    assert len(key.items) == 6  # every test input of the tiny project (fewer than --n 200)
    files = write_page_exports(key, simulate(key, seed=2), tmp_path / "answers")
    scored = runner.invoke(app, ["humaneval", "score", *map(str, files), "--key", str(study / "key.json"),
                                 "--params", str(params)])  # train.mlflow: false in the tiny project
    assert scored.exit_code == 0, scored.output
    assert (tiny_project / "metrics" / "humaneval" / "eric_vs_bart.json").is_file()
    paths = report_stage.run.fn(str(params))
    markdown = open(paths["markdown"]).read()
    assert "## Manual evaluation (as the paper's Table 3)" in markdown
    assert "| ERIC vs. BART |" in markdown and "6 of 6 items scored, 3 annotators each" in markdown
