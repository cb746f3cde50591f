"""Label Studio: a labeling config and a tasks file to import, and a reader for the
project's JSON export.

Create a project, paste config.xml under Labeling Setup, import tasks.json, and under
Settings > Annotation set the overlap to the key's annotators. Export as JSON (the
full format, with `annotations`) or JSON-MIN; both are read. Choices carry aliases, so
results hold the same values as the page (left/right/tie, yes/no).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from eric.humaneval.errors import HumanEvalError
from eric.humaneval.questions import DEFINITIONS, FIELDS, PREFERENCE_LABELS, QUESTIONS, TASK
from eric.humaneval.study import Study, public_items


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


def labeling_config() -> str:
    """The labeling interface: instructions, input, the two texts, three questions."""
    definitions = "".join(f'<Text name="def{i}" value="{_attr(term + ": " + text)}"/>'
                          for i, (term, text) in enumerate(DEFINITIONS))
    prefs = "".join(f'<Choice value="{_attr(label)}" alias="{value}"/>' for value, label in PREFERENCE_LABELS.items())
    yes_no = '<Choice value="Yes, issues" alias="yes"/><Choice value="No issues" alias="no"/>'
    return f"""<View>
  <Header value="Instructions"/>
  <Text name="task" value="{_attr(TASK)}"/>
  {definitions}
  <Header value="Input"/>
  <Text name="input" value="$input"/>
  <View style="display: flex; gap: 1em">
    <View style="flex: 1"><Header value="Text 1"/><Text name="left" value="$left"/></View>
    <View style="flex: 1"><Header value="Text 2"/><Text name="right" value="$right"/></View>
  </View>
  <Header value="{_attr(QUESTIONS['informativeness'])}"/>
  <Choices name="informativeness" toName="input" choice="single-radio" showInline="true" required="true">{prefs}</Choices>
  <Header value="{_attr(QUESTIONS['coherence'])}"/>
  <Choices name="coherence" toName="input" choice="single-radio" showInline="true" required="true">{prefs}</Choices>
  <Header value="{_attr(QUESTIONS['entity_issue_left'])}"/>
  <Choices name="entity_issue_left" toName="left" choice="single-radio" showInline="true" required="true">{yes_no}</Choices>
  <Header value="{_attr(QUESTIONS['entity_issue_right'])}"/>
  <Choices name="entity_issue_right" toName="right" choice="single-radio" showInline="true" required="true">{yes_no}</Choices>
</View>
"""


def write_project(study: Study, folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    config, tasks = folder / "config.xml", folder / "tasks.json"
    config.write_text(labeling_config(), encoding="utf-8")
    tasks.write_text(json.dumps([{"data": item} for item in public_items(study)], indent=1, ensure_ascii=False) + "\n",
                     encoding="utf-8")
    return {"config": config, "tasks": tasks}


def read_export(data: list, path: Path) -> list[dict]:
    """Rows of {study_id, item_id, annotator, <fields>} from an export (already parsed)."""
    rows = []
    for task in data:
        if not isinstance(task, dict):
            raise HumanEvalError(f"{path}: not a Label Studio export (a list of tasks)")
        if "annotations" in task:
            info = task.get("data") or {}
            for annotation in task["annotations"] or []:
                if annotation.get("was_cancelled"):
                    continue
                rows.append({"study_id": info.get("study_id"), "item_id": info.get("item_id"),
                             "annotator": _who(annotation.get("completed_by")), **_results(annotation)})
        else:  # JSON-MIN: one flat object per annotation
            rows.append({"study_id": task.get("study_id"), "item_id": task.get("item_id"),
                         "annotator": _who(task.get("annotator")),
                         **{f: _first(task.get(f)) for f in FIELDS if task.get(f) is not None}})
    return rows


def _who(value) -> str:
    if isinstance(value, dict):
        value = value.get("email") or value.get("id")
    return "" if value is None else str(value)


def _first(value):
    if isinstance(value, dict):
        value = value.get("choices")
    if isinstance(value, list):
        return value[0] if len(value) == 1 else None
    return value


def _results(annotation: dict) -> dict:
    found = {}
    for region in annotation.get("result") or []:
        name = region.get("from_name")
        if name in FIELDS:
            found[name] = _first((region.get("value") or {}).get("choices"))
    return {k: v for k, v in found.items() if v is not None}
