"""Evaluation time for 1,000 texts: the text metrics alone, and with MAUVE.

    python benchmarks/bench_evaluate.py [--n 1000] [--no-mauve] [--featurizer minilm|GPT2_DIR] [--released PATH]

Generations: the next --n stories of wikiplots-mini (units 2..16), or with --released the
authors' released ERIC texts (an optional input: docs/paper-notes.md). References: the
first --n stories of wikiplots-mini. They are not the generations' references, so the
MAUVE figure printed is a timing by-product, not a result. Timings are wall seconds of one
run (the host is noisy); each stage is timed separately:
  text metrics   prepare + tokenize + Rpt/D/Zipf/Len + BLEU/MSJ (both sides)
  featurizer     loading the model (once per process)
  features       featurizing generations and references
  clustering     mauve-text's PCA + k-means + divergence curve
"""

from __future__ import annotations

import argparse
import time
import zipfile
from pathlib import Path

from eric.config import PROJECT_ROOT
from eric.evaluate.io import read_generations
from eric.evaluate.mauve_score import make_featurizer, mauve_score
from eric.evaluate.scoring import evaluate_texts
from eric.evaluate.text import prepare
from record import record

WIKIPLOTS = PROJECT_ROOT / "corpora" / "wikiplots-mini" / "plots.zip"


def human_stories() -> list[str]:
    """Units 2..16 of the stories with at least 6 sentences, as '<sent> ...'."""
    with zipfile.ZipFile(WIKIPLOTS) as archive:
        lines = archive.read("plots").decode("utf-8").splitlines()
    stories, current = [], []
    for line in lines:
        if line.strip() == "<EOS>":
            if len(current) >= 6:
                stories.append(" ".join(f"<sent> {s}" for s in current[1:16]))
            current = []
        elif line.strip():
            current.append(line.strip())
    return stories


def timed(label: str, fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    seconds = time.perf_counter() - start
    print(f"  {label:<14} {seconds:8.2f} s")
    return value, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--no-mauve", action="store_true")
    parser.add_argument("--featurizer", default="minilm")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--released", type=Path, help="the authors' wikiplots_ERIC.txt as generations")
    args = parser.parse_args()
    if args.released and not args.released.is_file():
        parser.error(f"no file at {args.released}")

    stories = human_stories()
    references = stories[: args.n]
    generations = read_generations(args.released).texts if args.released else stories[args.n :]
    n = min(len(references), len(generations), args.n)
    generations, references = generations[:n], references[:n]
    print(f"{n} {'released ERIC texts' if args.released else 'other wikiplots-mini stories'} vs {n} wikiplots-mini stories")

    scores, text_s = timed("text metrics", evaluate_texts, generations, references, mauve=False)
    total = text_s
    if not args.no_mauve:
        featurizer, load_s = timed("featurizer", make_featurizer, args.featurizer)
        gen_texts = [prepare(t) for t in generations]
        ref_texts = [prepare(t) for t in references]
        (q, p), feat_s = timed("features", lambda: (featurizer(gen_texts), featurizer(ref_texts)))
        (score, buckets), cluster_s = timed("clustering", mauve_score, p, q, args.seed)
        total += load_s + feat_s + cluster_s
        print(f"  featurizer: {featurizer.name}; {2 * n / feat_s:.1f} texts/s; {buckets} buckets")
        print(f"  MAUVE (timing by-product, not comparable to the paper): {100 * score:.2f}")
    print(f"total for {n} texts{'' if args.no_mauve else ' with MAUVE'}: {total:.1f} s")
    figures = {"texts": n, "text_metrics_seconds": round(text_s, 2), "total_seconds": round(total, 2)}
    record("bench_evaluate" if args.no_mauve else "bench_evaluate_mauve", figures)
    print("  " + ", ".join(f"{k} {scores[k]:.2f}" for k in ("B-1", "MSJ-1", "Rpt-16", "D-3", "Zipf", "Len")))


if __name__ == "__main__":
    main()
