"""A runner study's way to call a pipeline stage: the real script, one torch thread, a log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def stage(script: str, params_path: Path, log: Path, *args: str) -> None:
    """`python stages/<script> [args] <params_path>` from the project root, output into `log`."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    with log.open("w") as handle:
        code = subprocess.call([sys.executable, f"stages/{script}", *args, str(params_path)], cwd=ROOT, env=env,
                               stdout=handle, stderr=subprocess.STDOUT)
    if code:
        raise RuntimeError(f"{script} failed (exit {code}); see {log}")


def study_params(profile: str | None, overrides: dict, data: Path) -> dict:
    """params.yaml with a profile (flows/profiles/*.yaml) and `overrides` applied, its data
    (preprocess + tokenizer outputs) under `data`, no MLflow run or progress bar per stage."""
    import yaml

    from eric.config import set_dotted

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    found = dict(yaml.safe_load((ROOT / profile).read_text())) if profile else {}
    found.update(overrides)
    found.update({"preprocess.out_dir": str(data / "processed"), "tokenizer.out_dir": str(data / "tokenizer"),
                  "tokenizer.metrics_path": str(data / "tokenizer.json"), "train.mlflow": False,
                  "train.progress": False})
    for key, value in found.items():
        set_dotted(params, key, value)
    return params


def ensure_data(params: dict, data: Path) -> Path:
    """The corpus and tokenizer of `params` under `data`, made once; returns their params file."""
    import yaml

    data.mkdir(parents=True, exist_ok=True)
    path = data / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    if not (data / "processed" / "stage_one" / "test.parquet").is_file():  # the splits are swapped in together
        print(f"preprocessing into {data}", flush=True)
        stage("preprocess.py", path, data / "preprocess.log")
    if not (data / "tokenizer" / "tokenizer_config.json").is_file():
        stage("tokenizer.py", path, data / "tokenizer.log")
    return path
