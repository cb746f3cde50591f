"""The paper's Table 3 layout: one row per study "A vs. B", win / lose / tie in % for
informativeness and coherence, the share of texts with entity issues for A / B; Fleiss'
kappa beside each figure and * / ** where A is significantly better (p < 0.05 / 0.01,
sign test)."""

from __future__ import annotations

import html

MISSING = "–"
HEADER = ["Comparison", "Informativeness (Win / Lose / Tie)", "Coherence (Win / Lose / Tie)",
          "Entity issues (A / B)"]
NOTE = ("Percentages of items (majority of the annotators); κ: Fleiss' kappa; * / **: A significantly better "
        "than B with p < 0.05 / 0.01 (two-sided sign test: wins vs losses, or items where only one text has "
        "entity issues). A tie is the majority answer, or no answer leading.")


def _pct(value) -> str:
    return MISSING if value is None else f"{value:.0f}"


def _kappa(value) -> str:
    return "" if value is None else f" (κ {value:.2f})"


def _stars(p, better: bool) -> str:
    if p is None or not better:
        return ""
    return "**" if p < 0.01 else "*" if p < 0.05 else ""


def row(result: dict, display=lambda name: name) -> list[str]:
    cells = [f"{display(result['a'])} vs. {display(result['b'])}"]
    for aspect in ("informativeness", "coherence"):
        r = result[aspect]
        stars = _stars(r["p_value"], r["wins"] > r["losses"])
        cells.append(f"{_pct(r['win'])}{stars}{_kappa(r['kappa'])} / {_pct(r['lose'])} / {_pct(r['tie'])}")
    e = result["entity_issues"]
    stars = _stars(e["p_value"], e["a_count"] < e["b_count"])
    cells.append(f"{_pct(e['a'])}{stars}{_kappa(e['kappa_a'])} / {_pct(e['b'])}{_kappa(e['kappa_b'])}")
    return cells


def footnote(results: list[dict]) -> str:
    parts = []
    for r in results:
        problems = ", ".join(f"{kind.replace('_', ' ')} {count}" for kind, count in r["problems"].items() if count)
        parts.append(f"{r['a']} vs. {r['b']} (study {r['study_id']}): {r['items_scored']} of {r['items_in_key']} "
                     f"items scored, {r['annotators']} annotators each" + (f"; {problems}" if problems else ""))
    return "; ".join(parts) + "."


def to_markdown(results: list[dict], display=lambda name: name) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---:|---:|---:|"]
    lines += ["| " + " | ".join(row(r, display)) + " |" for r in results]
    return "\n".join(lines + ["", NOTE, "", footnote(results)])


def to_html(results: list[dict], display=lambda name: name) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row(r, display)) + "</tr>" for r in results)
    return (f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<p>{html.escape(NOTE)}</p><p>{html.escape(footnote(results))}</p>")


def report_section(results: list[dict]) -> tuple[str, str] | None:
    """The report's Table-3 section, (Markdown, HTML), with the report's model names; None
    without scored studies. Rendered here: this package sits above eric.evaluate."""
    from eric.evaluate.report import display_name

    return (to_markdown(results, display_name), to_html(results, display_name)) if results else None
