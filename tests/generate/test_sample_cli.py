"""`eric sample`: a trained model folder + inputs -> Parquet of stories; bad input in one line."""

from __future__ import annotations

from typer.testing import CliRunner

from eric.cli import app
from eric.generate.schema import read_metadata, read_samples


def run(*args):
    return CliRunner().invoke(app, ["sample", *map(str, args)])


def test_sample_from_a_model_folder_with_mentions(tiny_project, tmp_path):
    out = tmp_path / "s.parquet"
    result = run(tiny_project / "models" / "stage_one" / "eric", "--inputs",
                 tiny_project / "data" / "stage_one" / "test.parquet", "--mentions", tiny_project / "models" / "mentions",
                 "--names", tiny_project / "data" / "stage_one" / "train.parquet", "--out", out, "--num-inputs", 2,
                 "--max-length", 16, "--seed", 3, "--show", 1, "--decoding", "original",
                 "--params", tiny_project / "params.yaml")
    assert result.exit_code == 0, result.output
    assert "stage one: <sent>" in result.output and f"2 stories -> {out}" in result.output
    rows = read_samples(out)
    assert len(rows) == 2 and all(r["reference"] for r in rows)
    assert read_metadata(out)["options"]["seed"] == 3
    assert read_metadata(out)["options"]["decoding"] == "original"
    assert read_metadata(out)["stage_one_decoding"] == {  # ERIC's original decoding is the shared one
        "do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 0.9, "penalty_alpha": None}


def test_plain_inputs_without_params_or_mention_model(tiny_project, tmp_path):
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("A knight rides out.\nA ship sinks.\n")
    out = tmp_path / "s.parquet"
    result = run(tiny_project / "models" / "stage_one" / "bart", "-i", inputs, "--out", out, "--max-length", 12,
                 "--params", tmp_path / "absent.yaml", "--names", tiny_project / "data" / "stage_one" / "train.parquet")
    assert result.exit_code == 0, result.output
    rows = read_samples(out)
    assert [r["input"] for r in rows] == ["A knight rides out.", "A ship sinks."]
    assert all(r["reference"] is None and r["fallback_generated"] == 0 for r in rows)


def test_bad_model_folder_or_option_is_one_line(tiny_project, tmp_path):
    result = run(tmp_path, "-i", tiny_project / "data" / "stage_one" / "test.parquet", "--params", tmp_path / "x.yaml")
    assert result.exit_code == 2
    assert "error:" in result.output and "no stage-one model here" in result.output
    assert "Traceback" not in result.output
    result = run(tiny_project / "models" / "stage_one" / "eric", "-i", tiny_project / "data" / "stage_one" / "test.parquet",
                 "--top-p", 1.5, "--params", tmp_path / "x.yaml")
    assert result.exit_code == 2 and "sample.top_p" in result.output
    result = run(tiny_project / "models" / "stage_one" / "eric", "-i", tiny_project / "data" / "stage_one" / "test.parquet",
                 "--decoding", "beam", "--params", tmp_path / "x.yaml")
    assert result.exit_code == 2 and "sample.decoding" in result.output
