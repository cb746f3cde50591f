"""EntityWorld metrics in `evaluate@<variant>` (corpus.kind: world) and their report table.

- checks: the checker over the samples' stage-one texts (placeholders; names for a
  one-stage model), final texts (names mapped back to the cast of the input) and references
  (the Truth row): rates (eric/evaluate/world_checks.py), the rate at the world's event mix
  (world_mix.py), and per story and per event kind the counts a study aggregates;
- coherence where the checker gives the answer: as eric/evaluate/coherence.py, but a
  unit's first placeholder is swapped only for an earlier one that makes the unit
  break a rule (the checker decides), so every case is a true incoherence; under every
  scoring (lm, joint, event) and state mode (predicted, gold, random: eric/evaluate/
  coherence.py), with each case's outcome (`coherence_variants`);
- state agreement: on the test split, each unit's gold state (sentence encoder ->
  nearest state) for its focal character, against the true (event type, condition
  after) of that character: NMI and purity (also against event, condition, entity).
"""

from __future__ import annotations

import random

import torch
from tqdm.auto import tqdm

from eric.data.collate import StageOneCollator
from eric.evaluate.coherence import (
    GOLD,
    LM,
    SCORINGS,
    Case,
    CoherenceResult,
    CoherenceScorer,
    Text,
    mode_label,
    state_modes,
)
from eric.evaluate.state_analysis import gold_states
from eric.evaluate.world_checks import (
    CHECK_FIELDS,
    NAME_FIELDS,
    columns,
    mention_counts,
    name_counts,
    rates,
    story_checks,
    story_counts,
)
from eric.evaluate.world_mix import kind_columns, standardized
from eric.world.checker import Replay
from eric.world.metrics import nmi, purity, summarize
from eric.world.phrasings import PLACEHOLDER

WORLD_COLUMNS = ["world_cast", "world_events", "world_focal", "world_states"]


def sample_checks(samples: list[dict], max_units: int | None = None, mix: dict[str, float] | None = None,
                  one_stage: bool = False) -> dict:
    """Checker summaries of the stage-one texts, final texts and references of sample rows;
    `stories` and `event_kinds`: per story (sample order) the counts behind them, for a study
    to bootstrap over and pair by story; with `mix` (world_mix.py) the rates at that mix.
    A one-stage model writes names in stage one, so its texts are read with names."""
    scenes = [r["input"] for r in samples]
    texts = {"stage_one": ([r["stage_one"] for r in samples], one_stage),
             "final": ([r["final_text"] for r in samples], True)}
    if all(r.get("reference") for r in samples):
        texts["reference"] = ([r["reference"] for r in samples], True)
    out, stories, kinds = {}, {"id": [r.get("id") for r in samples]}, {}
    for key, (found, names) in texts.items():
        checks = story_checks(scenes, found, names, max_units)
        counts = [story_counts(c) for c in checks]
        if key == "final":  # do the names of the final texts map back to the cast?
            counts = [{**c, **name_counts(r["input"], r["stage_one"], r["final_text"], max_units),
                       **mention_counts(r["input"], r.get("mentions_text"))} for c, r in zip(counts, samples)]
        per_story, by_kind = columns(counts, (*CHECK_FIELDS, *NAME_FIELDS)), kind_columns(checks)
        out[key] = {**summarize(checks), **rates(per_story), **(standardized(by_kind, mix) if mix else {})}
        if key != "reference":  # the references break nothing: their summary is the Truth row
            stories[key], kinds[key] = per_story, by_kind
    return {**out, "stories": stories, "event_kinds": {**({"world_mix": mix} if mix else {}), **kinds}}


# -- coherence decided by the checker ------------------------------------------------------
class WorldCoherenceScorer(CoherenceScorer):
    """Cases: for unit k, an earlier placeholder that makes unit k break a rule."""

    def __init__(self, model, tokenizer, rows: list[dict], **options):
        super().__init__(model, tokenizer, **options)
        self.rows = {str(r["id"]): r for r in rows}
        self.tokenizer = tokenizer

    def cases(self, texts: list[Text]) -> list[Case]:
        found = []
        for t, text in enumerate(texts):
            row = self.rows[text.id]
            replay = Replay(row["source"])
            for n, (start, end) in enumerate(text.spans):
                unit = row["units"][n]
                position, _ = self._first_entity(text.labels, start, end)
                earlier = {tok for tok in text.labels[:start] if tok in self.entity_class}
                if position >= 0:
                    own = text.labels[position]
                    swaps = [tok for tok in sorted(earlier - {own}) if self._breaks(replay, unit, tok)]
                    if swaps:
                        rng = random.Random(f"{self.seed}:{text.id}:{n}")
                        found.append(Case(t, n, position, rng.choice(swaps)))
                replay.step(unit)
        return found

    def _breaks(self, replay: Replay, unit: str, token: int) -> bool:
        swapped = PLACEHOLDER.sub(self.tokenizer.convert_ids_to_tokens(token), unit, count=1)
        return bool(replay.peek(swapped).violations)


def world_coherence(model, tokenizer, rows: list[dict], variant: str, **options) -> list[CoherenceResult]:
    """Accuracy by position on checker-decided swaps: predicted and random states if the
    variant has states."""
    scorer = WorldCoherenceScorer(model, tokenizer, rows, **options)
    return [scorer.run(rows, mode, mode_label(variant, mode)) for mode in state_modes(model.config)]


