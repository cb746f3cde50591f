"""Entity state analysis (the paper's appendix "Entity State Analysis").

- Entity mention control (on generations): the share of generated units that mention
  the entity planned for them, or mention none when `<none>` was planned (paper: 96.6%).
- State space utilization (on the training split): every training unit with an entity
  gets its gold state (the event representation e_n from the sentence encoder,
  quantized to the nearest state); how many of the K states are used (paper: 501/512),
  the most used states and their shares.
- State transitions (the paper's Table 5), from the same gold states: each entity's
  successive states in a text, ranked by frequency and by transition confidence
  (eric/evaluate/state_transitions.py).
- State explorer: a plain HTML page listing, for each state, the training units whose
  event representations are nearest to it (highest cosine), as in the paper's case
  tables, after the top transitions.
"""

from __future__ import annotations

import csv
import html
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from eric.data.collate import StageOneCollator
from eric.evaluate.figures import line_figure
from eric.data.schema import NONE_ENTITY, SENT_TOKEN
from eric.evaluate.state_transitions import Transitions, transitions_html

_PLACEHOLDER = re.compile(r"<e\d+>")


# -- entity mention control ------------------------------------------------------------
@dataclass
class MentionControl:
    hits: int = 0
    units: int = 0  # generated units with a planned entity (or <none>), empty units left out

    @property
    def share(self) -> float | None:
        return self.hits / self.units if self.units else None


def stage_one_units(stage_one: str) -> list[str]:
    """The units of a stage-one text, in order (the text starts with <sent>)."""
    pieces = stage_one.split(SENT_TOKEN)
    head, rest = pieces[0], pieces[1:]
    return ([head.strip()] if head.strip() else []) + [p.strip() for p in rest]


def unit_follows_plan(unit: str, planned: str) -> bool:
    mentioned = set(_PLACEHOLDER.findall(unit))
    return not mentioned if planned == NONE_ENTITY else planned in mentioned


def mention_control(samples: list[dict]) -> MentionControl:
    """Over sample rows (stage_one, unit_entities): units that follow their planned entity."""
    control = MentionControl()
    for row in samples:
        for unit, planned in zip(stage_one_units(row["stage_one"]), row.get("unit_entities") or []):
            if planned is None or not unit:  # not planned (unit 1 in the code's setting), or empty
                continue
            control.units += 1
            control.hits += unit_follows_plan(unit, planned)
    return control


def generated_states(samples: list[dict]) -> Counter:
    """How often each state was predicted while sampling."""
    return Counter(s for row in samples for s in (row.get("unit_states") or []) if s is not None and s >= 0)


# -- state space utilization on the training split --------------------------------------
@dataclass(frozen=True)
class UnitExample:
    state: int
    cosine: float
    story: str  # row id
    title: str
    unit: int  # 0-based unit of the target
    text: str  # the anonymized unit
    entity: str  # the placeholder whose state it is


@dataclass
class StateUsage:
    num_states: int
    counts: list[int]  # units assigned to each state
    nearest: dict[int, list[UnitExample]] = field(default_factory=dict)  # best first
    transitions: Transitions = field(default_factory=Transitions)  # of the same units

    @property
    def units(self) -> int:
        return sum(self.counts)

    @property
    def used(self) -> int:
        return sum(1 for c in self.counts if c)

    def top(self, n: int = 10) -> list[dict]:
        """The n most used states with their shares of all units (ties: lower id first)."""
        order = sorted(range(self.num_states), key=lambda s: (-self.counts[s], s))[:n]
        total = self.units or 1
        return [{"state": s, "count": self.counts[s], "share": self.counts[s] / total} for s in order if self.counts[s]]


