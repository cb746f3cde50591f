"""Case studies: a few test inputs with the human story and every variant's story, unit by unit.

    cases = build_cases({"eric": rows, "bart": rows}, count=3, seed=42, world=False)
    case_markdown(cases, display_name); case_html(cases, display_name, explorers)

Each unit of a final text is split back into the stage-one text's pieces and the mentions
that filled its placeholders (so a mention is shown with the placeholder it stands for);
units of variants with states carry their planned entity and state id; on EntityWorld
(`world=True`) each final unit carries the checker's verdict (parsed, broken rules).
"""

from __future__ import annotations

import html
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from eric.data.schema import SENT_TOKEN
from eric.generate.merge import PLACEHOLDER

Piece = tuple[str, str | None]  # (text, placeholder it fills) or (literal text, None)


@dataclass
class UnitView:
    pieces: list[Piece]  # the final unit: literal text and mentions with their placeholder
    stage_one: str
    entity: str | None = None  # the planned entity p_n (variants with a planner)
    state: int | None = None  # its state id s_n (variants with states)
    verdict: str | None = None  # EntityWorld: "parsed", "unparsed" or "breaks <rule>, ..."

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.pieces).strip()


@dataclass
class CaseView:
    id: str
    input: str
    reference: list[str]
    variants: dict[str, list[UnitView]] = field(default_factory=dict)


def split_mentions(stage_one: str, final: str) -> list[Piece]:
    """The final text as the stage-one text's literal pieces and the mention that filled each
    placeholder (the merge only replaces placeholders, so the literals find the mentions); a
    text that does not match is one literal piece."""
    literals, tags = PLACEHOLDER.split(stage_one), PLACEHOLDER.findall(stage_one)
    pattern = "(.*?)".join(re.escape(piece) for piece in literals)
    found = re.fullmatch(pattern, final, flags=re.DOTALL)
    if found is None:
        return [(final, None)]
    pieces: list[Piece] = [(literals[0], None)]
    for tag, mention, literal in zip(tags, found.groups(), literals[1:]):
        pieces += [(mention, tag if mention != tag else None), (literal, None)]  # unfilled: stays literal
    return [p for p in pieces if p[0]]


def split_units(pieces: list[Piece]) -> list[list[Piece]]:
    """Pieces grouped into units at the `<sent>` tokens of the literal text (special tokens
    dropped; as eric/world/metrics.text_units, an empty unit before the first `<sent>` is not one)."""
    units: list[list[Piece]] = [[]]
    for text, tag in pieces:
        for k, part in enumerate(text.split(SENT_TOKEN) if tag is None else [text]):
            if k:
                units.append([])
            cleaned = part.replace("</s>", "").replace("<s>", "").replace("<pad>", "")
            if cleaned.strip():
                units[-1].append((cleaned, tag))
    return units[1:] if not units[0] and len(units) > 1 else units


def unit_views(row: dict, max_units: int | None = None) -> list[UnitView]:
    """The units of one sample row (eric/generate/schema.py SAMPLES) with their plan."""
    final = split_units(split_mentions(row["stage_one"], row["final_text"]))
    stage_one = [" ".join("".join(t for t, _ in unit).split()) for unit in split_units([(row["stage_one"], None)])]
    entities, states = row.get("unit_entities") or [], row.get("unit_states") or []
    views = []
    for n, pieces in enumerate(final[:max_units] if max_units else final):
        state = states[n] if n < len(states) and states[n] is not None and states[n] >= 0 else None
        views.append(UnitView(pieces, stage_one[n] if n < len(stage_one) else "",
                              entities[n] if n < len(entities) else None, state))
    return views


def world_verdicts(scene: str, units: list[UnitView]) -> None:
    """The checker's verdict on each final unit, replayed in order (names mapped to the cast)."""
    from eric.world.checker import Replay

    replay = Replay(scene, names=True)
    for unit in units:
        check = replay.step(unit.text)
        unit.verdict = ("unparsed" if check.event is None else
                        "breaks " + ", ".join(check.violations) if check.violations else "parsed")


def pick_ids(samples: dict[str, list[dict]], count: int, seed: int) -> list[str]:
    """`count` inputs every variant sampled, chosen with `seed`, in the samples' order."""
    common = set.intersection(*(set(str(r["id"]) for r in rows) for rows in samples.values())) if samples else set()
    first = [str(r["id"]) for r in next(iter(samples.values()), [])]
    chosen = set(random.Random(seed).sample(sorted(common), min(count, len(common))))
    return [i for i in first if i in chosen]