def coherence_variants(model, tokenizer, rows: list[dict], variant: str, scorings=SCORINGS,
                       **options) -> tuple[list[CoherenceResult], dict]:
    """Checker-decided coherence under each scoring and state mode: the `lm` results (the
    paper's test, as `world_coherence`, without gold states; empty without lm) and, for the
    metrics, every `<scoring>/<mode>` accuracy (with gold states beside predicted and random)
    with each case's outcome (`right`, 0/1, in the order of `cases`: text id and 0-based
    unit), so that models can be paired case by case (McNemar)."""
    lm, accuracy, right, keys = [], {}, {}, None
    for scoring in scorings:
        scorer = WorldCoherenceScorer(model, tokenizer, rows, scoring=scoring, **options)
        for mode in state_modes(model.config, gold=True):
            result = scorer.run(rows, mode, mode_label(variant, mode))
            lm += [result] if scoring == LM and mode != GOLD else []
            outcomes = {(t, u): int(r) for t, u, r in result.outcomes}
            keys = keys if keys is not None else list(outcomes)  # the same cases under every scoring and mode
            accuracy[f"{scoring}/{mode}"] = result.accuracy
            right[f"{scoring}/{mode}"] = [outcomes[k] for k in keys]
    keys = keys or []
    return lm, {"accuracy": accuracy, "cases": {"text": [t for t, _ in keys], "unit": [u for _, u in keys]},
                "right": right}


# -- learned states vs true states ---------------------------------------------------------
def focal_rows(rows: list[dict]) -> list[dict]:
    """Rows whose every unit has its focal character as the only entity, so the gold state
    computed for a unit is the focal character's."""
    return [{**r, "unit_entities": [[f] for f in r["world_focal"]]} for r in rows]


def focal_index(row: dict, unit: int) -> int:
    """k of the unit's focal character <ek>: its place in the scene sentence and in `world_states`."""
    return int(PLACEHOLDER.fullmatch(row["world_focal"][unit]).group(1))


def true_labels(row: dict, unit: int) -> dict[str, str]:
    k = focal_index(row, unit)
    event, condition = row["world_events"][unit], row["world_states"][unit][k]["condition"]
    return {"event_condition": f"{event}/{condition}", "event": event, "condition": condition,
            "entity": row["world_focal"][unit]}


def state_agreement(model, tokenizer, rows: list[dict], *, batch_size: int = 16, max_source_length: int = 128,
                    max_target_length: int = 512, seed: int = 42, progress: bool = True) -> dict:
    """NMI and purity of the gold state ids of the focal characters against true labels."""
    collator = StageOneCollator(tokenizer, max_source_length, max_target_length, model.config.max_entities,
                                seed=seed)
    model.eval()
    states: list[int] = []
    labels: dict[str, list[str]] = {}
    rows = focal_rows(rows)
    starts = range(0, len(rows), batch_size)
    for start in tqdm(starts, desc="state agreement", disable=not progress, unit="batch"):
        chunk = rows[start : start + batch_size]
        batch = {k: v.to(model.device) for k, v in collator(chunk).items()}
        with torch.no_grad():
            ids = gold_states(model, batch)[0].cpu()
        for b, n in (ids >= 0).nonzero().tolist():
            states.append(int(ids[b, n]))
            for name, value in true_labels(chunk[b], n).items():
                labels.setdefault(name, []).append(value)
    scores = {name: {"nmi": nmi(states, values), "purity": purity(states, values),
                     "classes": len(set(values))} for name, values in labels.items()}
    main = scores.get("event_condition", {})
    return {"nmi": main.get("nmi"), "purity": main.get("purity"), "units": len(states),
            "states_used": len(set(states)), "by_label": scores}


# -- the report's EntityWorld table ---------------------------------------------------------
WORLD_HEADER = ["Model", "Parse rate", "Violations / unit", "State violations / unit", "Clean stories",
                "Parse rate (names)", "Violations / unit (names)", "State violations / unit (names)",
                "Clean stories (names)", "Coherence", "NMI", "Purity", "States used (test)"]


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _num(value, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _checks_cells(world: dict, key: str) -> list[str]:
    c = world.get(key) or {}
    return [_pct(c.get("parse_rate")), _num(c.get("violation_rate")), _num(c.get("state_violation_rate")),
            _pct(c.get("clean_stories"))]


def world_rows(metrics: dict[str, dict], display_name) -> list[list[str]]:
    """One row per variant with EntityWorld metrics, then Truth (the references)."""
    rows, truth = [], None
    for variant, m in metrics.items():
        world = m.get("world")
        if not world:
            continue
        coherence = ((m.get("coherence") or {}).get(variant) or {}).get("accuracy")
        states = world.get("states") or {}
        rows.append([display_name(variant), *_checks_cells(world, "stage_one"), *_checks_cells(world, "final"),
                     _pct(coherence), _num(states.get("nmi")), _pct(states.get("purity")),
                     "–" if not states else str(states.get("states_used"))])
        truth = truth or world.get("reference")
    if truth:
        rows.append(["Truth", "–", "–", "–", "–", *_checks_cells({"reference": truth}, "reference"), "–", "–", "–", "–"])
    return rows


WORLD_NOTE = ("EntityWorld (the checker, eric/world): parse rate = units a phrasing reads exactly (%); "
              "violations per parsed unit (state: of the rules that need the replayed state, not just the scene's "
              "cast, places and items); clean stories = stories with a parsed unit and no violation (%); "
              "stage-one texts (placeholders) and final texts (names mapped back to the input's cast). "
              "Coherence: accuracy of preferring the original unit to one whose first placeholder was swapped "
              "for an earlier entity that makes the unit break a rule. NMI / purity: gold state of each test "
              "unit's focal character vs its true (event type, condition after).")