def gold_states(model, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(state ids [B, N] (-1 = none), events [B, N, D]) of a collated batch: the units the
    model gives a state in training, each e_n from the sentence encoder quantized to its
    nearest state (the model's `reference_states`: no decoder, no LM head, the same ids as
    `model(**batch).state_ids`, a few times faster)."""
    return model.reference_states(batch["labels"], batch["entity_ids"], batch["entity_positions"])


def training_state_usage(
    model,
    tokenizer,
    rows: list[dict],
    *,
    batch_size: int = 16,
    max_source_length: int = 128,
    max_target_length: int = 512,
    entity_choice: str = "uniform",
    seed: int = 42,
    per_state: int = 10,
    progress: bool = True,
) -> StateUsage:
    """Gold states of the training units (p_n drawn as in training, seeded), the
    `per_state` units nearest to each state and the state transitions of each text."""
    config = model.config
    if not config.use_state:
        raise ValueError("this variant has no state space")
    collator = StageOneCollator(tokenizer, max_source_length, max_target_length, config.max_entities,
                                entity_choice=entity_choice, seed=seed)
    model.eval()
    with torch.no_grad():
        vectors = model.state_space.lookup(torch.arange(config.num_states, device=model.device)).float().cpu()
    counts = [0] * config.num_states
    found: list[UnitExample] = []
    transitions = Transitions()
    starts = range(0, len(rows), batch_size)
    for start in tqdm(starts, desc="training states", disable=not progress, unit="batch"):
        chunk = rows[start : start + batch_size]
        batch = {k: v.to(model.device) for k, v in collator(chunk).items()}
        state_ids, events = gold_states(model, batch)
        for units in _examples(chunk, batch["entity_ids"].cpu(), state_ids.cpu(), events, vectors):
            found.extend(units)
            transitions.add_text(units)
    for example in found:
        counts[example.state] += 1
    return StateUsage(config.num_states, counts, _nearest(found, per_state), transitions)


def _examples(rows, entity_ids, state_ids, events, vectors) -> list[list[UnitExample]]:
    """The units with a gold state, one list per row (text)."""
    events = events.float().cpu()
    out: list[list[UnitExample]] = [[] for _ in rows]
    for b, n in (state_ids >= 0).nonzero().tolist():
        state = int(state_ids[b, n])
        cosine = float(events[b, n] @ vectors[state])
        row = rows[b]
        text = row["units"][n] if n < len(row["units"]) else ""
        out[b].append(UnitExample(state, cosine, str(row.get("id")), str(row.get("title") or ""), n, text,
                                  f"<e{int(entity_ids[b, n]) - 1}>"))
    return out


def _nearest(examples: list[UnitExample], per_state: int) -> dict[int, list[UnitExample]]:
    by_state: dict[int, list[UnitExample]] = {}
    for example in sorted(examples, key=lambda e: (e.state, -e.cosine, e.story, e.unit)):
        listed = by_state.setdefault(example.state, [])
        if len(listed) < per_state:
            listed.append(example)
    return by_state


# -- outputs -----------------------------------------------------------------------------
def write_usage(usage: StateUsage, path: str | Path) -> Path:
    """state,count,share for every state, most used first (the usage plot reads it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    total = usage.units or 1
    order = sorted(range(usage.num_states), key=lambda s: (-usage.counts[s], s))
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["rank", "state", "count", "share"])
        for rank, s in enumerate(order, 1):
            writer.writerow([rank, s, usage.counts[s], round(usage.counts[s] / total, 6)])
    return path


def read_usage(path: str | Path) -> list[dict]:
    with open(path, newline="") as handle:
        return [{"rank": int(r["rank"]), "state": int(r["state"]), "count": int(r["count"]),
                 "share": float(r["share"])} for r in csv.DictReader(handle)]


_STYLE = """body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}
details{border-bottom:1px solid #ddd;padding:.3em 0}summary{cursor:pointer}
mark{background:#ffe08a;padding:0 .15em}.cos{color:#777;font-size:.85em}li{margin:.2em 0}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:.2em .5em;vertical-align:top}"""
EXPLORER_TRANSITIONS = 10  # pairs per ranking on the explorer page


def explorer_html(usage: StateUsage, title: str = "Entity states") -> str:
    """The top state transitions, then each used state (most used first) with its
    nearest training units; plain HTML."""
    total = usage.units or 1
    order = [s for s in sorted(range(usage.num_states), key=lambda s: (-usage.counts[s], s)) if usage.counts[s]]
    parts = [
        "<!DOCTYPE html>", "<html><head><meta charset='utf-8'>", f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
        f"<p>{usage.used} of {usage.num_states} states used by {usage.units} training units. "
        "Under each state: the units whose event representation is nearest to it (cosine), "
        "the entity whose state it is highlighted.</p>",
        "<h2>State transitions</h2>",
        "<p>An entity's successive units in a text in which it is the planned entity and has a "
        "state (other units skipped); confidence: the product of each unit's state-to-event "
        "cosine, averaged over the pair's transitions. Two examples each, most confident first.</p>",
        transitions_html(usage.transitions.rows(), EXPLORER_TRANSITIONS, link_states=True),
        "<h2>States</h2>",
    ]
    for s in order:
        parts.append(f"<details id='state-{s}'><summary><b>State {s}</b>: {usage.counts[s]} units "
                     f"({100 * usage.counts[s] / total:.2f}%)</summary><ol>")
        for ex in usage.nearest.get(s, []):
            parts.append(f"<li>{_highlight(ex.text, ex.entity)} <span class='cos'>cos {ex.cosine:.3f} · "
                         f"{html.escape(ex.title or ex.story)}, unit {ex.unit + 1}</span></li>")
        parts.append("</ol></details>")
    unused = [s for s in range(usage.num_states) if not usage.counts[s]]
    if unused:
        parts.append(f"<p>Unused states ({len(unused)}): {', '.join(map(str, unused))}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _highlight(text: str, entity: str) -> str:
    escaped, tag = html.escape(text), html.escape(entity)
    return escaped.replace(tag, f"<mark>{tag}</mark>")


def plot_usage(usages: dict[str, list[dict]], path: str | Path, title: str = "State usage") -> Path:
    """Share of training units per state, states ranked by use; one line per variant."""
    series = []
    for label, rows in usages.items():
        used = [r for r in rows if r["count"]]
        series.append((f"{label} ({len(used)}/{len(rows)} states)", [r["rank"] for r in used],
                       [100 * r["share"] for r in used]))
    return line_figure(path, series, title, "state rank", "share of training units (%)")
