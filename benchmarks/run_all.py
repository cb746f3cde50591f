"""Run the CPU benchmarks whose figures docs/benchmarks.md shows (each writes its own JSON
under benchmarks/outputs/ through benchmarks/record.py), one after another.

    python benchmarks/run_all.py [--only bench_clean ...] [--missing]

--missing runs only those without a benchmarks/outputs/<name>.json.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from record import OUTPUTS, PROJECT_ROOT as ROOT

BENCHMARKS = {  # name -> arguments (the settings the docs describe); CPU clocks where a shared host allows
    "bench_clean": [],
    "bench_evaluate": ["--no-mauve"],
    "bench_preprocess": ["--stories", "300"],
    "bench_edu": ["--stories", "200"],
    "bench_model": ["--threads", "1", "--clock", "process"],
    "bench_sample": ["--clock", "process"],
    "bench_train": ["--threads", "1", "--clock", "process"],
    "bench_flow_startup": ["--no-server"],
    "bench_world": ["--stories", "12000"],
    "bench_ops": ["--compiled"],
    "bench_compile": [],
    "bench_flops": [],  # needs data/processed and models/tokenizer (a `dvc repro`)
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS))
    parser.add_argument("--missing", action="store_true")
    args = parser.parse_args(argv)
    names = args.only or list(BENCHMARKS)
    if args.missing:
        names = [n for n in names if not (OUTPUTS / f"{n}.json").is_file()]
    for name in names:
        command = [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *BENCHMARKS[name]]
        print("$", " ".join(command[1:]), flush=True)
        if subprocess.run(command, cwd=ROOT, check=False).returncode != 0:
            print(f"{name} failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