def build_cases(samples: dict[str, list[dict]], count: int, seed: int, world: bool = False,
                max_units: int | None = None) -> list[CaseView]:
    by_id = {variant: {str(r["id"]): r for r in rows} for variant, rows in samples.items()}
    cases = []
    for case_id in pick_ids(samples, count, seed):
        first = next(iter(by_id.values()))[case_id]
        reference = [u for u in (first.get("reference") or "").split(SENT_TOKEN) if u.strip()]
        case = CaseView(case_id, first["input"], [" ".join(u.split()) for u in reference[:max_units]])
        for variant, rows in by_id.items():
            case.variants[variant] = unit_views(rows[case_id], max_units)
            if world:
                world_verdicts(first["input"], case.variants[variant])
        cases.append(case)
    return cases


# -- rendering --------------------------------------------------------------------------------
CASE_NOTE = ("Test inputs chosen with the seed; the human story, then each variant's final text unit by unit. "
             "A mention is marked with the placeholder it fills; p_n / s_n: the unit's planned entity and its "
             "state (variants with a planner or states).")


def _plan(unit: UnitView) -> str:
    parts = [f"p_n {unit.entity}"] if unit.entity else []
    return ", ".join(parts + ([f"s_n {unit.state}"] if unit.state is not None else []))


def _md(text: str) -> str:
    """Text safe in Markdown: a placeholder is not an HTML tag, emphasis marks stay characters."""
    return re.sub(r"([<>*_`\\])", lambda m: {"<": "&lt;", ">": "&gt;"}.get(m.group(1), "\\" + m.group(1)), text)


def case_markdown(cases: list[CaseView], name) -> str:
    lines = [CASE_NOTE, ""]
    for k, case in enumerate(cases, 1):
        lines += [f"### Case {k}: {case.id}", "", f"**Input.** {_md(case.input)}", "", "**Human story.**", "",
                  *(f"{n}. {_md(unit)}" for n, unit in enumerate(case.reference, 1)), ""]
        for variant, units in case.variants.items():
            lines += [f"**{name(variant)}.**", ""]
            for n, unit in enumerate(units, 1):
                text = "".join(f"**{_md(t.strip())}**`{tag}` " if tag else _md(t) for t, tag in unit.pieces)
                notes = "; ".join(x for x in (_plan(unit), unit.verdict) if x)
                lines.append(f"{n}. {' '.join(text.split())}" + (f" _({_md(notes)})_" if notes else ""))
            lines.append("")
    return "\n".join(lines)


def _unit_html(unit: UnitView, explorer: str | None) -> str:
    text = "".join(f"<mark title='{html.escape(tag)}'>{html.escape(t.strip())}<sub>{html.escape(tag)}</sub></mark> "
                   if tag else html.escape(t) for t, tag in unit.pieces)
    plan = []
    if unit.entity:
        plan.append(f"p<sub>n</sub> {html.escape(unit.entity)}")
    if unit.state is not None:
        state = f"s<sub>n</sub> {unit.state}"
        plan.append(f"<a href='{html.escape(explorer)}#state-{unit.state}'>{state}</a>" if explorer else state)
    verdict = f"<span class='verdict {unit.verdict.split()[0]}'>{html.escape(unit.verdict)}</span>" if unit.verdict else ""
    details = f"<details><summary>stage one</summary>{html.escape(unit.stage_one)}</details>"
    return (f"<li>{' '.join(text.split())} <span class='plan'>{' · '.join(plan)}</span> {verdict}{details}</li>")


def case_html(cases: list[CaseView], name, explorers: dict[str, str] | None = None) -> str:
    """Each case as a row of columns: the human story, then every variant (`explorers`:
    variant -> the state explorer page its state ids link to)."""
    explorers = explorers or {}
    parts = [f"<p>{html.escape(CASE_NOTE)} Open <em>stage one</em> for the placeholder text.</p>"]
    for k, case in enumerate(cases, 1):
        columns = ["<div class='case-col'><h4>Human story</h4><ol>"
                   + "".join(f"<li>{html.escape(u)}</li>" for u in case.reference) + "</ol></div>"]
        for variant, units in case.variants.items():
            items = "".join(_unit_html(u, explorers.get(variant)) for u in units)
            columns.append(f"<div class='case-col' data-variant='{html.escape(variant)}'>"
                           f"<h4>{html.escape(name(variant))}</h4><ol>{items}</ol></div>")
        parts += [f"<h3>Case {k}: {html.escape(case.id)}</h3>", f"<p><strong>Input.</strong> {html.escape(case.input)}</p>",
                  f"<div class='case'>{''.join(columns)}</div>"]
    return "\n".join(parts)


