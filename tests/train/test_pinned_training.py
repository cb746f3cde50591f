"""The training stages' curves, pinned (tests/pins.py): the same losses, codebook figures and
validation losses at every step of a 4-step run, before and after any refactor.

ERIC runs the default recipe with its codebook care exercised (k-means init, dead codes
re-seeded every 2 steps, the entropy penalty, batch-normalised events); DiscoDVT runs its
later phase (the prior); BART and the mention writer run the plain loop.
"""

from __future__ import annotations

import pytest
import yaml

from tests.pins import TRAINING, check_pinned, one_thread
from tests.train.test_stages import read_csv, workspace  # noqa: F401  (the fixture)

UNTIMED = ("tokens_per_s", "_seconds")  # wall-clock columns (and their phase-prefixed copies) vary


@pytest.fixture(scope="module")
def pinned_params(workspace):  # noqa: F811
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    params["model"]["state_space"]["dead_code_steps"] = 2  # the re-seeding happens within the run
    params["model"]["variants"]["discodvt"]["options"]["prior_steps"] = 2
    root = workspace / "pinned"
    params["train"].update(checkpoint_dir=str(root / "ckpt"), out_dir=str(root / "models"), mlflow=False,
                           metrics_dir=str(root / "metrics"), plots_dir=str(root / "plots"))
    params["mentions"]["out_dir"] = str(root / "mentions")
    path = workspace / "pinned.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def curves(plots: str, name: str) -> dict:
    from pathlib import Path

    folder = Path(plots)
    as_numbers = lambda rows: [{k: float(v) for k, v in r.items() if not k.endswith(UNTIMED) and v != ""}  # noqa: E731
                               for r in rows]
    return {"train": as_numbers(read_csv(folder / f"{name}.csv")),
            "val": as_numbers(read_csv(folder / f"{name}_val.csv"))}


@pytest.mark.parametrize("variant", ["eric", "bart", "discodvt"])
def test_stage_one_training_curves_are_pinned(pinned_params, variant):
    import train_stage_one

    with one_thread():
        metrics = train_stage_one.run.fn(variant, str(pinned_params))
    plots = yaml.safe_load(pinned_params.read_text())["train"]["plots_dir"]
    check_pinned(f"training/{variant}", {"steps": metrics["steps"], "states_used": metrics["states_used"],
                                         **curves(plots, variant)}, TRAINING)


def test_mention_writer_training_curve_is_pinned(pinned_params):
    import train_mentions

    with one_thread():
        metrics = train_mentions.run.fn(str(pinned_params))
    plots = yaml.safe_load(pinned_params.read_text())["train"]["plots_dir"]
    check_pinned("training/mentions", {"steps": metrics["steps"], **curves(plots, "mentions")}, TRAINING)
