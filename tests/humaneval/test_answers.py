"""The three answer formats read back to the same judgments; problems are counted, and
files that cannot be answers fail in one line."""

from __future__ import annotations

import json

import pytest

from eric.humaneval.answers import check_answers, read_answers, route
from eric.humaneval.command import prepare_study
from eric.humaneval.errors import HumanEvalError
from eric.humaneval.study import read_key
from tests.humaneval.conftest import (simulate, write_labelstudio_export, write_mturk_results,
                                      write_page_exports)


@pytest.fixture
def key(tmp_path, params_file):
    _, paths = prepare_study("eric", "bart", n=8, annotators=3, out=tmp_path / "study", params=params_file)
    return read_key(paths["key"])


def _judgments(rows, key):
    checked = check_answers(route(rows, [key])[key.study_id], key)
    assert checked.problems == {}
    return {item: sorted(tuple(sorted(a.items())) for a in answers) for item, answers in checked.judgments.items()}


def test_three_formats_give_the_same_judgments(tmp_path, key):
    answers = simulate(key, seed=3)
    page = [row for path in write_page_exports(key, answers, tmp_path / "page") for row in read_answers(path)]
    expected = _judgments(page, key)
    assert len(expected) == 8 and all(len(v) == 3 for v in expected.values())
    for style in ("plain", "taskAnswers", "radio-groups"):
        mturk = read_answers(write_mturk_results(key, answers, tmp_path / f"mturk-{style}.csv", style))
        assert _judgments(mturk, key) == expected, style
    studio = read_answers(write_labelstudio_export(key, answers, tmp_path / "ls.json"))
    assert _judgments(studio, key) == expected


def test_labelstudio_min_export_and_cancelled_annotations(tmp_path, key):
    answers = simulate(key, seed=4)
    full = json.loads(write_labelstudio_export(key, answers, tmp_path / "ls.json").read_text())
    full[0]["annotations"].append({"completed_by": 99, "was_cancelled": True, "result": []})
    (tmp_path / "ls.json").write_text(json.dumps(full))
    minimal = [{"study_id": key.study_id, "item_id": a["item_id"], "annotator": a["annotator"],
                **{f: a[f] for f in ("informativeness", "coherence", "entity_issue_left", "entity_issue_right")}}
               for a in answers]
    (tmp_path / "min.json").write_text(json.dumps(minimal))
    assert _judgments(read_answers(tmp_path / "ls.json"), key) == _judgments(read_answers(tmp_path / "min.json"), key)


def test_rejected_mturk_assignments_are_not_judgments(tmp_path, key):
    path = write_mturk_results(key, simulate(key), tmp_path / "r.csv")
    text = path.read_text().splitlines()
    text[1] = text[1].replace("Approved", "Rejected")
    path.write_text("\n".join(text) + "\n")
    assert len(read_answers(path)) == 3 * 8 - 1


def test_problems_are_counted_never_dropped(tmp_path, key):
    answers = simulate(key)
    first, second = key.items[0]["item_id"], key.items[1]["item_id"]
    answers = [a for a in answers if not (a["item_id"] == first and a["annotator"] == "worker3")]  # 2 of 3
    answers.append({**answers[-1], "informativeness": "left"})  # the same annotator again
    answers.append({**answers[0], "item_id": "999"})  # not in the key
    answers.append({**answers[0], "annotator": "worker4", "item_id": second, "coherence": "maybe"})  # bad value
    rows = [row for path in write_page_exports(key, answers, tmp_path / "p") for row in read_answers(path)]
    checked = check_answers(route(rows, [key])[key.study_id], key)
    counts = {kind: len(found) for kind, found in checked.problems.items()}
    assert counts == {"missing_annotators": 1, "duplicate": 1, "unknown_item": 1, "incomplete": 1}
    assert first not in checked.judgments and len(checked.judgments) == 7


def test_extra_annotators_and_unanswered_items(tmp_path, key):
    answers = [a for a in simulate(key, annotators=4) if a["item_id"] != key.items[0]["item_id"]]
    rows = [row for path in write_page_exports(key, answers, tmp_path / "p") for row in read_answers(path)]
    checked = check_answers(rows, key)
    assert (checked.count("extra_annotators"), checked.count("unanswered"), len(checked.judgments)) == (7, 1, 0)


@pytest.mark.parametrize("name, content, message", [
    ("a.json", "{not json", "not JSON"),
    ("b.json", '{"format": "something else"}', "unknown answers format"),
    ("c.json", '{"format": "eric-humaneval-answers", "answers": []}', "without annotator"),
    ("d.json", '[{"annotations": [{"result": []}], "data": {}}]', "has no item_id"),
    ("e.csv", "a,b\n1,2\n", "not an MTurk results CSV"),
    ("f.csv", b"\xff\xfe\x00bad", "not a readable CSV"),
])
def test_bad_answer_files_fail_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(HumanEvalError, match=message) as err:
        read_answers(path)
    assert "\n" not in str(err.value)


def test_answers_for_another_study_are_an_error(tmp_path, key):
    rows = [{"study_id": "other", "item_id": "001", "annotator": "x", "source": "f.json"}]
    with pytest.raises(HumanEvalError, match="answers are for study other"):
        route(rows, [key])
