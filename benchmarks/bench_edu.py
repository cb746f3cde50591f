"""EDU segmenter: speed on wikiplots-mini and unit lengths next to the authors' released texts.

    python benchmarks/bench_edu.py [--stories N] [--out result.json]

Reads the sentences preprocess would read (the first 16 of each story), parses them
once (tok2vec, tagger, parser, attribute ruler: what EDUs add to preprocess; NER is
left out) and segments them with both rule sets. Speed = sentences in and EDUs out
per second of parse + segmentation, wall clock and this process's CPU time (the
fairer figure on a shared host; OMP_NUM_THREADS=1 makes them one core's). Lengths are words (whitespace) and NLTK
WordPunct tokens per unit over each story's target window (units 2..16), as in the
released ERIC texts, whose units are split at `<mask>`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from itertools import islice
from pathlib import Path

from tqdm import tqdm

from eric.config import PROJECT_ROOT
from eric.data.edu import edu_ranges, presplit_doc
from eric.data.errors import SkipCounter
from eric.data.nlp import load_pipeline
from eric.data.readers import read_corpus
from eric.data.segment import clean_units
from eric.data.stats import count_tokens
from record import record

WIKIPLOTS_MINI = PROJECT_ROOT / "corpora" / "wikiplots-mini" / "plots.zip"
RULES = ("discodvt", "clauses")


def lengths(stories: list[list[str]]) -> dict:
    """Mean/median words and WordPunct tokens per unit of the target windows (units 2..16)."""
    units = [u for story in stories for u in story[1:16]]
    words = [len(u.split()) for u in units]
    tokens = [count_tokens(u) for u in units]
    return {
        "units": len(units),
        "units_per_story": round(len(units) / max(len(stories), 1), 2),
        "words_mean": round(statistics.mean(words), 2),
        "words_median": statistics.median(words),
        "tokens_mean": round(statistics.mean(tokens), 2),
        "tokens_median": statistics.median(tokens),
    }


def released_units(path: Path) -> list[list[str]]:
    """The released texts, each as one list of units; a leading empty unit stands for the input."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [[""] + [u.strip() for u in line.split("<mask>") if u.strip()] for line in lines]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stories", type=int, default=None, help="the first N stories [all]")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--released", type=Path, default=None,
                    help="the authors' wikiplots_ERIC.txt (optional input: docs/paper-notes.md), for its unit lengths")
    args = ap.parse_args()
    if args.released and not args.released.is_file():
        ap.error(f"no file at {args.released}")

    stories = read_corpus("wikiplots", WIKIPLOTS_MINI, SkipCounter())
    sentences = [clean_units(s.units)[:16] for s in islice(stories, args.stories)]
    sentences = [s for s in sentences if s]
    nlp = load_pipeline(split_sentences=False, parse=True)
    n_sent = sum(len(s) for s in sentences)

    with nlp.select_pipes(disable=["ner"]):
        started, cpu = time.perf_counter(), time.process_time()
        docs = list(tqdm(nlp.pipe(presplit_doc(nlp, s) for s in sentences), total=len(sentences), desc="parse"))
        parse_s, parse_cpu = time.perf_counter() - started, time.process_time() - cpu
    result = {"stories": len(sentences), "sentences": n_sent, "parse_seconds": round(parse_s, 1),
              "parse_cpu_seconds": round(parse_cpu, 1),
              "sentence": lengths(sentences)}
    if args.released:
        result["released"] = lengths(released_units(args.released))
    for rules in RULES:
        started, cpu = time.perf_counter(), time.process_time()
        edus = [[d.text[a:b] for sent in d.sents for a, b in edu_ranges(sent, rules)] for d in docs]
        seg_s, seg_cpu = time.perf_counter() - started, time.process_time() - cpu
        n_edu = sum(len(e) for e in edus)
        result[rules] = {
            **lengths(edus),
            "edus": n_edu,
            "edus_per_sentence": round(n_edu / n_sent, 3),
            "segment_seconds": round(seg_s, 2),
            "sentences_per_s": round(n_sent / (parse_s + seg_s), 1),
            "edus_per_s": round(n_edu / (parse_s + seg_s), 1),
            "sentences_per_cpu_s": round(n_sent / (parse_cpu + seg_cpu), 1),
            "edus_per_cpu_s": round(n_edu / (parse_cpu + seg_cpu), 1),
            "rules_only_edus_per_cpu_s": round(n_edu / max(seg_cpu, 1e-9)),
        }
    print(json.dumps(result, indent=2))
    record("bench_edu", {"stories": result["stories"], "sentences": n_sent, "parse_seconds": result["parse_seconds"],
                         **{f"{r}_edus_per_cpu_s": result[r]["edus_per_cpu_s"] for r in RULES}})
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
