"""The ablation table from MLflow: one row per variant, the paper's Table 2 side by side.

    python flows/compare.py [--experiment NAME] [--run PIPELINE_RUN_ID] [--history]
                            [--all] [--format text|markdown|csv]

Reads MLFLOW_TRACKING_URI (else the project's mlflow.db); the experiment defaults
to params.yaml's corpus name. Rows: the variants of the latest pipeline execution
(--run: of that one; --history: every variant run of the experiment, with its
start). Columns: Table 2 (B-1 ... Len) and the analyses (mention control, states
used, coherence with the model's and with random states, merge fallbacks; shares in
percent, as the report), then the final validation LM loss (comparable across models)
and total loss (each model's own terms); --all: every metric and the variant's params. The text
table fits the terminal (wider tables continue below, the variant column
repeated); markdown and csv print every column on one row.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import shutil
import sys
from pathlib import Path

from eric.tracking import tracking_uri

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = "tags.`eric.role` = 'pipeline'"
VARIANT = "tags.`eric.role` = 'variant'"
TABLE2 = ("B-1", "B-2", "MSJ-1", "MSJ-2", "MAUVE", "Rpt-16", "Rpt-32", "Rpt-64", "D-3", "D-4", "Zipf", "Len")
# metric of a variant run -> column heading (eric/review.py names them)
COLUMNS = {
    **{f"evaluate.{name}": name for name in TABLE2},
    "evaluate.mention_control": "Mention ctl",
    "evaluate.states_used": "States used",
    "evaluate.coherence.model.accuracy": "Coherence",
    "evaluate.coherence.random_states.accuracy": "Coh. (rand)",
    "evaluate.fallback.reused_last_share": "Reused mention",
    "evaluate.fallback.random_name_share": "Random name",
    "train.final_val_lm_loss": "Val LM loss",  # like with like: every model has an LM loss
    "train.final_val_loss": "Val total loss",  # ERIC's adds L_E and L_CL; a baseline's its own terms
}
# shares stored as fractions, shown in percent as the report shows them
PERCENT = ("evaluate.mention_control", "evaluate.coherence.model.accuracy", "evaluate.coherence.random_states.accuracy",
           "evaluate.fallback.reused_last_share", "evaluate.fallback.random_name_share")
MISSING = "–"


class CompareError(RuntimeError):
    pass


def variant_table(uri: str, experiment: str, parent: str | None = None, every: bool = False, with_params=False):
    """A DataFrame: index = variant (and run start), columns = metrics (and params.*)."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise CompareError(f"no MLflow experiment {experiment!r} at {uri}")
    query = VARIANT
    if not every:
        parent = parent or _latest_pipeline(client, found.experiment_id)
        query += f" and tags.`mlflow.parentRunId` = '{parent}'"
        print(_execution_line(client, experiment, parent, uri), file=sys.stderr)
    runs = client.search_runs([found.experiment_id], query, order_by=["attributes.start_time DESC"], max_results=1000)
    if not runs:
        raise CompareError(f"no variant runs in {experiment!r}" + ("" if every else f" under pipeline run {parent}"))
    return _frame(runs, with_start=every, with_params=with_params)


