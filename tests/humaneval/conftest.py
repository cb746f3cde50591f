"""Fixtures: two systems' sample files, a prepared study, and simulated annotators
whose answers are written in each of the three formats (page, MTurk, Label Studio)."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from eric.generate.schema import write_samples
from eric.humaneval.questions import FIELDS
from eric.humaneval.study import Key


def sample_rows(system: str, n: int) -> list[dict]:
    """Texts tell the systems apart by a word ("sunny" for ERIC, "rainy" else), not by name."""
    weather = "sunny" if system == "ERIC" else "rainy"
    rows = []
    for i in range(n):
        units = [f"A {weather} unit {u} of story {i} ." for u in range(3)]
        rows.append({"id": f"story-{i:02d}", "input": f"The opening sentence of story {i} .",
                     "stage_one": "", "mentions_text": "", "mentions": [],
                     "final_text": "".join(f"<sent> {u} " for u in units), "reference": None,
                     "unit_entities": [], "unit_states": [], "stage_one_tokens": 10,
                     "fallback_generated": 0, "fallback_reused_last": 0, "fallback_random_name": 0})
    return rows


@pytest.fixture
def samples_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "samples"
    write_samples(sample_rows("ERIC", 14), folder / "eric.parquet")
    write_samples(sample_rows("BART", 12), folder / "bart.parquet")  # 12 shared ids
    return folder


@pytest.fixture
def params_file(tmp_path: Path, samples_dir: Path) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(f"seed: 7\nsample:\n  out_dir: {samples_dir}\n")
    return path


def simulate(key: Key, annotators: int | None = None, seed: int = 0) -> list[dict]:
    """Answers of simulated annotators who mostly prefer system A and see entity issues
    mostly in B's texts, with noise; one dict per (annotator, item), as the page stores them."""
    rng = random.Random(seed)
    rows = []
    for who in range(annotators or key.annotators):
        for item in key.items:
            a_left = item["left"] == "a"

            def pick() -> str:
                r = rng.random()
                choice = "a" if r < 0.6 else "b" if r < 0.85 else "tie"
                return "tie" if choice == "tie" else ("left" if (choice == "a") == a_left else "right")

            issue_a, issue_b = rng.random() < 0.3, rng.random() < 0.7
            left_issue, right_issue = (issue_a, issue_b) if a_left else (issue_b, issue_a)
            rows.append({"annotator": f"worker{who + 1}", "item_id": item["item_id"],
                         "informativeness": pick(), "coherence": pick(),
                         "entity_issue_left": "yes" if left_issue else "no",
                         "entity_issue_right": "yes" if right_issue else "no"})
    return rows


def write_page_exports(key: Key, answers: list[dict], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for who in sorted({a["annotator"] for a in answers}):
        mine = [{k: v for k, v in a.items() if k != "annotator"} for a in answers if a["annotator"] == who]
        path = folder / f"answers-{who}.json"
        path.write_text(json.dumps({"format": "eric-humaneval-answers", "version": 1, "study_id": key.study_id,
                                    "annotator": who, "answers": mine}))
        paths.append(path)
    return paths


def write_mturk_results(key: Key, answers: list[dict], path: Path, style: str = "plain") -> Path:
    """A batch results CSV as the requester site gives it: Input.* and Answer.* columns."""
    header = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "Input.study_id", "Input.item_id"]
    rows = []
    for n, a in enumerate(answers):
        row = {"HITId": f"H{a['item_id']}", "AssignmentId": f"A{n}", "WorkerId": a["annotator"],
               "AssignmentStatus": "Approved", "Input.study_id": key.study_id, "Input.item_id": a["item_id"]}
        if style == "plain":
            row.update({f"Answer.{f}": a[f] for f in FIELDS})
        elif style == "taskAnswers":
            row["Answer.taskAnswers"] = json.dumps([{f: a[f] for f in FIELDS}])
        else:  # crowd radio groups, one true/false column per value
            from eric.humaneval.questions import ALLOWED
            row.update({f"Answer.{f}.{v}": str(a[f] == v).lower() for f in FIELDS for v in ALLOWED[f]})
        rows.append(row)
    columns = header + [c for c in rows[0] if c not in header]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_labelstudio_export(key: Key, answers: list[dict], path: Path) -> Path:
    """A Label Studio JSON export: tasks with their data and annotations."""
    tasks: dict[str, dict] = {}
    for n, a in enumerate(answers):
        task = tasks.setdefault(a["item_id"], {"id": len(tasks) + 1, "annotations": [],
                                               "data": {"study_id": key.study_id, "item_id": a["item_id"]}})
        task["annotations"].append({
            "id": n + 1, "completed_by": {"id": 10 + int(a["annotator"][-1]), "email": f"{a['annotator']}@lab"},
            "was_cancelled": False,
            "result": [{"from_name": f, "to_name": "input", "type": "choices", "value": {"choices": [a[f]]}}
                       for f in FIELDS]})
    path.write_text(json.dumps(list(tasks.values())))
    return path
