"""The results report: every variant in one table like the paper's Table 2, a Truth row
(reference-free metrics of the human references), the analyses, and two plots.

    paths = write_report(ReportInputs(...), "reports")
    # reports/results.md, results.html, coherence.png, state_usage.png

`ReportInputs` holds what the evaluate@<variant> stages wrote (metrics JSON,
coherence rows, state-usage rows, state-transition rows) plus a line about how the
models were made (corpus, size, training budget), printed above the table.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from eric.config import form_label
from eric.data.outdir import replace_text
from eric.evaluate.case_study import CASE_STYLE, CaseView, case_html, case_markdown
from eric.evaluate.coherence import plot_coherence
from eric.evaluate.scoring import METRIC_NAMES, REFERENCE_FREE, format_value
from eric.evaluate.state_analysis import plot_usage
from eric.evaluate.state_transitions import transitions_html, transitions_markdown
from eric.evaluate.world_metrics import WORLD_HEADER, WORLD_NOTE, world_rows

DISPLAY_NAMES = {
    "eric": "ERIC",
    "eric_no_state_attention": "w/o StateAttn",
    "eric_no_state": "w/o s_n",
    "eric_no_state_no_entity": "w/o s_n & p_n",
    "bart": "BART",
    "seq2seq": "Seq2Seq",
    "simctg": "SimCTG",
    "plan_ahead": "PlanAhead",
    "discodvt": "DiscoDVT",
    "hint": "HINT",
}
MISSING = "–"
REPORT_TRANSITIONS = 5  # pairs per ranking and variant
TRANSITIONS_NOTE = ("On the training split: an entity's successive units in a text in which it is the planned "
                    "entity and has a gold state (other units skipped). Confidence: the product of each unit's "
                    "state-to-event cosine, averaged over the pair's transitions. Two examples per pair, the most "
                    "confident, the entity highlighted.")
ANALYSIS_COLUMNS = ("Form", "Mention control", "States used", "Top state", "Coherence (LM)", "Coherence (LM, rand. states)",
                    "Reused mention", "Random name")


def display_name(variant: str) -> str:
    """ERIC, BART, ...; a coherence label "eric (random states)" reads "ERIC (Rand)" as in the paper."""
    base, random_states = variant.removesuffix(" (random states)"), variant.endswith(" (random states)")
    return DISPLAY_NAMES.get(base, base) + (" (Rand)" if random_states else "")


@dataclass
class ReportInputs:
    metrics: dict[str, dict]  # variant -> metrics/evaluate/<variant>.json
    truth: dict | None = None  # reference-free metrics of the references
    coherence: list[dict] = field(default_factory=list)  # rows: model, position, accuracy, count
    usage: dict[str, list[dict]] = field(default_factory=dict)  # variant -> state_usage rows
    about: list[str] = field(default_factory=list)  # lines: corpus, model size, budget, scoring
    transitions: dict[str, list[dict]] = field(default_factory=dict)  # variant -> state_transitions rows
    humaneval: tuple[str, str] | None = None  # Table 3 as (Markdown, HTML): eric.humaneval.table.report_section
    training: dict[str, dict] = field(default_factory=dict)  # variant -> metrics/train/<variant>.json
    cases: list[CaseView] = field(default_factory=list)  # eric/evaluate/case_study.py
    explorers: dict[str, str] = field(default_factory=dict)  # variant -> its state explorer, relative to the report
    matched: dict[str, float] = field(default_factory=dict)  # variant -> B-1 at equal length (scoring.matched_b1)


def table_rows(inputs: ReportInputs) -> list[list[str]]:
    """Model + Table-2 metrics, one row per variant, then Truth."""
    rows = [[display_name(v), *(_metric(m, name) for name in METRIC_NAMES)] for v, m in inputs.metrics.items()]
    if inputs.truth is not None:
        rows.append(["Truth", *(_metric(inputs.truth, n) if n in REFERENCE_FREE else MISSING for n in METRIC_NAMES)])
    return rows


def _metric(metrics: dict, name: str) -> str:
    value = metrics.get(name)
    if value is None:
        return MISSING
    if name == "MAUVE" and metrics.get("mauve_min") is not None:  # the mean, its seeds' lowest and highest
        return f"{format_value(name, value)} ({metrics['mauve_min']:.2f}–{metrics['mauve_max']:.2f})"
    return format_value(name, value)


def length_note(inputs: ReportInputs) -> str:
    """B-1 at equal length beside B-1 and Len, one clause per variant; '' without it."""
    if not inputs.matched:
        return ""
    parts = [f"{display_name(v)} {value:.2f} (B-1 {_metric(inputs.metrics.get(v, {}), 'B-1')}, "
             f"Len {_metric(inputs.metrics.get(v, {}), 'Len')})" for v, value in inputs.matched.items()]
    return f"B-1 at equal length: {'; '.join(parts)}. {MATCHED_NOTE}"


def _percent(value) -> str:
    return MISSING if value is None else f"{100 * value:.1f}"


def analysis_rows(inputs: ReportInputs) -> list[list[str]]:
    rows = []
    for variant, m in inputs.metrics.items():
        top = (m.get("top_states") or {}).get("1")
        coherence = m.get("coherence") or {}
        fallback = m.get("fallback") or {}
        rows.append([
            display_name(variant),
            m.get("form", form_label(True)),  # evaluations before the setting were all two-stage
            _percent(m.get("mention_control")),
            _used(m),
            _top(top, m.get("top_code")),
            _percent((coherence.get(variant) or {}).get("accuracy")),
            _percent((coherence.get(f"{variant} (random states)") or {}).get("accuracy")),
            _percent(fallback.get("reused_last_share")),
            _percent(fallback.get("random_name_share")),
        ])
    return rows


TRAINING_COLUMNS = ("Steps", "Parameters", "Train time", "Tokens/s", "Val loss", "Val LM loss")
TRAINING_NOTE = ("Stage-one training of each variant (metrics/train/<variant>.json): optimizer steps, parameters "
                 "(millions, with any training-only module), wall time of the optimizer steps (validation "
                 "excluded), training tokens per second, final validation loss (all of the variant's terms) "
                 "and its LM term, teacher-forced: a variant with states reads the gold state of every unit, "
                 "which the sentence encoder computes from that very unit, so its LM term is not comparable "
                 "with one of a model without states.")


def training_rows(inputs: ReportInputs) -> list[list[str]]:
    rows = []
    for variant, t in inputs.training.items():
        seconds = t.get("train_seconds")
        steps = str(t.get("steps", MISSING))
        if t.get("prior_steps"):  # DiscoDVT: its prior's phase too (eric/train/phases.py)
            steps += f" + {t['prior_steps']} prior"
            seconds = (seconds or 0) + (t.get("prior_train_seconds") or 0)
        rows.append([
            display_name(variant), steps,
            MISSING if t.get("parameters") is None else f"{t['parameters'] / 1e6:.1f}M",
            MISSING if seconds is None else f"{int(seconds // 60)}:{int(seconds % 60):02d}",
            MISSING if t.get("tokens_per_s") is None else f"{t['tokens_per_s']:,.0f}",
            MISSING if t.get("final_val_loss") is None else f"{t['final_val_loss']:.3f}",
            MISSING if t.get("final_val_lm_loss") is None else f"{t['final_val_lm_loss']:.3f}",
        ])
    return rows


def _used(m: dict) -> str:
    """States used of K (ERIC), or codes used of K (DiscoDVT's codebook)."""
    if m.get("states_used") is not None:
        return f"{m['states_used']}/{m.get('num_states')}"
    if m.get("codes_used") is not None:
        return f"{m['codes_used']}/{m.get('num_codes')} codes"
    return MISSING


def _top(state: dict | None, code: dict | None) -> str:
    if state is not None:
        return f"{state['state']}: {100 * state['share']:.1f}"
    return MISSING if code is None else f"code {code['code']}: {100 * code['share']:.1f}"


TABLE_NOTE = ("B-n, MSJ-n, MAUVE, Rpt-L, D-n and mention/fallback shares in %; Len in tokens. "
              "MAUVE: the mean over its k-means seeds (the header says which), in parentheses the lowest and "
              "highest seed's score (on a hundred-odd texts one seed's score is no figure to compare). "
              "Truth: the human references (reference-free metrics only).")
MATCHED_NOTE = ("Each input's generations (of every variant in the table) and its reference cut to the shortest "
                "of them, so every variant is scored on the same number of tokens and BLEU's brevity penalty, "
                "which rewards length while generations are shorter than the references, is 1.")
ANALYSIS_NOTE = ("Form: two-stage (placeholders, then the mention model writes the names: ERIC's paradigm) or "
                 "one-stage (real names written directly, as the paper's BART and baselines); the coherence "
                 "test swaps placeholders, so it scores two-stage models only. "
                 "Mention control: generated units mentioning the planned entity (or none for `<none>`). "
                 "States used: of K, by the gold states of the training units (DiscoDVT: codes used of its "
                 "K by the posterior over the training targets); top state (code): id and share. "
                 "Coherence (LM): accuracy of preferring the original unit to one whose first placeholder was "
                 "swapped for an earlier entity, by the unit's LM score (the paper's test). A model that reads "
                 "p_n is told the swapped-in entity and pays nothing for choosing it, so this column compares "
                 "models that all read p_n (ERIC, its ablations with an entity input) with each other and "
                 "with their random-state runs; it does not rank them against models without p_n. The "
                 "scorings for that comparison (joint: plus the planner's log-probability of the entity; "
                 "event: the swapped placeholder left out of both scores) with McNemar's test between paired "
                 "models are in the EntityWorld study (docs/entityworld-study.md). Reused mention / random name: merge fallbacks "
                 "(shares of placeholder occurrences).")


@dataclass(frozen=True)
class Block:
    """One piece of the report, in both formats: the report is one list of these (`sections`)."""

    markdown: str
    html: str


def _heading(level: int, text: str, anchor: str = "") -> Block:
    ident = f" id='{anchor}'" if anchor else ""
    return Block(f"{'#' * level} {text}", f"<h{level}{ident}>{html.escape(text, quote=False)}</h{level}>")


def _note(text: str) -> Block:
    return Block(text, f"<p>{html.escape(text)}</p>")


def _bullets(lines: list[str]) -> Block:
    return Block("\n".join(f"- {line}" for line in lines), "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>")


def _table(header: list[str], rows: list[list[str]]) -> Block:
    return Block(markdown_table(header, rows), _html_table(header, rows))


def _images(plots: dict[str, str]) -> Block:
    markdown = "\n\n".join(f"![{title}]({name})" for title, name in plots.items())
    images = "".join(f"<img src='{html.escape(name)}' alt='{html.escape(title)}'>" for title, name in plots.items())
    return Block(markdown, f"<div>{images}</div>")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def sections(inputs: ReportInputs, plots: dict[str, str]) -> list[Block]:
    """The report, in order; `to_markdown` and `to_html` only render this list."""
    blocks = [_heading(1, "Results"), _bullets(inputs.about),
              _heading(2, "Automatic evaluation (as the paper's Table 2)"),
              _table(["Model", *METRIC_NAMES], table_rows(inputs)), _note(TABLE_NOTE),
              *([_note(length_note(inputs))] if inputs.matched else []),
              _heading(2, "Analyses"), _table(["Model", *ANALYSIS_COLUMNS], analysis_rows(inputs)), _note(ANALYSIS_NOTE)]
    if inputs.training:
        blocks += [_heading(2, "Training"), _table(["Model", *TRAINING_COLUMNS], training_rows(inputs)),
                   _note(TRAINING_NOTE)]
    if inputs.humaneval:  # scored human-evaluation studies, rendered by eric/humaneval
        blocks += [_heading(2, "Manual evaluation (as the paper's Table 3)"), Block(*inputs.humaneval)]
    world = world_rows(inputs.metrics, display_name)
    if world:  # EntityWorld runs: the checker's figures and learned vs true states
        blocks += [_heading(2, "EntityWorld"), _table(WORLD_HEADER, world), _note(WORLD_NOTE)]
    blocks.append(_images(plots))
    if inputs.cases:
        blocks += [_heading(2, "Case study", anchor="case-study"),
                   Block(case_markdown(inputs.cases, display_name), case_html(inputs.cases, display_name, inputs.explorers))]
    if inputs.transitions:
        blocks += [_heading(2, "State transitions (as the paper's Table 5)"), _note(TRANSITIONS_NOTE)]
        for variant, rows in inputs.transitions.items():
            blocks += [_heading(3, display_name(variant)),
                       Block(transitions_markdown(rows, REPORT_TRANSITIONS), transitions_html(rows, REPORT_TRANSITIONS))]
    return blocks


_STYLE = """body{font-family:sans-serif;max-width:75em;margin:2em auto}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}img{max-width:48%;margin-right:1%}
.transitions td{text-align:left;vertical-align:top}.cos{color:#777;font-size:.85em}""" + CASE_STYLE


def to_markdown(inputs: ReportInputs, plots: dict[str, str]) -> str:
    return "\n".join(f"{block.markdown}\n" for block in sections(inputs, plots))


def to_html(inputs: ReportInputs, plots: dict[str, str]) -> str:
    return "\n".join([
        "<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>ERIC results</title>",
        f"<style>{_STYLE}</style></head><body>", *(block.html for block in sections(inputs, plots)),
        "</body></html>",
    ])


def write_report(inputs: ReportInputs, out_dir: str | Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "coherence": plot_coherence([{**r, "model": display_name(r["model"])} for r in inputs.coherence],
                                    out_dir / "coherence.png", "Entity coherence: accuracy vs position"),
        "state_usage": plot_usage({display_name(v): rows for v, rows in inputs.usage.items()},
                                  out_dir / "state_usage.png", "State usage on the training split"),
    }
    plots = {"Entity coherence by position": "coherence.png", "State usage": "state_usage.png"}
    paths["markdown"] = out_dir / "results.md"
    replace_text(paths["markdown"], to_markdown(inputs, plots))  # each file whole or not at all
    paths["html"] = out_dir / "results.html"
    replace_text(paths["html"], to_html(inputs, plots))
    return paths


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """A left-aligned table (the report's tables right-align their numbers)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]
    return "\n".join(lines) + "\n"


def number(value) -> str:
    """A figure for a table: 3 significant digits below 100, thousands separators above."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)
