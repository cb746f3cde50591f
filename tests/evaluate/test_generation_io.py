"""Reading generations in each format; bad lines are counted skips, bad files one-line errors."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eric.data.schema import STAGE_ONE
from eric.evaluate.errors import EvaluationError
from eric.data.anonymize import deanonymize
from eric.evaluate.io import read_generations


def test_released_format_skips_blank_and_unmarked_lines(tmp_path):
    path = tmp_path / "gen.txt"
    path.write_text("<mask>One.<mask>Two.\n\nno marker here\n<mask>Three.\n")
    found = read_generations(path)
    assert found.format == "released"
    assert found.texts == ["<mask>One.<mask>Two.", "<mask>Three."]
    assert found.skipped == 2
    assert found.inputs is None and found.references is None


def test_plain_lines(tmp_path):
    path = tmp_path / "gen.txt"
    path.write_text("first story .\n  \nsecond story .\n")
    found = read_generations(path)
    assert (found.format, found.texts, found.skipped) == ("lines", ["first story .", "second story ."], 1)


def test_jsonl_fields_and_bad_lines(tmp_path):
    rows = [
        {"input": "in 1", "final_text": "out 1", "reference": "ref 1"},
        "not an object",
        {"input": "in 2", "final_text": "", "reference": "ref 2"},  # empty text
        {"input": "in 3", "final_text": "out 3", "reference": "ref 3"},
    ]
    lines = [json.dumps(r) for r in rows] + ["{broken json"]
    path = tmp_path / "gen.jsonl"
    path.write_text("\n".join(lines) + "\n")
    found = read_generations(path)
    assert found.texts == ["out 1", "out 3"]
    assert found.inputs == ["in 1", "in 3"]
    assert found.references == ["ref 1", "ref 3"]
    assert found.skipped == 3


def test_jsonl_named_field_must_exist(tmp_path):
    path = tmp_path / "gen.jsonl"
    path.write_text(json.dumps({"story": "x"}) + "\n")
    with pytest.raises(EvaluationError, match="no text field"):
        read_generations(path)
    with pytest.raises(EvaluationError, match="no text field 'output'.*story"):
        read_generations(path, text_field="output")
    assert read_generations(path, text_field="story").texts == ["x"]


def test_parquet_of_the_sample_stage(tmp_path):
    path = tmp_path / "samples.parquet"
    table = pa.table(
        {"input": ["i1", "i2", "i3"], "final_text": ["g1", None, "g3"], "reference": ["r1", "r2", "r3"]}
    )
    pq.write_table(table, path)
    found = read_generations(path)
    assert (found.format, found.texts, found.inputs, found.references, found.skipped) == (
        "parquet", ["g1", "g3"], ["i1", "i3"], ["r1", "r3"], 1,
    )  # fmt: skip
    with pytest.raises(EvaluationError, match="no text field 'stage_one_text'"):
        read_generations(path, text_field="stage_one_text")


def test_stage_one_split_reads_as_deanonymized_references(tmp_path):
    row = {
        "id": "1", "title": "t", "source": "It begins.",
        "target": "<sent> <e0> meets <e1> . <sent> <e0> leaves .",
        "units": ["<e0> meets <e1> .", "<e0> leaves ."],
        "unit_entities": [["<e0>", "<e1>"], ["<e0>"]], "n_entities": 2,
        "mentions": [
            {"placeholder": "<e0>", "mention": "Ash Williams"},
            {"placeholder": "<e1>", "mention": "Linda"},
            {"placeholder": "<e0>", "mention": "Ash"},
        ],
    }  # fmt: skip
    path = tmp_path / "test.parquet"
    pq.write_table(pa.Table.from_pylist([row], schema=STAGE_ONE), path)
    found = read_generations(path)
    assert found.texts == ["<sent> Ash Williams meets Linda . <sent> Ash leaves ."]
    assert found.inputs == ["It begins."]


def test_deanonymize_reuses_the_last_mention_when_they_run_out():
    mentions = [{"placeholder": "<e0>", "mention": "Ash"}]
    assert deanonymize("<e0> and <e0> and <e3>", mentions) == "Ash and Ash and <e3>"


@pytest.mark.parametrize(
    "name, content, fmt, message",
    [
        ("missing.txt", None, "auto", "file not found"),
        ("latin.txt", b"caf\xe9 story\n", "auto", "not UTF-8"),
        ("broken.parquet", b"not parquet at all", "auto", "not a readable Parquet file"),
        ("empty.txt", b"\n\n", "auto", "no usable text"),
        ("gen.txt", b"story\n", "csv", "unknown format"),
    ],
)
def test_unusable_files_give_one_line_errors(tmp_path, name, content, fmt, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(EvaluationError, match=message) as info:
        read_generations(path, fmt)
    assert "\n" not in str(info.value)