def _execution_line(client, experiment: str, parent: str, uri: str) -> str:
    """Which execution the table shows, and from which store (the services' server or the
    project's mlflow.db: `infra/services.sh env` switches): its run name, id, start and
    profile (stderr, so the table itself stays machine-readable)."""
    import datetime as dt

    run = client.get_run(parent)
    started = dt.datetime.fromtimestamp(run.info.start_time / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    profile = run.data.tags.get("eric.profile", "none")
    return (f"{experiment} at {uri}: pipeline run {run.info.run_name!r} ({parent}), started {started}, "
            f"profile {profile}; --run ID for another, --history for all")


def _latest_pipeline(client, experiment_id: str) -> str:
    runs = client.search_runs([experiment_id], PIPELINE, order_by=["attributes.start_time DESC"], max_results=1)
    if not runs:
        raise CompareError("no pipeline run yet: run `dvc repro` (its review stage records one), the pipeline flow "
                           "or a deployment first")
    return runs[0].info.run_id


def _frame(runs, with_start: bool, with_params: bool = False):
    import pandas as pd

    rows = []
    for run in runs:
        row = {"variant": run.data.tags.get("eric.variant", run.info.run_name)}
        if with_start:
            row["started"] = pd.to_datetime(run.info.start_time, unit="ms").strftime("%Y-%m-%d %H:%M")
        params = {f"params.{k}": v for k, v in run.data.params.items() if k != "variant"} if with_params else {}
        rows.append({**row, **run.data.metrics, **params})
    index = ["variant", "started"] if with_start else ["variant"]
    return pd.DataFrame(rows).set_index(index).sort_index().sort_index(axis=1)


def select(table, everything: bool):
    """The Table-2 and analysis columns, renamed (every column with `everything`)."""
    if everything:
        return table
    present = [c for c in COLUMNS if c in table.columns]
    if not present:
        raise CompareError("these variant runs have no Table-2 metrics (a failed execution?): try --all")
    shown = table[present].copy()
    for column in (c for c in PERCENT if c in present):
        shown[column] = 100 * shown[column]
    return shown.rename(columns=COLUMNS)


def cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def rows_of(table) -> tuple[list[str], list[list[str]]]:
    flat = table.reset_index()
    return [str(c) for c in flat.columns], [[cell(v) for v in row] for row in flat.itertuples(index=False)]


def as_text(table, width: int) -> str:
    """Aligned columns within `width`; more columns continue in blocks below."""
    header, rows = rows_of(table)
    keys = len(table.index.names)
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]
    blocks, current, used = [], [], sum(widths[:keys]) + 2 * keys
    for i in range(keys, len(header)):
        if current and used + widths[i] + 2 > width:
            blocks.append(current)
            current, used = [], sum(widths[:keys]) + 2 * keys
        current.append(i)
        used += widths[i] + 2
    blocks.append(current)
    out = []
    for block in blocks:
        cols = [*range(keys), *block]
        line = lambda cells: "  ".join(  # noqa: E731
            cells[i].ljust(widths[i]) if i < keys else cells[i].rjust(widths[i]) for i in cols
        ).rstrip()
        out += [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows), ""]
    return "\n".join(out).rstrip() + "\n"


def as_markdown(table) -> str:
    header, rows = rows_of(table)
    keys = len(table.index.names)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i < keys else "---:" for i in range(len(header))) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def as_csv(table) -> str:
    header, _ = rows_of(table)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in table.reset_index().itertuples(index=False):
        writer.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in row])
    return buffer.getvalue()


def render(table, fmt: str = "text", width: int | None = None) -> str:
    if fmt == "markdown":
        return as_markdown(table)
    if fmt == "csv":
        return as_csv(table)
    return as_text(table, width or shutil.get_terminal_size((120, 24)).columns)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", help="default: params.yaml's corpus.name")
    parser.add_argument("--run", help="a pipeline run id (default: the latest)")
    parser.add_argument("--history", action="store_true", help="every variant run of the experiment, not one execution's")
    parser.add_argument("--all", action="store_true", help="every metric and param, not just Table 2 and the analyses")
    parser.add_argument("--format", choices=("text", "markdown", "csv"), default="text")
    args = parser.parse_args(argv)
    uri = tracking_uri(ROOT)
    try:
        experiment = args.experiment or _corpus_name()
        table = select(variant_table(uri, experiment, args.run, args.history, with_params=args.all), args.all)
    except CompareError as exc:
        sys.exit(f"compare: {exc}")
    sys.stdout.write(render(table, args.format))


def _corpus_name() -> str:
    import yaml

    path = ROOT / "params.yaml"
    if not path.is_file():
        raise CompareError(f"{path} not found: pass --experiment")
    return str(((yaml.safe_load(path.read_text()) or {}).get("corpus") or {}).get("name") or "eric")


if __name__ == "__main__":
    main(sys.argv[1:])
