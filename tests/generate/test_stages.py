"""sample@v -> evaluate@v -> report on the tiny project, as DVC runs them (without Prefect: run.fn)."""

from __future__ import annotations

import json

import evaluate as evaluate_stage
import pytest
import report as report_stage
import sample as sample_stage

from eric.config import ParamsError
from eric.evaluate.errors import EvaluationError
from eric.evaluate.state_transitions import read_transitions
from eric.generate.command import TIMED
from eric.generate.errors import SampleError
from eric.generate.merge import PLACEHOLDER
from eric.generate.schema import read_metadata, read_samples
from tests.generate.tiny import NUM_STATES

TABLE_2 = ["Rpt-16", "Rpt-32", "Rpt-64", "D-3", "D-4", "Zipf", "Len", "B-1", "B-2", "MSJ-1", "MSJ-2"]


@pytest.fixture(scope="module")
def pipeline(tiny_project):
    params = str(tiny_project / "params.yaml")
    summaries = {v: sample_stage.run.fn(v, params) for v in ("eric", "bart")}
    metrics = {v: evaluate_stage.run.fn(v, params) for v in ("eric", "bart")}
    paths = report_stage.run.fn(params)
    return tiny_project, summaries, metrics, paths


def test_sample_stage_writes_one_row_per_test_input(pipeline):
    root, summaries, _, _ = pipeline
    rows = read_samples(root / "outputs" / "samples" / "eric.parquet")
    assert len(rows) == 6 and summaries["eric"]["stories"] == 6
    assert all(r["reference"] and r["final_text"] for r in rows)
    meta = read_metadata(root / "outputs" / "samples" / "eric.parquet")
    assert meta["variant"] == "eric" and meta["options"]["max_length"] == 24 and meta["options"]["seed"] == 42
    assert meta["options"]["decoding"] == "shared" and meta["stage_one_decoding"]["top_p"] == 0.9


def test_a_rerun_of_the_sample_stage_writes_the_same_file(pipeline):
    """No wall time in the samples file: a rerun with the same texts leaves its bytes (and so
    both evaluate stages, which depend on it) alone; the timings go to the stage's log."""
    root, summaries, _, _ = pipeline
    path = root / "outputs" / "samples" / "eric.parquet"
    before = path.read_bytes()
    again = sample_stage.run.fn("eric", str(root / "params.yaml"))
    assert path.read_bytes() == before
    assert "seconds" in again and "seconds" not in read_metadata(path)["summary"]
    assert {k: v for k, v in again.items() if k not in TIMED} == read_metadata(path)["summary"]


def test_evaluate_stage_writes_metrics_and_analyses(pipeline):
    root, _, metrics, _ = pipeline
    saved = json.loads((root / "metrics" / "evaluate" / "eric.json").read_text())
    assert saved == json.loads(json.dumps(metrics["eric"]))
    assert all(name in saved for name in TABLE_2) and "MAUVE" not in saved  # mauve: false in the tiny params
    assert 0 <= saved["mention_control"] <= 1 and saved["mention_control_units"] > 0
    assert 0 < saved["states_used"] <= NUM_STATES and saved["num_states"] == NUM_STATES
    assert set(saved["coherence"]) == {"eric", "eric (random states)"}
    rows = read_samples(root / "outputs" / "samples" / "eric.parquet")
    placeholders = sum(len(PLACEHOLDER.findall(r["stage_one"])) for r in rows)
    fallback = saved["fallback"]
    assert fallback["occurrences"] == placeholders == sum(fallback[k] for k in ("generated", "reused_last",
                                                                              "random_name"))
    folder = root / "outputs" / "analysis"
    assert {p.name for p in (folder / "eric").iterdir()} == {"coherence.csv", "state_usage.csv",
                                                             "state_transitions.csv", "state_explorer.html"}
    moves = read_transitions(folder / "eric" / "state_transitions.csv")
    assert saved["state_transitions"] == sum(r["count"] for r in moves) and saved["state_transition_pairs"] == len(moves)
    bart = metrics["bart"]  # one-stage (the paper's BART): the coherence test swaps placeholders it never writes
    assert list((folder / "bart").iterdir()) == [] and (saved["form"], bart["form"]) == ("two-stage", "one-stage")
    assert "coherence" not in bart and "states_used" not in bart and "mention_control" not in bart


def test_report_has_every_variant_and_truth(pipeline):
    root, _, _, paths = pipeline
    markdown = (root / "reports" / "results.md").read_text()
    for name in ("| ERIC |", "| BART |", "| Truth |", "coherence.png", "state_usage.png", "tiny preset",
                 "## State transitions"):
        assert name in markdown
    assert {p.name for p in (root / "reports").iterdir()} >= {"results.md", "results.html", "coherence.png",
                                                             "state_usage.png"}
    assert set(paths) == {"markdown", "html", "coherence", "state_usage"}


def test_bad_variant_or_missing_inputs_are_user_errors(tiny_project, tmp_path):
    params = str(tiny_project / "params.yaml")
    with pytest.raises(ParamsError, match="unknown variant 'nope'"):
        sample_stage.run.fn("nope", params)
    with pytest.raises(EvaluationError, match="no samples .*sample@seq2seq"):
        evaluate_stage.run.fn("seq2seq", params)
    broken = tmp_path / "params.yaml"
    broken.write_text((tiny_project / "params.yaml").read_text().replace(
        str(tiny_project / "models" / "mentions"), str(tmp_path / "none")))
    with pytest.raises(SampleError, match="no mention model here") as info:
        sample_stage.run.fn("eric", str(broken))
    assert "\n" not in str(info.value)


