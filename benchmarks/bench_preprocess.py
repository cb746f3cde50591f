"""Preprocess throughput: our stage vs raw spaCy `nlp.pipe` on the same texts.

    python benchmarks/bench_preprocess.py [--stories 600] [--jsonl PATH]

Corpus: the embedded wikiplots-mini, or with --jsonl a JSON-lines corpus of your own
(e.g. wikibio-mini, an optional input: docs/pipeline.md).

Raw = `nlp.pipe` over exactly the texts our stage hands to spaCy, with the same
components; ours = the whole stage (read, clean, NER, anonymize, write Parquet).
Goal: ours >= 0.85 x raw. Also prints the speed-up of n_process=2.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from itertools import islice
from pathlib import Path

from eric.config import load_params
from eric.data.dedupe import Deduper
from eric.data.errors import SkipCounter
from eric.data.nlp import load_pipeline
from eric.data.pipeline import _tasks, run_preprocess
from eric.data.readers import read_corpus
from record import record

WIKIPLOTS_MINI = "corpora/wikiplots-mini/plots.zip"


def params(kind: str, path: str, stories: int, out: Path, n_process: int = 1):
    return load_params(
        None,
        {
            "corpus.kind": kind,
            "corpus.path": path,
            "preprocess.max_stories": stories,
            "preprocess.out_dir": str(out),
            "preprocess.n_process": n_process,
        },
    )


def time_raw(cfg) -> float:
    skips = SkipCounter()
    stories = islice(read_corpus(cfg.corpus.kind, Path(cfg.corpus.path).resolve(), skips), cfg.preprocess.max_stories)
    texts = [text for text, _ in _tasks(stories, cfg.preprocess, skips, Deduper())]
    nlp = load_pipeline(split_sentences=cfg.corpus.kind != "wikiplots")
    start = time.perf_counter()
    for _ in nlp.pipe(texts, batch_size=cfg.preprocess.batch_size):
        pass
    return time.perf_counter() - start


def time_ours(cfg) -> float:
    start = time.perf_counter()
    run_preprocess(cfg, progress=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stories", type=int, default=600)
    parser.add_argument("--jsonl", help="a JSON-lines corpus instead of wikiplots-mini")
    parser.add_argument("--repeats", type=int, default=3, help="best of N, interleaved (noisy host)")
    args = parser.parse_args()
    kind, path = ("jsonl", args.jsonl) if args.jsonl else ("wikiplots", WIKIPLOTS_MINI)
    if not Path(path).is_file():
        parser.error(f"no corpus at {path}")
    with tempfile.TemporaryDirectory() as tmp:
        cfg1 = params(kind, path, args.stories, Path(tmp) / "one")
        load_pipeline(split_sentences=kind != "wikiplots")  # model load outside the timings
        cfg2 = params(kind, path, args.stories, Path(tmp) / "two", n_process=2)
        raw = ours = ours2 = float("inf")
        for _ in range(args.repeats):
            raw = min(raw, time_raw(cfg1))
            ours = min(ours, time_ours(cfg1))
            ours2 = min(ours2, time_ours(cfg2))
    n = args.stories
    print(f"corpus={path} stories={n} best of {args.repeats}")
    print(f"raw nlp.pipe      : {n / raw:7.1f} stories/s")
    print(f"ours, n_process=1 : {n / ours:7.1f} stories/s  (ratio to raw {raw / ours:.2f}; goal >= 0.85)")
    print(f"ours, n_process=2 : {n / ours2:7.1f} stories/s  (speed-up {ours / ours2:.2f}x)")
    record("bench_preprocess", {"stories": n, "raw_stories_per_s": round(n / raw, 1),
                                "ours_stories_per_s": round(n / ours, 1), "ratio_to_raw": round(raw / ours, 3),
                                "goal_ratio": 0.85, "n_process_2_speedup": round(ours / ours2, 3)})


if __name__ == "__main__":
    main()
