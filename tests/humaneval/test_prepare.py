"""`prepare`: the same study for the same seed, balanced hidden sides, and every file
annotators need in each format, naming no system."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET

import pytest

from eric.humaneval.command import prepare_study
from eric.humaneval.errors import HumanEvalError
from eric.humaneval.study import read_key


def test_same_seed_same_study_other_seed_another(tmp_path, params_file):
    _, p1 = prepare_study("eric", "bart", n=6, seed=1, out=tmp_path / "one", params=params_file)
    _, p2 = prepare_study("eric", "bart", n=6, seed=1, out=tmp_path / "two", params=params_file)
    _, p3 = prepare_study("eric", "bart", n=6, seed=2, out=tmp_path / "three", params=params_file)
    for name in ("key", "page", "mturk_batch", "labelstudio_tasks"):
        assert p1[name].read_bytes() == p2[name].read_bytes(), name
    assert read_key(p1["key"]).items != read_key(p3["key"]).items


def test_sides_are_balanced_and_texts_follow_the_key(tmp_path, params_file):
    study, paths = prepare_study("eric", "bart", n=9, out=tmp_path / "s", params=params_file)
    key = read_key(paths["key"])
    assert key.seed == 7  # from params.yaml
    lefts = [item["left"] for item in key.items]
    assert sorted(lefts) == ["a"] * 5 + ["b"] * 4
    assert len({item["sample_id"] for item in key.items}) == 9
    for item, shown in zip(key.items, study.items):
        eric_side = shown.left if item["left"] == "a" else shown.right
        assert "sunny" in eric_side and "<sent>" not in eric_side  # special tokens removed
        assert shown.input.startswith("The opening sentence of story")


def test_every_format_written_without_names(tmp_path, params_file):
    _, paths = prepare_study("eric", "bart", n=5, annotators=3, out=tmp_path / "s", params=params_file)
    key = read_key(paths["key"])
    public = [paths[n] for n in ("page", "mturk_batch", "mturk_template", "labelstudio_config", "labelstudio_tasks")]
    for path in public:
        text = path.read_text().lower()
        assert "bart" not in text and "parquet" not in text, path.name
    page = paths["page"].read_text()
    assert "Informativeness" in page and "localStorage" in page and key.study_id in page
    assert "<script src" not in page and "http" not in page.split("<script")[1]  # nothing to fetch
    with paths["mturk_batch"].open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["item_id"] for r in rows] == [i["item_id"] for i in key.items]
    assert set(rows[0]) == {"study_id", "item_id", "input", "left", "right"}
    template = paths["mturk_template"].read_text()
    assert all(f"${{{c}}}" in template for c in ("input", "left", "right"))
    assert all(f'name="{f}"' in template for f in ("informativeness", "coherence", "entity_issue_left"))
    config = ET.fromstring(paths["labelstudio_config"].read_text())
    choices = {c.get("name"): [x.get("alias") for x in c] for c in config.iter("Choices")}
    assert choices == {"informativeness": ["left", "right", "tie"], "coherence": ["left", "right", "tie"],
                       "entity_issue_left": ["yes", "no"], "entity_issue_right": ["yes", "no"]}
    tasks = json.loads(paths["labelstudio_tasks"].read_text())
    assert len(tasks) == 5 and set(tasks[0]["data"]) == {"study_id", "item_id", "input", "left", "right"}


def test_fewer_shared_inputs_than_asked_is_noted(tmp_path, params_file):
    study, _ = prepare_study("eric", "bart", n=200, out=tmp_path / "s", params=params_file)
    assert len(study.items) == 12
    assert study.key.notes == ["only 12 inputs in common: the study has 12 items, not 200"]


def test_released_file_as_a_system(tmp_path, params_file):
    """A released file has no ids or inputs: its lines pair by number with inputs given
    one per line (as `eric sample` numbers them); the text after `|||` is the text."""
    released = tmp_path / "wikiplots_ERIC.txt"
    released.write_text("".join(f"prompt {i}|||<mask>Released unit {i} .<mask>More .\n" for i in range(6)))
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"A plain text {i} .\n" for i in range(6)))
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("".join(f"Input number {i} .\n" for i in range(6)))
    study, paths = prepare_study(str(released), str(lines), n=6, out=tmp_path / "s", inputs=inputs,
                                 params=params_file)
    key = read_key(paths["key"])
    assert key.systems["a"]["name"] == "wikiplots_ERIC"
    for item, shown in zip(key.items, study.items):
        text = shown.left if item["left"] == "a" else shown.right
        assert text == f"Released unit {item['sample_id']} . More ."
        assert shown.input == f"Input number {item['sample_id']} ."
    with pytest.raises(HumanEvalError, match="pass --inputs"):
        prepare_study(str(released), str(lines), out=tmp_path / "t", params=params_file)


@pytest.mark.parametrize("a, b, message", [
    ("eric", "eric", "the same system"),
    ("eric", "nope", "nope: no samples at"),
    ("eric", "missing.txt", "missing.txt: file not found"),
])
def test_bad_systems_fail_in_one_line(tmp_path, params_file, a, b, message):
    with pytest.raises(HumanEvalError, match=message):
        prepare_study(a, b, out=tmp_path / "s", params=params_file)
