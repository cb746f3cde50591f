"""DVC experiments in a table a terminal holds: one row per experiment and variant, the
params that differ between the rows, then the variant's headline figures
(metrics/headline/<variant>.json, written by the report stage; the other DVC metrics, the
full figures, are left out).

    python flows/experiments.py [--all-params] [--format text|markdown|csv]

`dvc exp show` puts every variant's figures side by side on one row (26 columns headed
`metrics/headline/eric.json:B-1` ...), which no terminal holds; this reads its JSON
(`dvc exp show --json`: the workspace, the commit and its experiments) and turns the
variants into rows. Wider tables continue below, as flows/compare.py prints them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

from compare import render

from eric.evaluate.headline import HEADLINE_NAMES
from eric.config import flatten

ROOT = Path(__file__).resolve().parent.parent


class ExperimentsError(RuntimeError):
    pass


def exp_show(root: Path = ROOT) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "dvc", "exp", "show", "--json"], cwd=root,
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise ExperimentsError(f"dvc exp show failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout or "[]")


def revisions(shown: list[dict]) -> list[tuple[str, dict]]:
    """(name, data) of the workspace, each commit and each of its experiments, in DVC's order."""
    out = []
    for entry in shown:
        if entry.get("data"):
            rev = entry["rev"]
            out.append((entry.get("name") or (rev if rev == "workspace" else rev[:7]), entry["data"]))
        for experiment in entry.get("experiments") or []:
            for rev in experiment.get("revs") or []:
                if rev.get("data"):
                    out.append((rev.get("name") or experiment.get("name") or rev["rev"][:7], rev["data"]))
    return out


def table(shown: list[dict], all_params: bool = False):
    """A DataFrame indexed by (experiment, variant): changed params (all with all_params),
    then the headline figures."""
    import pandas as pd

    rows, params = [], {}
    for name, data in revisions(shown):
        flat = flatten(((data.get("params") or {}).get("params.yaml") or {}).get("data") or {})
        params[name] = {k: str(v) for k, v in flat.items()}
        headline = flat.get("evaluate.headline_dir") or "metrics/headline"
        for path, values in sorted((data.get("metrics") or {}).items()):
            if PurePosixPath(path).parent != PurePosixPath(headline):
                continue
            figures = values.get("data") or {}
            rows.append({"experiment": name, "variant": PurePosixPath(path).stem,
                         **{k: figures.get(k) for k in HEADLINE_NAMES if k in figures}})  # fmt: skip
    if not rows:
        raise ExperimentsError("no headline metrics yet: run `dvc repro` (its report stage writes them)")
    keys = sorted({k for p in params.values() for k in p})
    changed = [k for k in keys if all_params or len({p.get(k) for p in params.values()}) > 1]
    frame = pd.DataFrame([{**{k: params[r["experiment"]].get(k) for k in changed}, **r} for r in rows])
    columns = [*changed, *(k for k in HEADLINE_NAMES if k in frame.columns)]
    return frame.set_index(["experiment", "variant"])[columns]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all-params", action="store_true", help="every param, not only those that differ")
    parser.add_argument("--format", choices=("text", "markdown", "csv"), default="text")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(render(table(exp_show(), args.all_params), args.format))
    except ExperimentsError as exc:
        sys.exit(f"experiments: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
