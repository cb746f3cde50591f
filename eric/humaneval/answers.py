"""Reading answers in any of the three formats and checking them against the key(s).

    rows = read_answers(path)                   # page export, MTurk results, LS export
    checked = check_answers(rows, key)          # judgments + every problem, counted

Nothing is dropped silently: rows for unknown items, second answers by the same
annotator, unfinished or invalid answers, and items short of (or over) the key's
number of annotators are counted and listed; only complete sets are scored, since
majority vote and Fleiss' kappa need the same number of raters per item.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from eric.humaneval.errors import HumanEvalError
from eric.humaneval.labelstudio import read_export
from eric.humaneval.mturk import read_results
from eric.humaneval.page import ANSWERS_FORMAT
from eric.humaneval.questions import ALLOWED, FIELDS
from eric.humaneval.study import Key


@dataclass
class Checked:
    judgments: dict[str, list[dict]]  # item_id -> one answer dict per annotator (complete sets only)
    problems: dict[str, list[str]] = field(default_factory=dict)  # kind -> examples

    def count(self, kind: str) -> int:
        return len(self.problems.get(kind, []))

    def add(self, kind: str, what: str) -> None:
        self.problems.setdefault(kind, []).append(what)


PROBLEMS = {
    "unknown_item": "answers for items not in the key",
    "duplicate": "second answers by the same annotator to an item (the first is kept)",
    "incomplete": "answers missing a question or with a value not offered",
    "missing_annotators": "items with fewer annotators than the key asks for (not scored)",
    "extra_annotators": "items with more annotators than the key asks for (not scored)",
    "unanswered": "items nobody answered",
}


def read_answers(path: str | Path) -> list[dict]:
    """Rows of {study_id, item_id, annotator, source, <fields>} from one file."""
    path = Path(path)
    if not path.is_file():
        raise HumanEvalError(f"{path}: answers file not found")
    if path.suffix.lower() == ".csv":
        rows = read_results(path)
    else:
        rows = _read_json(path)
    for n, row in enumerate(rows):
        if not row.get("item_id"):
            raise HumanEvalError(f"{path}: answer {n + 1} has no item_id")
        if not row.get("annotator"):
            raise HumanEvalError(f"{path}: answer {n + 1} (item {row['item_id']}) has no annotator")
        row["item_id"], row["annotator"], row["source"] = str(row["item_id"]), str(row["annotator"]), path.name
    return rows


def _read_json(path: Path) -> list[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise HumanEvalError(f"{path}: not JSON (expected a page export, an MTurk results .csv "
                             "or a Label Studio JSON export)") from None
    if isinstance(data, list):
        return read_export(data, path)
    if isinstance(data, dict) and data.get("format") == ANSWERS_FORMAT:
        if not data.get("annotator") or not isinstance(data.get("answers"), list):
            raise HumanEvalError(f"{path}: page export without annotator or answers")
        return [{"study_id": data.get("study_id"), "annotator": data["annotator"],
                 **{k: v for k, v in a.items() if k in (*FIELDS, "item_id")}}
                for a in data["answers"] if isinstance(a, dict)]
    raise HumanEvalError(f"{path}: unknown answers format (expected a page export, an MTurk results .csv "
                         "or a Label Studio JSON export)")


def route(rows: list[dict], keys: list[Key]) -> dict[str, list[dict]]:
    """Rows per study id; a row with no study id belongs to the only key, else it is an error."""
    by_study: dict[str, list[dict]] = {k.study_id: [] for k in keys}
    for row in rows:
        study = row.get("study_id") or (keys[0].study_id if len(keys) == 1 else None)
        if study is None:
            raise HumanEvalError(f"{row['source']}: answers carry no study id; score them with their one key")
        if study not in by_study:
            known = ", ".join(by_study)
            raise HumanEvalError(f"{row['source']}: answers are for study {study}, but the key is for {known}")
        by_study[study].append(row)
    return by_study


def check_answers(rows: list[dict], key: Key) -> Checked:
    known = {item["item_id"] for item in key.items}
    checked = Checked(judgments={})
    per_item: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        item, who = row["item_id"], row["annotator"]
        if item not in known:
            checked.add("unknown_item", f"{item} ({row['source']})")
        elif who in per_item[item]:
            checked.add("duplicate", f"{item} by {who} ({row['source']})")
        elif any(row.get(f) not in ALLOWED[f] for f in FIELDS):
            checked.add("incomplete", f"{item} by {who} ({row['source']})")
        else:
            per_item[item][who] = {f: row[f] for f in FIELDS}
    for item in sorted(known):
        answers = list(per_item.get(item, {}).values())
        if not answers:
            checked.add("unanswered", item)
        elif len(answers) < key.annotators:
            checked.add("missing_annotators", f"{item} ({len(answers)} of {key.annotators})")
        elif len(answers) > key.annotators:
            checked.add("extra_annotators", f"{item} ({len(answers)} for {key.annotators})")
        else:
            checked.judgments[item] = answers
    return checked
