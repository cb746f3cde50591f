"""Case studies: what the models wrote, unit by unit, in the report and in `eric show`."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eric.cli import app
from eric.evaluate.case_study import build_cases, case_at, split_mentions, split_units, unit_views
from eric.evaluate.errors import EvaluationError
from eric.evaluate.report import ReportInputs, display_name, write_report
from eric.world.generate import generate_stories
from tests.browser import headless_chromium, needs_browser

STAGE_ONE = "<sent> <e0> meets <e1> at the fair. <sent> <e1> leaves. <sent> Rain falls."
FINAL = "<sent> Ash Williams meets Linda at the fair. <sent> Linda leaves. <sent> Rain falls."


def _row(sid: str, stage_one: str = STAGE_ONE, final: str = FINAL, states=(None, 17, 4), **extra) -> dict:
    return {"id": sid, "input": f"input of {sid}", "stage_one": stage_one, "final_text": final,
            "reference": "<sent> A human unit. <sent> Another one.", "unit_entities": ["<e0>", "<e1>", "<none>"],
            "unit_states": list(states), **extra}


def test_a_final_text_splits_back_into_units_and_the_mentions_that_filled_each_placeholder():
    pieces = split_mentions(STAGE_ONE, FINAL)
    assert [p for p in pieces if p[1]] == [("Ash Williams", "<e0>"), ("Linda", "<e1>"), ("Linda", "<e1>")]
    units = split_units(pieces)
    assert ["".join(t for t, _ in u).strip() for u in units] == [
        "Ash Williams meets Linda at the fair.", "Linda leaves.", "Rain falls."]
    assert split_mentions(STAGE_ONE, "something else entirely") == [("something else entirely", None)]
    views = unit_views(_row("a"))
    assert [(v.entity, v.state) for v in views] == [("<e0>", None), ("<e1>", 17), ("<none>", 4)]
    assert views[1].stage_one == "<e1> leaves." and views[1].text == "Linda leaves."
    assert len(unit_views(_row("a"), max_units=2)) == 2


def test_cases_are_a_seeded_choice_of_inputs_every_variant_sampled():
    eric = [_row(f"s{k}") for k in range(10)]
    bart = [_row(f"s{k}", states=()) for k in range(10) if k != 3]  # bart lacks s3
    cases = build_cases({"eric": eric, "bart": bart}, count=4, seed=7)
    ids = [c.id for c in cases]
    assert len(ids) == 4 and "s3" not in ids and ids == sorted(ids, key=lambda i: int(i[1:]))
    assert ids == [c.id for c in build_cases({"eric": eric, "bart": bart}, count=4, seed=7)]
    assert ids != [c.id for c in build_cases({"eric": eric, "bart": bart}, count=4, seed=8)]
    assert cases[0].reference == ["A human unit.", "Another one."]
    assert list(cases[0].variants) == ["eric", "bart"] and cases[0].variants["bart"][1].state is None


def _world_row():
    """A generated story as a sample: its second unit moved to a place not in the scene
    (a grounding violation), its third unit garbled (unparsed), names in the final text."""
    story = list(generate_stories(seed=5, count=1, cast=(3, 4), events=4))[0]
    units = list(story.units)
    units[1] = re.sub(r"(in|to|at) the [a-z]+", r"\1 the lagoon", units[1], count=1)
    units[2] = "<e0> juggles the moon."
    name = lambda m: story.cast[int(m.group(1))]  # noqa: E731
    stage_one = "<sent> " + " <sent> ".join(units)
    return story, units, {"id": story.id, "input": story.scene, "stage_one": stage_one,
                          "final_text": re.sub(r"<e(\d+)>", name, stage_one), "reference": ""}


def test_world_cases_carry_the_checkers_verdict_per_unit():
    story, units, row = _world_row()
    case = build_cases({"eric": [row]}, count=1, seed=0, world=True)[0]
    verdicts = [u.verdict for u in case.variants["eric"]]
    assert verdicts[0] == "parsed" and verdicts[2] == "unparsed"
    if "the lagoon" in units[1]:  # the event names a place: moved outside the scene
        assert verdicts[1].startswith("breaks ") and "unknown_place" in verdicts[1]
    assert build_cases({"eric": [row]}, count=1, seed=0)[0].variants["eric"][0].verdict is None


def _report(tmp_path, world: bool = False):
    rows = {"eric": [_row("s1"), _row("s2")], "bart": [_row("s1", states=()), _row("s2", states=())]}
    cases = build_cases(rows, count=2, seed=0, world=world)
    inputs = ReportInputs({"eric": {}, "bart": {}}, cases=cases, explorers={"eric": "../analysis/eric/x.html"})
    return write_report(inputs, tmp_path / "reports")


def test_the_report_shows_every_variants_text_with_marked_mentions_and_state_links(tmp_path):
    paths = _report(tmp_path)
    markdown, page = paths["markdown"].read_text(), paths["html"].read_text()
    assert "## Case study" in markdown and "**Ash Williams**`<e0>`" in markdown and "**BART.**" in markdown
    assert "p\\_n &lt;e1&gt;, s\\_n 17" in markdown
    assert "<h2 id='case-study'>Case study</h2>" in page and page.count("data-variant='bart'") == 2
    assert "href='../analysis/eric/x.html#state-17'" in page and "<details><summary>stage one</summary>" in page
    assert "#state-" not in page.split("data-variant='bart'")[1].split("data-variant")[0]  # BART: no states


def test_no_cases_no_section(tmp_path):
    paths = write_report(ReportInputs({"eric": {}}), tmp_path)
    assert "Case study" not in paths["markdown"].read_text() and "case-study" not in paths["html"].read_text()


@needs_browser
def test_the_report_in_a_browser_shows_the_case_study_with_every_variants_text(tmp_path):
    from selenium.webdriver.common.by import By

    paths = _report(tmp_path)
    with headless_chromium(tmp_path) as driver:
        driver.get(paths["html"].as_uri())
        heading = driver.find_element(By.ID, "case-study")
        assert heading.is_displayed() and heading.text == "Case study"
        columns = driver.find_elements(By.CSS_SELECTOR, ".case-col[data-variant]")
        assert sorted(c.get_attribute("data-variant") for c in columns) == ["bart", "bart", "eric", "eric"]
        assert all("Ash Williams<e0> meets Linda<e1> at the fair." in c.text and "Rain falls." in c.text for c in columns)
        details = columns[0].find_element(By.TAG_NAME, "details")
        assert details.get_attribute("open") is None  # closed: the placeholder text is one click away
        details.find_element(By.TAG_NAME, "summary").click()
        assert details.get_attribute("open") is not None and "<e0> meets <e1>" in details.text


def _samples(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_eric_show_prints_one_input_with_each_files_story(tmp_path):
    a = _samples(tmp_path / "eric.parquet", [_row("s1"), _row("s2", final=FINAL.replace("Linda", "Cheryl"),
                                                                  stage_one=STAGE_ONE)])
    b = _samples(tmp_path / "bart.parquet", [_row("s2", states=(), unit_entities=[]),
                                             _row("s1", states=(), unit_entities=[])])
    result = CliRunner().invoke(app, ["show", str(a), str(b), "--index", "1", "--params", str(tmp_path / "none.yaml")],
                                env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "input s2" in result.output and "Cheryl<e1> leaves." in result.output and "BART" in result.output
    assert "p_n <e1>, s_n 17" in result.output and "A human unit." in result.output
    assert "BART (no planner, no states)" in result.output  # not an empty plan column
    assert result.output.count(" plan ") == 1  # ERIC's column only


@pytest.mark.parametrize("args, message", [
    (["missing.parquet"], "no samples file"),
    (["not.parquet"], "not a samples Parquet file"),
    (["eric.parquet", "--index", "5"], "--index 5: the first file has 1 inputs"),
    ([], "name samples files or --variant"),
])
def test_eric_show_names_a_bad_input_in_one_line(tmp_path, args, message):
    _samples(tmp_path / "eric.parquet", [_row("s1")])
    (tmp_path / "not.parquet").write_text("plain text")
    result = CliRunner().invoke(app, ["show", *(str(tmp_path / a) if a.endswith(".parquet") else a for a in args),
                                      "--params", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_case_at_needs_the_input_in_every_file():
    with pytest.raises(EvaluationError, match="not in the samples of bart"):
        case_at({"eric": [_row("s1")], "bart": [_row("s2")]}, 0)
    assert display_name("eric") == "ERIC"


def test_a_samples_preview_shows_the_first_stories_unit_by_unit_as_text():
    """The Markdown MLflow shows beside each samples Parquet file (eric/review.py log_preview)."""
    from eric.evaluate.case_study import samples_preview

    rows = [_row(f"s{i}") for i in range(12)]
    text = samples_preview("eric", rows, "ERIC", count=3)
    assert text.startswith("# ERIC: samples preview (3 of 12 stories)")
    assert [m for m in re.findall(r"### Case \d+: (\S+)", text)] == ["s0", "s1", "s2"]  # the first, in order
    assert "1. **Ash Williams**`<e0>` meets **Linda**`<e1>` at the fair." in text
    assert "input of s0" in text and "A human unit." in text
    assert samples_preview("eric", rows[:2], "ERIC").startswith("# ERIC: samples preview (all 2 stories)")


def test_the_review_logs_a_preview_beside_each_samples_file(tmp_path):
    from mlflow import MlflowClient

    from eric.generate.schema import write_samples
    from eric.review import log_report

    checkout = tmp_path / "checkout"
    write_samples([_row("s0"), _row("s1")], checkout / "outputs/samples/eric.parquet")
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.create_run(client.create_experiment("e", artifact_location=str(tmp_path / "art")))
    log_report(client, run.info.run_id, checkout, {}, ["eric", "bart"])  # bart: no samples, nothing logged
    logged = sorted(a.path for a in client.list_artifacts(run.info.run_id, "samples"))
    assert logged == ["samples/eric.parquet", "samples/eric.preview.md"]
    preview = (tmp_path / "art" / run.info.run_id / "artifacts/samples/eric.preview.md").read_text()
    assert preview.startswith("# eric: samples preview (all 2 stories)") and "Case 2: s1" in preview
