"""DiscoDVT's two phases in one train_stage_one run: the prior's phase trains only the prior,
the outputs record both, and a run stopped in the prior's phase resumes to the same model."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from safetensors.torch import load_file

from eric.train import phases
from tests.train.test_stages import read_csv, workspace  # noqa: F401  (the module fixture)

OPTIONS = {"num_codes": 16, "downsample_layers": 2, "prior_layers": 1, "prior_steps": 4}


def params_for(root, name: str) -> str:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["model"]["variants"]["discodvt"] = {"kind": "discodvt", "options": OPTIONS}
    for key in ("checkpoint_dir", "out_dir", "metrics_dir", "plots_dir"):
        params["train"][key] = str(root / name / key)
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(params))
    return str(path)


def weights(root, name: str) -> dict[str, torch.Tensor]:
    return load_file(root / name / "out_dir" / "discodvt" / "model.safetensors")


class Stop(Exception):
    pass


def test_prior_phase_trains_only_the_prior_and_resumes_after_a_stop(workspace, monkeypatch):  # noqa: F811
    import train_stage_one

    metrics = train_stage_one.run.fn("discodvt", params_for(workspace, "whole"))
    assert metrics["steps"] == 4 and metrics["prior_steps"] == 4 and metrics["states_used"] >= 1
    assert metrics["prior_final_val_loss"] < metrics["prior_initial_val_loss"]
    assert metrics["final_val_lm_loss"] is not None  # the main phase's, not the prior's last row
    curve = read_csv(workspace / "whole" / "plots_dir" / "discodvt.csv")
    assert [r["step"] for r in curve] == [str(s) for s in range(1, 9)]
    assert {"entropy_loss", "discourse_loss", "prior_loss"} <= set(curve[0]) | set(curve[-1])  # gumbel: no VQ terms
    assert not (workspace / "whole" / "checkpoint_dir" / "train_stage_one" / "discodvt").exists()

    # stop the prior's phase after its checkpoint at step 2, then rerun
    stop_at = {"step": 2}

    class StoppingTrainer(phases.Trainer):
        def _after_step(self):
            super()._after_step()
            if self.state.step == stop_at["step"]:
                raise Stop()

    with monkeypatch.context() as m:
        m.setattr(phases, "Trainer", StoppingTrainer)
        with pytest.raises(Stop):
            train_stage_one.run.fn("discodvt", params_for(workspace, "stopped"))
    ckpt = workspace / "stopped" / "checkpoint_dir" / "train_stage_one" / "discodvt"
    assert (ckpt / "latest").read_text() == "step00000004" and (ckpt / "phase-prior" / "latest").is_file()
    resumed = train_stage_one.run.fn("discodvt", params_for(workspace, "stopped"))
    assert resumed["prior_steps"] == 4 and resumed["prior_final_val_loss"] == pytest.approx(
        metrics["prior_final_val_loss"], abs=1e-4)

    whole, stopped = weights(workspace, "whole"), weights(workspace, "stopped")
    assert whole.keys() == stopped.keys()
    for name in whole:
        assert torch.allclose(whole[name], stopped[name], atol=1e-5), name
    saved = json.loads((workspace / "whole" / "metrics_dir" / "discodvt.json").read_text())
    assert saved["prior_steps"] == 4 and saved["steps"] == 4
