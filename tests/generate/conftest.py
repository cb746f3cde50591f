"""A tiny project on disk (data splits, tokenizer, stage-one variants, mention model,
params.yaml) for the sampler, CLI and stage tests; stages/ is importable by bare name
as DVC runs it."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from eric.config import PROJECT_ROOT
from eric.data.schema import STAGE_ONE
from tests.generate.tiny import save, synthetic_rows, tiny_mentions, tiny_stage_one, tiny_tokenizer



def write_split(rows: list[dict], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=STAGE_ONE), path)
    return path


@pytest.fixture(scope="session")
def tiny_project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    splits = {"train": synthetic_rows(24, seed=1), "val": synthetic_rows(4, seed=2), "test": synthetic_rows(6, seed=3)}
    for split, rows in splits.items():
        write_split(rows, root / "data" / "stage_one" / f"{split}.parquet")
    tokenizer = tiny_tokenizer(splits["train"])
    for variant in ("eric", "bart"):
        save(tiny_stage_one(tokenizer, variant), tokenizer, root / "models" / "stage_one" / variant)
    save(tiny_mentions(tokenizer), tokenizer, root / "models" / "mentions")
    params = {
        "variants": ["eric", "bart"],
        "model": {"max_entities": 6, "num_states": 16, "state_dim": 8},
        "preprocess": {"out_dir": str(root / "data"), "max_entities": 6},
        "train": {"out_dir": str(root / "models" / "stage_one"), "mlflow": False,
                  "metrics_dir": str(root / "metrics" / "train")},
        "mentions": {"out_dir": str(root / "models" / "mentions")},
        "sample": {"max_length": 24, "mention_max_length": 16, "batch_size": 4,
                   "out_dir": str(root / "outputs" / "samples")},
        "evaluate": {"mauve": False, "analysis_batch_size": 8, "explorer_units_per_state": 3,
                     "metrics_dir": str(root / "metrics" / "evaluate"),
                     "analysis_dir": str(root / "outputs" / "analysis"), "report_dir": str(root / "reports"),
                     "headline_dir": str(root / "metrics" / "headline")},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root


@pytest.fixture(scope="package", autouse=True)
def _tiny_models_on_one_thread():
    """Tiny models run ~10x faster on one thread than on two busy cores (no spin-waits)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