CASE_STYLE = (".case{display:flex;gap:1em;overflow-x:auto}.case-col{flex:1;min-width:16em}"
              ".case-col ol{padding-left:2.2em}.case-col li{margin-bottom:.4em;text-align:left}"
              "mark{background:#fff3b0}mark sub{color:#777}.plan{color:#555;font-size:.85em}"
              ".verdict{font-size:.85em}.verdict.parsed{color:#17701d}.verdict.unparsed{color:#777}"
              ".verdict.breaks{color:#b3261e}details{font-size:.8em;color:#555}")


# -- the terminal view (`eric show`) ---------------------------------------------------------
PREVIEW_STORIES = 10  # stories in a samples preview (the MLflow artifact beside each samples file)


def samples_preview(name: str, rows: list[dict], title: str, count: int = PREVIEW_STORIES) -> str:
    """A samples file's first `count` stories as Markdown (input, human story, the variant's
    final text unit by unit): what a reviewer reads in MLflow, where Parquet shows nothing."""
    cases = build_cases({name: rows[:count]}, count, seed=0)
    shown = f"{len(cases)} of {len(rows)} stories" if len(cases) < len(rows) else f"all {len(rows)} stories"
    return f"# {title}: samples preview ({shown})\n\n" + case_markdown(cases, lambda _: title) + "\n"


def read_sample_files(files: dict[str, Path]) -> dict[str, list[dict]]:
    """name -> rows of a samples file (eric/generate/schema.py SAMPLES); a one-line error otherwise."""
    from eric.evaluate.errors import EvaluationError
    from eric.generate.schema import read_samples

    found = {}
    for name, path in files.items():
        if not path.is_file():
            raise EvaluationError(f"{path}: no samples file (run `eric sample` or `dvc repro sample@{name}`)")
        try:
            rows = read_samples(path)
        except Exception as exc:  # not Parquet: pyarrow raises its own types
            raise EvaluationError(f"{path}: not a samples Parquet file ({exc.__class__.__name__})") from None
        missing = {"id", "input", "stage_one", "final_text"} - set(rows[0] if rows else {})
        if not rows or missing:
            raise EvaluationError(f"{path}: no sample rows" + (f" (missing {', '.join(sorted(missing))})" if rows else ""))
        found[name] = rows
    return found


def case_at(samples: dict[str, list[dict]], index: int, world: bool = False,
            max_units: int | None = None) -> CaseView:
    """The `index`-th input of the first file, with every file's story for that input."""
    from eric.evaluate.errors import EvaluationError

    first = next(iter(samples.values()))
    if not -len(first) <= index < len(first):
        raise EvaluationError(f"--index {index}: the first file has {len(first)} inputs (0 to {len(first) - 1})")
    wanted = str(first[index]["id"])
    by_id = {name: {str(r["id"]): r for r in rows} for name, rows in samples.items()}
    lacking = [name for name, rows in by_id.items() if wanted not in rows]
    if lacking:
        raise EvaluationError(f"input {wanted} is not in the samples of {', '.join(lacking)}")
    return build_cases({name: [rows[wanted]] for name, rows in by_id.items()}, 1, 0, world, max_units)[0]


def case_rich(case: CaseView, name):
    """A rich renderable: the input, the human story and each variant's units with marked mentions."""
    from rich.console import Group
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    parts = [Panel(escape(case.input), title=f"input {escape(case.id)}", title_align="left")]
    if case.reference:
        parts.append(Panel("\n".join(f"{n}. {escape(u)}" for n, u in enumerate(case.reference, 1)),
                           title="human story", title_align="left"))
    for variant, units in case.variants.items():
        planned = any(_plan(u) for u in units)  # a variant without a planner or states has no plan column
        title = name(variant) + ("" if planned else " (no planner, no states)")
        grid = Table(title=title, title_justify="left", show_lines=False, expand=True)
        grid.add_column("#", justify="right", width=3)
        grid.add_column("unit", ratio=1)
        if planned:
            grid.add_column("plan", no_wrap=True)
        if any(u.verdict for u in units):
            grid.add_column("checker")
        for n, unit in enumerate(units, 1):
            text = "".join(f"[bold yellow]{escape(t.strip())}[/][dim]{escape(tag)}[/] " if tag else escape(t)
                           for t, tag in unit.pieces)
            row = [str(n), " ".join(text.split()), *([escape(_plan(unit))] if planned else [])]
            if unit.verdict is not None:
                color = {"parsed": "green", "unparsed": "dim"}.get(unit.verdict, "red")
                row.append(f"[{color}]{escape(unit.verdict)}[/]")
            grid.add_row(*row)
        parts.append(grid)
    return Group(*parts)
