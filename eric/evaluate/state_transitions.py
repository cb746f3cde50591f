"""Entity state transitions (the paper's appendix, Table 5 "state transitions").

Made from the gold states of the training units that `training_state_usage` computes
(one pass, no extra model call). Definitions:

- Transition: within one text, the units whose planned entity p_n is entity x and that
  carry a gold state, in unit order; every two successive ones give x a transition
  (s_i -> s_j). The model gives a state only to p_n, so a unit planned for another entity,
  or with no state (unit 1 in the code's setting, `<none>`, past the truncated target),
  is skipped: the two units need not be adjacent (as in Table 5, "the first sentence"
  and "the second sentence" in which the entity appears). Self transitions (i -> i) count.
- Confidence of a transition: cos(d_i, e_i) * cos(d_j, e_j), each unit's state vector
  against its own event representation e_n (the appendix: "the product of the cosine
  distances between the two state vectors to their respective event representations";
  they are the similarities the nearest-state lookup maximizes). Two negative cosines
  (possible in an untrained space) give a positive product, as in the paper's formula.
- Confidence of a pair (i -> j): the mean over its transitions. The paper does not say
  how transitions combine; the mean keeps rare and frequent pairs comparable. Ranking
  by confidence only considers pairs seen at least `MIN_COUNT` (2) times: a pair seen
  once would top the list by chance, and the paper shows two examples per pair.
- Examples of a pair: its `EXAMPLES` (2) transitions of highest confidence.
"""

from __future__ import annotations

import csv
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Protocol

EXAMPLES = 2
MIN_COUNT = 2


class Unit(Protocol):
    """What a transition needs of a unit (state_analysis.UnitExample has it)."""

    state: int
    cosine: float
    story: str
    title: str
    unit: int  # 0-based
    text: str
    entity: str


@dataclass(frozen=True)
class UnitPair:
    """One transition of one entity: two of its units (0-based) in one text."""

    entity: str
    story: str
    title: str
    first: int
    second: int
    state_from: int
    state_to: int
    text_from: str
    text_to: str
    confidence: float


def unit_pairs(units: Iterable[Unit]) -> list[UnitPair]:
    """The transitions of one text's units with a gold state (any order), by entity
    then by unit: each entity's successive units, whatever lies between them."""
    by_entity: dict[str, list[Unit]] = {}
    for u in units:
        by_entity.setdefault(u.entity, []).append(u)
    pairs = []
    for entity in sorted(by_entity):
        ordered = sorted(by_entity[entity], key=lambda u: u.unit)
        for a, b in zip(ordered, ordered[1:]):
            pairs.append(UnitPair(entity, a.story, a.title, a.unit, b.unit, a.state, b.state, a.text, b.text,
                                  a.cosine * b.cosine))
    return pairs


def _better(pair: UnitPair) -> tuple:
    return (-pair.confidence, pair.story, pair.first, pair.entity)


@dataclass
class PairStats:
    state_from: int
    state_to: int
    count: int = 0
    confidence_sum: float = 0.0
    examples: list[UnitPair] = field(default_factory=list)  # best first, at most EXAMPLES

    @property
    def confidence(self) -> float:
        return self.confidence_sum / self.count if self.count else 0.0


@dataclass
class Transitions:
    """Transition pairs counted text by text; only each pair's best examples are kept."""

    pairs: dict[tuple[int, int], PairStats] = field(default_factory=dict)
    examples: int = EXAMPLES

    def add_text(self, units: Iterable[Unit]) -> None:
        for pair in unit_pairs(units):
            stats = self.pairs.setdefault((pair.state_from, pair.state_to), PairStats(pair.state_from, pair.state_to))
            stats.count += 1
            stats.confidence_sum += pair.confidence
            stats.examples = sorted([*stats.examples, pair], key=_better)[: self.examples]

    @property
    def total(self) -> int:
        return sum(s.count for s in self.pairs.values())

    def rows(self) -> list[dict]:
        """Every pair, most frequent first (ties: higher confidence, then lower ids); what
        the CSV holds and the report and explorer show. Units are numbered from 1."""
        total = self.total or 1
        order = sorted(self.pairs.values(), key=lambda s: (-s.count, -s.confidence, s.state_from, s.state_to))
        return [{"state_from": s.state_from, "state_to": s.state_to, "count": s.count,
                 "share": round(s.count / total, 6), "confidence": round(s.confidence, 6),
                 "examples": [_example_row(p) for p in s.examples]} for s in order]


