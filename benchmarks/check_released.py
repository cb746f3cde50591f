"""The evaluator against the paper: the authors' released WikiPlots generations must give
the paper's Table 2 row for ERIC, to the printed digit.

    python benchmarks/check_released.py PATH/wikiplots_ERIC.txt

The file is the authors' (their ERIC release on GitHub, thu-coai/ERIC; it carries no
licence, so this repository does not hold it). Exit status 0 when every value matches.
"""

from __future__ import annotations

import sys
from pathlib import Path

from eric.evaluate.io import read_generations
from eric.evaluate.scoring import evaluate_texts

# Paper, Table 2, ERIC on WikiPlots (1,000 texts; reference-free metrics only).
PAPER = {"Rpt-16": "16.22", "Rpt-32": "28.12", "Rpt-64": "37.06", "D-3": "75.94", "D-4": "93.02",
         "Zipf": "1.11", "Len": "236"}


def shown(name: str, value: float) -> str:
    return f"{value:.0f}" if name == "Len" else f"{value:.2f}"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python benchmarks/check_released.py PATH/wikiplots_ERIC.txt "
              "(the authors' released generations: github.com/thu-coai/ERIC)", file=sys.stderr)
        return 2
    texts = read_generations(Path(argv[0])).texts
    scores = evaluate_texts(texts, None, mauve=False)
    rows = [(k, PAPER[k], shown(k, scores[k])) for k in PAPER]
    for name, paper, ours in rows:
        print(f"{name:<7} paper {paper:>6}  here {ours:>6}  {'ok' if paper == ours else 'DIFFERS'}")
    print(f"{len(texts)} texts")
    return 0 if all(p == o for _, p, o in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
