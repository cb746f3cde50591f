"""The EntityWorld checker per story, and the rates of a set of stories.

Per story (the lists a study bootstraps over and pairs by story), for stage-one or final
texts: `units`, `parsed` (a phrasing reads the unit exactly), `violations`,
`state_violations` (rules that need the replayed state), `grounding` (the other four: the
scene alone answers them), `grounded` (parsed units with no grounding violation, see
`is_grounded`), `grounded_state_violations` (state violations of those units), `clean` (a
parsed unit and no violation) and `valid` (every unit parsed, none broken); for final
texts also `named`, `mapped`, `faithful` (`name_counts`) and, mention by mention of what the
writer generated, `mentions`, `cast_mentions`, `own_mentions` (`mention_counts`).

The rates pool the stories: violations per parsed unit (all, state, grounding), the grounded
share of parsed units and state violations per grounded unit, clean and valid stories.
"""

from __future__ import annotations

import re
from functools import lru_cache

from eric.world.checker import StoryCheck, UnitCheck, check_story
from eric.world.metrics import text_units
from eric.world.world import RULES, STATE_RULES

CHECK_FIELDS = ("units", "parsed", "violations", "state_violations", "grounding", "grounded",
                "grounded_state_violations", "clean", "valid")
MENTION_FIELDS = ("mentions", "cast_mentions", "own_mentions")
NAME_FIELDS = ("named", "mapped", "faithful", *MENTION_FIELDS)
# The rules the scene alone answers: a character, place or item outside it (eric/world/
# world.py `violations` then skips state rules: a character outside the cast all of them, an
# unknown place already_there / wrong_place, an unknown item item_not_held / item_not_here),
# or one character in both roles (the two-character rules then hold by construction).
GROUNDING_RULES = frozenset(RULES) - frozenset(STATE_RULES)


def is_grounded(unit: UnitCheck) -> bool:
    """Parsed, with no grounding violation: the units where every state rule of the event type
    was applied, to as many characters as it names, so the fair denominator for state
    violations. One character in both roles counts as ungrounded: "<e2> fought <e2>" keeps
    not_together and strangers by construction, so a model writing such units would lower
    its rate per unit without tracking anyone."""
    return unit.event is not None and not GROUNDING_RULES & set(unit.violations)


def state_violations(unit: UnitCheck) -> int:
    """The unit's violations of rules that need the replayed state (STATE_RULES)."""
    return sum(rule in STATE_RULES for rule in unit.violations)


def story_counts(check: StoryCheck) -> dict[str, int]:
    state = sum(state_violations(u) for u in check.units)
    grounded = [u for u in check.units if is_grounded(u)]
    return {"units": len(check.units), "parsed": check.parsed, "violations": check.violations,
            "state_violations": state, "grounding": check.violations - state, "grounded": len(grounded),
            "grounded_state_violations": sum(state_violations(u) for u in grounded),
            "clean": int(check.parsed > 0 and check.violations == 0),
            "valid": int(len(check.units) > 0 and check.unparsed == 0 and check.violations == 0)}


def story_checks(scenes: list[str], texts: list[str], names: bool = False,
                 max_units: int | None = None) -> list[StoryCheck]:
    """The checker over (scene, text) pairs (`names`: texts with names, mapped back first)."""
    return [check_story(s, text_units(t or "", max_units), names) for s, t in zip(scenes, texts)]


def columns(rows: list[dict[str, int]], fields=CHECK_FIELDS) -> dict[str, list[int]]:
    """Per-story dicts as one list per field (compact in JSON, in story order)."""
    return {f: [r[f] for r in rows] for f in fields if rows and f in rows[0]}


def _per(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def rates(counts: dict[str, list[int]]) -> dict:
    """Pooled rates of per-story counts (`columns`)."""
    total = {f: sum(v) for f, v in counts.items()}
    stories, parsed = len(counts.get("units", [])), total.get("parsed", 0)
    out = {"grounding_violations": total["grounding"], "grounding_rate": _per(total["grounding"], parsed),
           "grounded": total["grounded"], "grounded_share": _per(total["grounded"], parsed),
           "grounded_state_violation_rate": _per(total["grounded_state_violations"], total["grounded"])}
    if "named" in total:
        out.update({"named": total["named"], "mapped_rate": _per(total["mapped"], total["named"]),
                    "faithful_rate": _per(total["faithful"], total["named"])})
    if "mentions" in total:
        out.update({"mentions": total["mentions"], "cast_mention_rate": _per(total["cast_mentions"], total["mentions"]),
                    "own_mention_rate": _per(total["own_mentions"], total["mentions"])})
    return out if stories else {}


# -- final texts: do the names map back to the cast? --------------------------------------
@lru_cache(maxsize=1)
def _name_word():
    """Any word of the world's name vocabulary (a name a final text kept that is not the cast's)."""
    from eric.world.names import FIRST_NAMES, SURNAMES

    return re.compile(r"\b(" + "|".join(sorted({*FIRST_NAMES, *SURNAMES})) + r")\b")


@lru_cache(maxsize=256)
def _cast(scene: str) -> tuple[str, ...]:
    """The scene's cast names, in order (<ek> is the k-th): read once per story, not per count."""
    from eric.world.phrasings import parse_scene

    return tuple(c.name for c in parse_scene(scene).characters)


def name_counts(scene: str, stage_one: str, final: str, max_units: int | None = None) -> dict[str, int]:
    """Units of the stage-one text with a placeholder (`named`); of them, those whose final
    unit's names all map back to the scene's cast (as many placeholders, no other name left:
    `mapped`) and to the very characters of the stage-one unit (`faithful`)."""
    from eric.world.phrasings import PLACEHOLDER, names_to_placeholders

    cast = _cast(scene)
    counts = dict.fromkeys(("named", "mapped", "faithful"), 0)
    for before, after in zip(text_units(stage_one or "", max_units), text_units(final or "", max_units)):
        wanted = PLACEHOLDER.findall(before)
        if not wanted:
            continue
        back = names_to_placeholders(after, cast)
        counts["named"] += 1
        counts["mapped"] += len(PLACEHOLDER.findall(back)) == len(wanted) and not _name_word().search(back)
        counts["faithful"] += back == before
    return counts


def mention_counts(scene: str, mentions_text: str | None) -> dict[str, int]:
    """The writer's output mention by mention (`<e3> Rhea Dorsey <e0> Valentin`): how many it
    wrote, how many are a cast member's name (full, or a first name no other member shares) and
    how many name the placeholder's own character (<ek> is the scene's k-th). A blend of two
    members' names ("Rhea Wexley") is neither. A one-stage model writes none."""
    from eric.generate.merge import parse_mentions
    from eric.world.phrasings import PLACEHOLDER, names_to_placeholders

    cast = _cast(scene)
    counts = dict.fromkeys(MENTION_FIELDS, 0)
    for placeholder, text in parse_mentions(mentions_text or ""):
        back = names_to_placeholders(text, cast).strip()
        counts["mentions"] += 1
        counts["cast_mentions"] += PLACEHOLDER.fullmatch(back) is not None
        counts["own_mentions"] += back == placeholder
    return counts