def _example_row(p: UnitPair) -> dict:
    return {"entity": p.entity, "story": p.story, "title": p.title, "unit_from": p.first + 1,
            "unit_to": p.second + 1, "text_from": p.text_from, "text_to": p.text_to,
            "confidence": round(p.confidence, 6)}


def ranked(rows: list[dict], by: str, n: int = 10, min_count: int = MIN_COUNT) -> list[dict]:
    """The top n rows by "count" (then confidence) or by "confidence" (pairs seen at
    least min_count times; then count); ties: lower state ids first."""
    if by == "count":
        key = lambda r: (-r["count"], -r["confidence"], r["state_from"], r["state_to"])  # noqa: E731
        return sorted(rows, key=key)[:n]
    if by == "confidence":
        key = lambda r: (-r["confidence"], -r["count"], r["state_from"], r["state_to"])  # noqa: E731
        return sorted((r for r in rows if r["count"] >= min_count), key=key)[:n]
    raise ValueError(f"rank by 'count' or 'confidence', not {by!r}")


def summary(rows: list[dict]) -> dict:
    """Transitions, distinct pairs and the share that stays in the same state."""
    total = sum(r["count"] for r in rows)
    same = sum(r["count"] for r in rows if r["state_from"] == r["state_to"])
    return {"transitions": total, "pairs": len(rows), "self_share": same / total if total else None}


# -- CSV -----------------------------------------------------------------------------------
_EXAMPLE_FIELDS = ("entity", "story", "title", "unit_from", "unit_to", "text_from", "text_to", "confidence")
_PAIR_FIELDS = ("state_from", "state_to", "count", "share", "confidence")


