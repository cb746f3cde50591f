"""DVC stage `preprocess`: corpus -> Parquet example sets + stats.json.

    python stages/preprocess.py [params.yaml]

A Prefect flow (`stage-preprocess`, see stages/_flow.py) of three tasks.
"""

from __future__ import annotations

from pathlib import Path

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, load_params
from eric.data.errors import CorpusError, OutputError
from eric.data.pipeline import run_preprocess
from eric.data.stats import PreprocessStats
from eric.world.corpus import write_world_corpus


@stage_task
def read_params(params_path: str) -> Params:
    return load_params(params_path)


@stage_task
def build_examples(cfg: Params, params_path: str) -> PreprocessStats:
    """Read, segment, anonymize, split; write the Parquet sets and stats.json."""
    return run_preprocess(cfg, protect={"the params file": Path(params_path)}, world=write_world_corpus)


@stage_task
def summarize(stats: PreprocessStats) -> dict:
    print(stats.summary())
    return stats.to_dict()


@stage_flow("preprocess")
def run(params_path: str = "params.yaml") -> dict:
    return summarize(build_examples(read_params(params_path), params_path))


if __name__ == "__main__":
    run_stage(run, ParamsError, CorpusError, OutputError)
