"""The evaluate stage's line figures: one line per series on a small PNG, written whole or not
at all (eric/data/outdir.py `replace_figure`)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from eric.data.outdir import replace_figure


def line_figure(path: str | Path, series: Iterable[tuple[str, Sequence[float], Sequence[float]]], title: str,
                xlabel: str, ylabel: str, chance: float | None = None, **style) -> Path:
    """`series`: (label, x, y) per line, drawn with `style` (matplotlib's keywords); `chance`: a
    dotted horizontal line at that y."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = 0
    for label, x, y in series:
        ax.plot(x, y, label=label, **style)
        drawn += 1
    if chance is not None:
        ax.axhline(chance, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if drawn:
        ax.legend(fontsize="small")
    fig.tight_layout()
    replace_figure(fig, path, dpi=120)
    plt.close(fig)
    return path
