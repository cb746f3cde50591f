"""Amazon Mechanical Turk: a batch CSV (one row per item, so one HIT per item) and the
HTML question template that shows it, and a reader for the batch results CSV.

In the requester site: create a project from "Custom", paste question.html as its
design layout, set "Number of assignments per task" to the key's annotators, publish
a batch from batch.csv, then download the results CSV. A worker's answers come back as
columns `Answer.<field>`; newer result files put them in `Answer.taskAnswers` (JSON),
and crowd radio groups as `Answer.<field>.<value>` = true: all three are read.
"""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

from eric.humaneval.errors import HumanEvalError
from eric.humaneval.page import instructions_html
from eric.humaneval.questions import ALLOWED, FIELDS, PREFERENCE_LABELS, QUESTIONS
from eric.humaneval.study import Study, public_items

COLUMNS = ("study_id", "item_id", "input", "left", "right")
REJECTED = {"rejected"}


def write_batch(study: Study, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(public_items(study))
    return path


def _radios(field: str, options: dict[str, str]) -> str:
    return "".join(f'<label class="opt"><input type="radio" name="{field}" value="{value}" required> '
                   f"{html.escape(text)}</label>" for value, text in options.items())


def question_template() -> str:
    """Design layout for a custom MTurk project; ${...} are the batch CSV's columns."""
    prefs = {p: PREFERENCE_LABELS[p] for p in ALLOWED["informativeness"]}
    issues = {"yes": "Yes, issues", "no": "No issues"}
    return f"""<!-- eric humaneval: MTurk design layout. ${{...}} are filled from batch.csv. -->
<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>
<style>
.opt{{display:inline-block;margin:.2em .5em .2em 0}}.input{{background:#f0f3f7;padding:.5em .8em}}
.texts{{display:flex;gap:1em}}.texts>div{{flex:1;border:1px solid #ccc;padding:.5em .8em}}
</style>
<crowd-form answer-format="flatten-objects">
<details open><summary><b>Instructions</b></summary>{instructions_html()}</details>
<p><b>Input</b></p><div class="input">${{input}}</div>
<div class="texts"><div><b>Text 1</b><p>${{left}}</p></div><div><b>Text 2</b><p>${{right}}</p></div></div>
<p><b>{html.escape(QUESTIONS["informativeness"])}</b><br>{_radios("informativeness", prefs)}</p>
<p><b>{html.escape(QUESTIONS["coherence"])}</b><br>{_radios("coherence", prefs)}</p>
<p><b>Do the texts have entity issues?</b><br>Text 1: {_radios("entity_issue_left", issues)}<br>
Text 2: {_radios("entity_issue_right", issues)}</p>
</crowd-form>
"""


def write_template(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(question_template(), encoding="utf-8")
    return path


def read_results(path: Path) -> list[dict]:
    """Rows of {study_id, item_id, annotator, <fields>} from a batch results CSV;
    rejected assignments are left out (they are not judgments)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.DictReader(handle))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise HumanEvalError(f"{path}: not a readable CSV ({exc.__class__.__name__})") from None
    if not rows or "Input.item_id" not in rows[0] or "WorkerId" not in rows[0]:
        raise HumanEvalError(f"{path}: not an MTurk results CSV (needs WorkerId and Input.item_id columns)")
    out = []
    for row in rows:
        if (row.get("AssignmentStatus") or "").strip().lower() in REJECTED:
            continue
        out.append({"study_id": row.get("Input.study_id") or None, "item_id": row["Input.item_id"],
                    "annotator": row["WorkerId"], **_answers(row, path)})
    return out


def _answers(row: dict, path: Path) -> dict:
    found = {}
    if row.get("Answer.taskAnswers"):
        try:
            parsed = json.loads(row["Answer.taskAnswers"])
        except json.JSONDecodeError:
            raise HumanEvalError(f"{path}: Answer.taskAnswers is not JSON") from None
        task = parsed[0] if isinstance(parsed, list) and parsed else parsed
        if isinstance(task, dict):
            for field in FIELDS:
                found[field] = _choice(task.get(field))
    for field in FIELDS:
        if row.get(f"Answer.{field}"):
            found[field] = row[f"Answer.{field}"].strip()
        for value in ALLOWED[field]:
            if (row.get(f"Answer.{field}.{value}") or "").strip().lower() == "true":
                found[field] = value
    return {k: v for k, v in found.items() if v}


def _choice(value) -> str | None:
    """A crowd radio group answers {"left": true, "right": false, ...}; a plain input, a string."""
    if isinstance(value, dict):
        picked = [k for k, v in value.items() if v is True or v == "true"]
        return picked[0] if len(picked) == 1 else None
    return value if isinstance(value, str) else None