def write_transitions(rows: list[dict], path: str | Path, examples: int = EXAMPLES) -> Path:
    """One line per pair (Transitions.rows()), its examples in columns ex1_*, ex2_*."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = [*_PAIR_FIELDS, *(f"ex{k}_{f}" for k in range(1, examples + 1) for f in _EXAMPLE_FIELDS)]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for r in rows:
            cells = [r[f] for f in _PAIR_FIELDS]
            for k in range(examples):
                ex = r["examples"][k] if k < len(r["examples"]) else None
                cells += [ex[f] if ex else "" for f in _EXAMPLE_FIELDS]
            writer.writerow(cells)
    return path


def read_transitions(path: str | Path) -> list[dict]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        slots = sorted({int(name[2 : name.index("_")]) for name in reader.fieldnames or [] if name.startswith("ex")})
        rows = []
        for line in reader:
            row = {"state_from": int(line["state_from"]), "state_to": int(line["state_to"]),
                   "count": int(line["count"]), "share": float(line["share"]),
                   "confidence": float(line["confidence"]), "examples": []}
            for k in slots:
                if line[f"ex{k}_story"] or line[f"ex{k}_entity"]:
                    ex = {f: line[f"ex{k}_{f}"] for f in _EXAMPLE_FIELDS}
                    ex.update(unit_from=int(ex["unit_from"]), unit_to=int(ex["unit_to"]),
                              confidence=float(ex["confidence"]))
                    row["examples"].append(ex)
            rows.append(row)
    return rows


# -- display -------------------------------------------------------------------------------
def summary_line(rows: list[dict]) -> str:
    s = summary(rows)
    if not s["transitions"]:
        return "No transitions: no entity has a state in two units of one text."
    return (f"{s['transitions']} transitions of {s['pairs']} distinct state pairs; "
            f"{100 * s['self_share']:.1f}% stay in the same state.")


_RANKINGS = (("count", "Most frequent"), ("confidence", "Highest transition confidence"))


def _md_text(text: str, entity: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    tag = entity.replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace(tag, f"**{tag}**") if tag else escaped


def _md_example(ex: dict) -> str:
    return (f"{_md_text(ex['text_from'], ex['entity'])} → {_md_text(ex['text_to'], ex['entity'])} "
            f"({_md_text(ex['title'] or ex['story'], '')} {ex['unit_from']}→{ex['unit_to']}, "
            f"conf. {ex['confidence']:.3f})")


def transitions_markdown(rows: list[dict], n: int = 5, min_count: int = MIN_COUNT) -> str:
    """Top n pairs by frequency and by confidence, two examples each, as Markdown tables."""
    parts = [summary_line(rows)]
    for by, heading in _RANKINGS:
        top = ranked(rows, by, n, min_count)
        parts += ["", f"{heading}" + (f" (pairs seen at least {min_count} times)" if by == "confidence" else "")
                  + ":", ""]
        if not top:
            parts.append("none")
            continue
        parts += ["| Transition | Count | Share (%) | Confidence | Example 1 | Example 2 |",
                  "|---|---:|---:|---:|---|---|"]
        for r in top:
            examples = [_md_example(ex) for ex in r["examples"][:EXAMPLES]]
            examples += ["–"] * (EXAMPLES - len(examples))
            parts.append(f"| {r['state_from']} → {r['state_to']} | {r['count']} | {100 * r['share']:.1f} | "
                         f"{r['confidence']:.3f} | " + " | ".join(examples) + " |")
    return "\n".join(parts)


def _html_text(text: str, entity: str, state: int) -> str:
    escaped, tag = html.escape(text), html.escape(entity)
    return escaped.replace(tag, f"<mark>{tag}</mark><sub>{state}</sub>") if tag else escaped


def _html_where(ex: dict, first: bool) -> str:
    if first:
        return f" <span class='cos'>{html.escape(ex['title'] or ex['story'])}, unit {ex['unit_from']}</span>"
    return f" <span class='cos'>unit {ex['unit_to']} · conf. {ex['confidence']:.3f}</span>"


def _html_state(state: int, link: bool) -> str:
    return f"<a href='#state-{state}'>{state}</a>" if link else str(state)


def transitions_html(rows: list[dict], n: int = 5, min_count: int = MIN_COUNT, link_states: bool = False) -> str:
    """Top n pairs by frequency and by confidence, two examples each, as HTML tables;
    `link_states` links the ids to the explorer's #state-<id> sections."""
    parts = [f"<p>{html.escape(summary_line(rows))}</p>"]
    for by, heading in _RANKINGS:
        top = ranked(rows, by, n, min_count)
        note = f" (pairs seen at least {min_count} times)" if by == "confidence" else ""
        parts.append(f"<h3>{heading}{note}</h3>")
        if not top:
            parts.append("<p>none</p>")
            continue
        parts.append("<table class='transitions'><thead><tr><th>Transition</th><th>Count</th><th>Share (%)</th>"
                     "<th>Confidence</th><th>First unit</th><th>Second unit</th></tr></thead><tbody>")
        for r in top:
            examples = r["examples"][:EXAMPLES] or [None]
            for k, ex in enumerate(examples):
                cells = ""
                if k == 0:
                    span = f" rowspan='{len(examples)}'"
                    cells = (f"<td{span}>{_html_state(r['state_from'], link_states)} → "
                             f"{_html_state(r['state_to'], link_states)}</td><td{span}>{r['count']}</td>"
                             f"<td{span}>{100 * r['share']:.1f}</td><td{span}>{r['confidence']:.3f}</td>")
                if ex is None:
                    cells += "<td>–</td><td>–</td>"
                else:
                    cells += (f"<td>{_html_text(ex['text_from'], ex['entity'], r['state_from'])}"
                              f"{_html_where(ex, True)}</td>"
                              f"<td>{_html_text(ex['text_to'], ex['entity'], r['state_to'])}"
                              f"{_html_where(ex, False)}</td>")
                parts.append(f"<tr>{cells}</tr>")
        parts.append("</tbody></table>")
    return "\n".join(parts)
