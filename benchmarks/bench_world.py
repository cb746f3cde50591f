"""EntityWorld generation speed: stories per second, one process and several.

    python benchmarks/bench_world.py [--stories 12000] [--workers 1 2]

Generates the stories only (eric/world/generate.py: the rules, the draws, the phrasings;
no Parquet), with CPU time of this process for one worker and wall time for several.
"""

from __future__ import annotations

import argparse
import time

from record import record

from eric.world.generate import generate_stories


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stories", type=int, default=12000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    result = {"stories": args.stories}
    for workers in args.workers:
        clock = time.process_time if workers == 1 else time.perf_counter  # workers' CPU is not ours
        start = time.perf_counter(), clock()
        count = sum(1 for _ in generate_stories(args.seed, args.stories, (3, 8), 15, workers=workers))
        wall, own = time.perf_counter() - start[0], clock() - start[1]
        seconds = own if workers == 1 else wall
        result[f"seconds_{workers}_workers"] = round(seconds, 2)
        result[f"stories_per_s_{workers}_workers"] = round(count / seconds, 1)
        print(f"{workers} worker(s): {count} stories in {seconds:.1f} s ({count / seconds:,.0f}/s)")
    record("bench_world", result)


if __name__ == "__main__":
    main()
