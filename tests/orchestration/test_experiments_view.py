"""flows/experiments.py: DVC experiments as rows per experiment and variant."""

from __future__ import annotations

import pandas as pd
import pytest
from experiments import ExperimentsError, revisions, table


def _data(lr, eric_b1, bart_b1):
    return {"params": {"params.yaml": {"data": {"seed": 42, "train": {"lr": lr, "max_steps": 200}}}},
            "metrics": {"metrics/headline/eric.json": {"data": {"B-1": eric_b1, "States": 436, "LM-loss": 6.0}},
                        "metrics/headline/bart.json": {"data": {"B-1": bart_b1, "LM-loss": 5.8}},
                        # the full figures are DVC metrics too (for the run cache): not rows
                        "metrics/evaluate/eric.json": {"data": {"B-1": eric_b1, "coherence": {}}},
                        "data/processed/stats.json": {"data": {"stories_in": 40}}}}


SHOWN = [
    {"rev": "workspace", "name": None, "data": _data(0.001, 19.0, 17.0), "experiments": None},
    {"rev": "4d43ea1ea4d0", "name": "main", "data": _data(0.0005, 18.7, 17.8),
     "experiments": [{"name": "kaput-odor", "revs": [{"rev": "28c3408", "name": "kaput-odor", "data": _data(0.001, 19.0, 17.0)}]}]},
]


def test_revisions_name_the_workspace_the_commit_and_its_experiments():
    assert [name for name, _ in revisions(SHOWN)] == ["workspace", "main", "kaput-odor"]


def test_one_row_per_experiment_and_variant_with_the_changed_params_then_the_headline():
    shown = table(SHOWN)
    assert list(shown.index) == [(e, v) for e in ("workspace", "main", "kaput-odor") for v in ("bart", "eric")]
    assert list(shown.columns) == ["train.lr", "B-1", "States", "LM-loss"]  # seed and max_steps did not change
    assert shown.loc[("main", "eric"), "B-1"] == 18.7 and shown.loc[("main", "eric"), "train.lr"] == "0.0005"
    assert pd.isna(shown.loc[("main", "bart"), "States"])  # BART has no states: empty, not zero
    assert "train.max_steps" in table(SHOWN, all_params=True).columns


def test_no_headline_metrics_is_one_line():
    with pytest.raises(ExperimentsError, match="no headline metrics yet: run `dvc repro`"):
        table([{"rev": "workspace", "data": {"params": {}, "metrics": {}}}])
