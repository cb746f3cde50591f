"""Faults in training: unusable splits, a batch too small for batch statistics, and a
checkpoint damaged on disk after it was written."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from eric.train.checkpoint import CheckpointManager, verify
from eric.train.errors import TrainError
from eric.train.job import check_split
from eric.train.runtime import Rank


def _split(path, targets):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": [str(i) for i in range(len(targets))], "target": pa.array(targets, pa.string())}), path)
    return path


@pytest.mark.parametrize("targets,message", [
    ([], r"the val split holds no examples \(too few stories for preprocess.split_ratio\? .*stats.json counts them"),
    (["<sent> a", None, None], r"2 of 3 examples have no target; run preprocess again"),
])  # fmt: skip
def test_an_unusable_split_is_one_line(tmp_path, targets, message):
    with pytest.raises(TrainError, match=message) as info:
        check_split(_split(tmp_path / "stage_one" / "val.parquet", targets))
    assert "\n" not in str(info.value)
    with pytest.raises(TrainError, match="no such dataset"):
        check_split(tmp_path / "stage_one" / "missing.parquet")
    assert check_split(_split(tmp_path / "ok.parquet", ["<sent> a", "<sent> b"])) == 2


def test_a_one_story_corpus_fails_before_any_model_is_built(tmp_path, monkeypatch):
    """One story gives an empty validation split: the stage says so before building a model."""
    import train_stage_one

    from eric.config import load_params
    from eric.model import variants

    _split(tmp_path / "data" / "stage_one" / "train.parquet", ["<sent> a"])
    _split(tmp_path / "data" / "stage_one" / "val.parquet", [])
    monkeypatch.setattr(variants, "build_model", lambda *a, **k: pytest.fail("a model was built"))
    params = load_params(None, {"preprocess.out_dir": str(tmp_path / "data")})
    with pytest.raises(TrainError, match=r"val.parquet: the val split holds no examples"):
        train_stage_one.prepare.fn(params, "eric")


def test_a_training_batch_with_one_event_is_normalized_with_running_statistics():
    from tests.model.conftest import make_batch, tiny_model

    model = tiny_model(event_norm="batch").train()
    batch = make_batch(rows=1, units=(2,))
    keep_first = batch["entity_ids"].clone()
    keep_first[keep_first > 0] = 0
    keep_first[0, 0] = batch["entity_ids"][0, 0] if batch["entity_ids"][0, 0] > 0 else 1
    batch["entity_ids"] = keep_first  # a single planned entity: one event in the whole batch
    out = model(**batch)
    assert int((out.state_ids >= 0).sum()) == 1 and torch.isfinite(out.loss)


def test_a_damaged_latest_checkpoint_is_skipped_for_the_newest_intact_one(tmp_path, capsys):
    from tests.train.tiny import train_tiny

    out = tmp_path / "run"
    train_tiny(out, steps=6, checkpoint_every=3)
    root = out / "ckpt"
    assert (root / "latest").read_text() == "step00000006" and verify(root / "step00000006") is None
    manifest = json.loads((root / "step00000006" / "manifest.json").read_text())
    largest = max(manifest, key=lambda rel: manifest[rel]["size"])
    damaged = root / "step00000006" / largest
    damaged.write_bytes(damaged.read_bytes()[: manifest[largest]["size"] // 2])  # truncated on disk

    manager = CheckpointManager(root, Rank(0, 1, 0), fingerprint="tiny")
    assert manager.latest_tag() == "step00000003"
    err = capsys.readouterr().err
    assert f"has {manifest[largest]['size'] // 2} bytes, {manifest[largest]['size']} were written" in err
    assert f"checkpoint {root / 'step00000006'} is damaged; resuming from {root / 'step00000003'}" in err
    resumed = train_tiny(out, steps=6, checkpoint_every=3)  # a rerun resumes from step 3, not 6
    assert resumed["resumed_from"] == [3] and resumed["steps"] == 6


def _full_disk(*args, **kwargs):
    raise OSError(28, "No space left on device")


def test_a_full_disk_during_a_checkpoint_or_the_final_save_is_one_line_and_keeps_the_earlier(tmp_path, monkeypatch):
    """Each was an OSError traceback (the earlier model was kept even then)."""
    from eric.generate.loading import load_stage_one
    from eric.train.checkpoint import save_pretrained_atomic
    from tests.generate.conftest import synthetic_rows, tiny_stage_one, tiny_tokenizer

    tokenizer = tiny_tokenizer(synthetic_rows(8, seed=2))
    model = tiny_stage_one(tokenizer, "eric")
    out = save_pretrained_atomic(model, tmp_path / "eric", Rank(0, 1, 0), tokenizer)
    before = sorted(p.name for p in out.iterdir())
    monkeypatch.setattr(type(model), "save_pretrained", _full_disk)
    with pytest.raises(TrainError, match=r"cannot write the model to .*eric \(No space left on device\); an earlier "
                                         r"model there is unchanged, the partial files removed") as info:
        save_pretrained_atomic(model, out, Rank(0, 1, 0), tokenizer)
    assert "\n" not in str(info.value) and sorted(p.name for p in out.iterdir()) == before
    assert not (tmp_path / "eric.partial").exists() and load_stage_one(out)[0] is not None

    class FullEngine:
        save_checkpoint = staticmethod(_full_disk)

    manager = CheckpointManager(tmp_path / "ckpt", Rank(0, 1, 0))
    with pytest.raises(TrainError, match=r"cannot write the checkpoint \(No space left on device\); the previous "
                                         r"checkpoint is kept"):
        manager.save(FullEngine(), 5, {"step": 5})
    assert not (tmp_path / "ckpt" / ".partial").exists()


def test_a_damaged_checkpoint_is_named_once_and_the_restart_from_step_0_is_said(tmp_path, capsys):
    """It was named three times (every question re-hashed it) and training restarted silently."""
    root = tmp_path / "ckpt"
    (root / "step00000005").mkdir(parents=True)  # no trainer state, no manifest: damaged
    (root / "latest").write_text("step00000005")
    for _ in range(2):  # the job's manager, then the trainer's
        manager = CheckpointManager(root, Rank(0, 1, 0))
        manager.prepare()
        assert manager.load(engine=None) is None and manager.latest_tag() is None
    err = capsys.readouterr().err
    assert err.count(f"checkpoint {root / 'step00000005'}: incomplete (no trainer state or manifest)") == 1
    assert err.count(f"no intact checkpoint under {root}: training starts from step 0") == 1


def test_a_second_training_run_into_the_same_model_folder_refuses_in_one_line(tmp_path, monkeypatch):
    """Its checkpoints and outputs would be shared: the model folder's lock is held for the whole run."""
    from types import SimpleNamespace

    from eric.data.outdir import output_lock
    from eric.train import job as job_module

    monkeypatch.setattr(job_module, "_run_job", lambda *a: pytest.fail("trained while another run held the model"))
    with output_lock(tmp_path / "models" / "eric"):
        with pytest.raises(TrainError, match=r"eric: another run is writing it now") as info:
            job_module.run_job(SimpleNamespace(model_dir=tmp_path / "models" / "eric"))
    assert "\n" not in str(info.value)
    monkeypatch.setattr(job_module, "_run_job", lambda job, rank: {"ran": True})
    assert job_module.run_job(SimpleNamespace(model_dir=tmp_path / "models" / "eric")) == {"ran": True}
    assert not list((tmp_path / "models").glob(".*.lock"))  # the lock goes with the run


def test_a_full_disk_while_writing_training_metrics_is_one_line_and_keeps_the_earlier_files(tmp_path, monkeypatch):
    from pathlib import Path
    from types import SimpleNamespace

    from eric.train.job import write_outputs

    job = SimpleNamespace(metrics_path=tmp_path / "m.json", plots_path=tmp_path / "p.csv")
    result = SimpleNamespace(history=[{"step": 1, "loss": 2.0}], val_history=[{"step": 1, "val_loss": 3.0}])
    write_outputs(job, result, {"steps": 1})
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert (tmp_path / "p.csv").read_bytes() == b"step,loss\r\n1,2.0\r\n" and json.loads(before["m.json"]) == {"steps": 1}
    monkeypatch.setattr(Path, "write_bytes", _full_disk)
    with pytest.raises(TrainError, match=r"m.json: cannot write \(No space left on device\); an earlier file") as info:
        write_outputs(job, result, {"steps": 2})
    assert "\n" not in str(info.value)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before  # unchanged, no partial file left