def test_metrics_go_to_the_variants_mlflow_run(pipeline, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from eric.config import load_params
    from eric.tracking import find_run, start_run

    root, _, metrics, paths = pipeline
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = load_params(root / "params.yaml", {"train.mlflow": True})
    corpus = params.corpus.name
    start_run(corpus, stage="train_stage_one", variant="eric").finish()  # as training leaves it
    train_run = find_run(corpus, stage="train_stage_one", variant="eric")

    for variant in ("eric", "bart"):
        evaluate_stage.save.fn(params, variant, metrics[variant])
    client = MlflowClient(uri)
    eric_run = client.get_run(find_run(corpus, stage="evaluate", variant="eric"))  # a run of its own
    assert eric_run.info.run_id != train_run and eric_run.data.tags["eric.train_run_id"] == train_run
    logged = eric_run.data.metrics
    assert logged["eval.Rpt-16"] == pytest.approx(metrics["eric"]["Rpt-16"])
    assert logged["eval.coherence.eric_random_states.accuracy"] == pytest.approx(
        metrics["eric"]["coherence"]["eric (random states)"]["accuracy"])
    assert "eval.states_used" in logged and eric_run.info.status == "FINISHED"
    assert client.get_run(train_run).data.metrics == {}  # the training run is left as training ended it
    artifacts = {a.path for a in client.list_artifacts(eric_run.info.run_id)}
    assert {"eric.json", "coherence.csv", "state_usage.csv", "state_explorer.html"} <= artifacts
    bart_run = client.get_run(find_run(corpus, stage="evaluate", variant="bart"))  # no training run: no link
    assert "eval.D-4" in bart_run.data.metrics and "eric.train_run_id" not in bart_run.data.tags

    report_stage.log.fn(params, report_stage.collect.fn(params), paths)
    report_run = client.get_run(find_run(corpus, stage="report", variant="all"))
    assert report_run.data.metrics["eric.Len"] == pytest.approx(metrics["eric"]["Len"])
    assert {"results.md", "results.html", "coherence.png", "state_usage.png"} <= \
        {a.path for a in client.list_artifacts(report_run.info.run_id)}


def test_report_states_the_training_budget(tiny_project, tmp_path):
    from eric.config import load_params

    params = load_params(tiny_project / "params.yaml", {"train.metrics_dir": str(tmp_path)})
    assert report_stage.budget(params) == "unknown (no metrics/train files)"
    (tmp_path / "eric.json").write_text(json.dumps({"steps": 200, "epochs": 0.6, "train_examples": 2707,
                                                    "parameters": 12_345_678}))
    assert report_stage.budget(params) == "eric 200 steps (0.6 epochs, 2707 examples, 12.3M parameters)"


def test_report_names_the_state_space_recipe_each_variant_trained_with(tiny_project, tmp_path):
    from eric.config import load_params

    params = load_params(tiny_project / "params.yaml", {"train.metrics_dir": str(tmp_path)})
    assert report_stage.recipes(params) == "no variant with states"
    (tmp_path / "eric.json").write_text(json.dumps({"steps": 2, "state_space_recipe": "remedied"}))
    (tmp_path / "bart.json").write_text(json.dumps({"steps": 2, "state_space_recipe": None}))
    assert report_stage.recipes(params) == "eric remedied"


def test_the_report_stage_shows_world_cases_with_the_checkers_verdicts(tmp_path):
    """On EntityWorld (corpus.kind: world) the report's case study carries the checker's verdicts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from eric.config import default_params
    from tests.evaluate.test_case_study import _world_row

    _, _, row = _world_row()
    (tmp_path / "samples").mkdir()
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "samples" / "eric.parquet")
    settings = {"sample.out_dir": str(tmp_path / "samples"), "variants": ["eric"], "evaluate.case_studies": 1}
    world = report_stage.case_study(default_params({**settings, "corpus.kind": "world"}))
    plain = report_stage.case_study(default_params(settings))
    assert [c.id for c in world] == [row["id"]] and world[0].variants["eric"][2].verdict == "unparsed"
    assert all(u.verdict for u in world[0].variants["eric"]) and not any(u.verdict for u in plain[0].variants["eric"])


def test_the_report_stage_matches_lengths_over_the_inputs_every_variant_wrote():
    from eric.config import default_params

    params = default_params({"variants": ["eric", "bart"]})
    row = lambda i, text, ref="a b c d": {"id": i, "final_text": text, "reference": ref}  # noqa: E731
    samples = {"eric": [row("x", "a b c d e f"), row("y", "a b"), row("only-eric", "a b c d")],
               "bart": [row("y", "z z z"), row("x", "a b")]}
    # x: cut to 2 (BART's length), y: cut to 2 (ERIC's): ERIC 4 of 4 tokens match, BART 2 of 4
    assert report_stage.matched_b1(params, samples) == {"eric": pytest.approx(100.0), "bart": pytest.approx(50.0)}
    samples["bart"][0]["reference"] = None
    assert report_stage.matched_b1(params, {"bart": samples["bart"]}) == {}  # no references: nothing to match
    assert report_stage.matched_b1(params, {}) == {}
