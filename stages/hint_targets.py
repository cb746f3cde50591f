"""DVC stage `hint_targets@<variant>`: HINT's sentence-similarity targets, computed once.

    python stages/hint_targets.py <variant> [params.yaml]

For a `kind: hint` variant: the cosine between all-MiniLM-L6-v2 embeddings of every pair
of target units of every train/val stage-one row (HINT's SentenceBERT targets), written to
<preprocess.out_dir>/targets/hint/<variant>/{train,val}.parquet keyed by row id
(eric/model/hint_targets.py); train_stage_one@<variant> joins them to its rows. For any
other variant: a marker file only, near-instant and unchanged when hint variants come and
go (so adding a hint variant retrains nothing else). A Prefect flow (`stage-hint_targets`).
"""

from __future__ import annotations

import time

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, load_variant_params, resolve_path
from eric.model.hint_targets import TargetsError, write_marker, write_targets

TEACHER_BATCH = 64


def teacher():
    """The similarity teacher (SentenceBERT's stand-in); tests replace it."""
    from eric.evaluate.mauve_score import MiniLMFeaturizer

    return MiniLMFeaturizer(batch_size=TEACHER_BATCH)


@stage_task
def read_params(params_path: str, variant: str) -> Params:
    return load_variant_params(params_path, variant)


@stage_task
def build(params: Params, variant: str) -> dict:
    processed = resolve_path(params.preprocess.out_dir)
    out_dir = processed / "targets" / "hint" / variant
    if params.model.variants[variant].kind != "hint":
        write_marker(out_dir, variant)
        return {"variant": variant, "targets": False}
    start = time.perf_counter()
    try:
        rows = write_targets(processed, out_dir, teacher())
    except (OSError, ValueError) as exc:
        raise TargetsError(str(exc)) from None
    seconds = round(time.perf_counter() - start, 1)
    print(f"hint_targets: {variant}: similarity targets for {rows} rows in {seconds} s -> {out_dir}")
    return {"variant": variant, "targets": True, "rows": rows, "seconds": seconds}


@stage_flow("hint_targets")
def run(variant: str, params_path: str = "params.yaml") -> dict:
    return build(read_params(params_path, variant), variant)


if __name__ == "__main__":
    from eric.evaluate.errors import EvaluationError

    run_stage(run, ParamsError, TargetsError, EvaluationError)
