"""Stage-one and stage-two examples from an anonymized story.

Stage one: source = unit 1 (not anonymized); target = `<sent>` + unit for every
target unit. Stage two: source = input + separator + stage-one target; target =
(placeholder, mention) pairs in text order. A story without entities has no
stage-two example.
"""

from __future__ import annotations

from eric.data.anonymize import Anonymized
from eric.data.schema import SENT_TOKEN


def stage_one_target(units: list[str]) -> str:
    return " ".join(f"{SENT_TOKEN} {unit}" for unit in units)


def stage_two_target(mentions: list[tuple[str, str]]) -> str:
    return " ".join(f"{tag} {text}" for tag, text in mentions)


def _mention_records(mentions: list[tuple[str, str]]) -> list[dict]:
    return [{"placeholder": tag, "mention": text} for tag, text in mentions]


def stage_one_row(story_id: str, title: str, source: str, anon: Anonymized) -> dict:
    return {
        "id": story_id,
        "title": title,
        "source": source,
        "target": stage_one_target(anon.units),
        "units": anon.units,
        "unit_entities": anon.unit_entities,
        "n_entities": anon.n_entities,
        "mentions": _mention_records(anon.mentions),
    }


def stage_two_row(stage_one: dict, separator: str) -> dict | None:
    if not stage_one["mentions"]:
        return None
    mentions = [(m["placeholder"], m["mention"]) for m in stage_one["mentions"]]
    return {
        "id": stage_one["id"],
        "source": stage_one["source"] + separator + stage_one["target"],
        "target": stage_two_target(mentions),
        "mentions": stage_one["mentions"],
    }
