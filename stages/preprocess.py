"""DVC stage `preprocess`: corpus -> Parquet example sets + stats.json.

    python stages/preprocess.py [params.yaml]
"""

from __future__ import annotations

import sys

from eric.config import ParamsError, load_params
from eric.data.errors import CorpusError
from eric.data.pipeline import run_preprocess


def run(params_path: str = "params.yaml") -> dict:
    stats = run_preprocess(load_params(params_path))
    print(stats.summary())
    return stats.to_dict()


if __name__ == "__main__":
    try:
        run(*sys.argv[1:2])
    except (ParamsError, CorpusError) as exc:
        sys.exit(f"preprocess: {exc}")
