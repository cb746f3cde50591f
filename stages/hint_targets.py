"""DVC stage `hint_targets@<variant>`: HINT's sentence-similarity targets, computed once.

    python stages/hint_targets.py <variant> [params.yaml]

For a `kind: hint` variant: the cosine between all-MiniLM-L6-v2 embeddings of every pair
of target units of every train/val stage-one row (HINT's SentenceBERT targets; the units
with their real names for a one-stage variant, as it writes them), written to
<train.targets_dir>/hint/<variant>/{train,val}.parquet (outside preprocess's out-dir, which only preprocess writes) keyed by row id
(eric/data/hint_targets.py); train_stage_one@<variant> joins them to its rows. For any
other variant: a marker file only, unchanged when hint variants come and go (so adding a
hint variant retrains nothing else).

A Prefect flow (`stage-hint_targets`), except that a non-hint variant's marker is written
before Prefect is even imported when no Prefect server is set (PREFECT_API_URL unset): a
plain `dvc repro` would otherwise start an ephemeral server (15-110 s on this machine) to
write one file; this way it takes about 2 s. Under the pipeline flow (a server) it is a flow
run like every stage.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # this checkout's `eric`, as _flow.py arranges for the other stages
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eric.config import Params, ParamsError, load_variant_params, resolve_path  # noqa: E402
from eric.data.hint_targets import TargetsError, write_marker, write_targets  # noqa: E402

TEACHER_BATCH = 64


def out_dir(params: Params, variant: str) -> Path:
    return resolve_path(params.train.targets_dir) / "hint" / variant


def marker_only(params: Params, variant: str) -> bool:
    """Write the marker of a non-hint variant (True), or leave a hint variant alone (False)."""
    if params.model.variants[variant].kind == "hint":
        return False
    write_marker(out_dir(params, variant), variant)
    return True


def marker_without_prefect(argv: list[str]) -> bool:
    """The fast path: a non-hint variant and no Prefect server set."""
    if os.environ.get("PREFECT_API_URL") or not 1 <= len(argv) <= 2:
        return False
    try:
        params = load_variant_params(argv[1] if len(argv) > 1 else "params.yaml", argv[0])
    except ParamsError:
        return False  # the flow run reports it in one line
    return marker_only(params, argv[0])


if __name__ == "__main__" and marker_without_prefect(sys.argv[1:]):
    sys.exit(0)

from _flow import run_stage, stage_flow, stage_task  # noqa: E402


def teacher():
    """The similarity teacher (SentenceBERT's stand-in); tests replace it."""
    from eric.evaluate.mauve_score import MiniLMFeaturizer

    return MiniLMFeaturizer(batch_size=TEACHER_BATCH)


@stage_task
def read_params(params_path: str, variant: str) -> Params:
    return load_variant_params(params_path, variant)


@stage_task
def build(params: Params, variant: str) -> dict:
    if marker_only(params, variant):
        return {"variant": variant, "targets": False}
    target_dir = out_dir(params, variant)
    start = time.perf_counter()
    try:
        rows = write_targets(resolve_path(params.preprocess.out_dir), target_dir, teacher(),
                             real_names=not params.model.variants[variant].two_stage)
    except (OSError, ValueError) as exc:
        raise TargetsError(str(exc)) from None
    seconds = round(time.perf_counter() - start, 1)
    print(f"hint_targets: {variant}: similarity targets for {rows} rows in {seconds} s -> {target_dir}")
    return {"variant": variant, "targets": True, "rows": rows, "seconds": seconds}


@stage_flow("hint_targets")
def run(variant: str, params_path: str = "params.yaml") -> dict:
    return build(read_params(params_path, variant), variant)


if __name__ == "__main__":
    from eric.evaluate.errors import EvaluationError

    run_stage(run, ParamsError, TargetsError, EvaluationError)
