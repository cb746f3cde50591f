"""HINT's stages: hint_targets computes the teacher's cosines once (a fake teacher here) and is a
marker-only no-op for other variants; train_stage_one joins the targets and its batches carry both terms."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from eric.config import DEFAULT_PARAMS
from eric.data.schema import STAGE_ONE
from eric.data.hint_targets import (MARKER, TargetsError, cosine_matrix, join, real_units, targets_table,
                                    teacher_text)
from eric.train.errors import TrainError
from tests.train.test_stages import NAMES, story

VECTORS = {"Entity 0 runs.": [1.0, 0.0], "Entity 1 hides.": [0.0, 2.0], "They meet.": [3.0, 3.0]}


class FakeTeacher:
    """Known vectors for known texts; records what it was asked."""

    def __init__(self):
        self.calls = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return np.array([VECTORS.get(t, [1.0, 1.0]) for t in texts])


def test_cosines_by_hand_and_placeholders_read_as_names():
    rows = [{"id": "a", "units": ["<e0> runs.", "<e1>  hides.", "They meet."]}, {"id": "b", "units": ["They meet."]}]
    teacher = FakeTeacher()
    table = targets_table(rows, teacher).to_pylist()
    assert teacher.calls == [["Entity 0 runs.", "Entity 1 hides.", "They meet.", "They meet."]]  # one call
    s = 1 / math.sqrt(2)
    assert table[0]["id"] == "a" and table[0]["hint_units"] == 3
    assert table[0]["hint_similarity"] == pytest.approx([1, 0, s, 0, 1, s, s, s, 1], abs=1e-6)
    assert table[1]["hint_units"] == 1 and table[1]["hint_similarity"] == pytest.approx([1.0])
    assert cosine_matrix(np.array([[0.0, 0.0], [1.0, 0.0]])).tolist() == [[0.0, 0.0], [0.0, 1.0]]
    assert teacher_text("<e12> met <e3>.") == "Entity 12 met Entity 3."


def test_a_one_stage_teacher_reads_the_units_with_their_real_names():
    mentions = [{"placeholder": "<e0>", "mention": "Ann"}, {"placeholder": "<e1>", "mention": "Bo"},
                {"placeholder": "<e0>", "mention": "she"}, {"placeholder": "<e0>", "mention": "Ann Lee"}]
    units = ["<e0> runs.", "<e1> hides from <e0>.", "They meet <e0>."]
    assert real_units(units, mentions) == ["Ann runs.", "Bo hides from she.", "They meet Ann Lee."]  # text order
    teacher = FakeTeacher()
    table = targets_table([{"id": "a", "units": units, "mentions": mentions}], teacher, real_names=True).to_pylist()
    assert teacher.calls == [["Ann runs.", "Bo hides from she.", "They meet Ann Lee."]]
    assert table[0]["hint_units"] == 3
    with pytest.raises(ValueError, match="number of units"):
        real_units(["<e0> runs."], [{"placeholder": "<e0>", "mention": "Ann\nLee"}])


def test_join_attaches_targets_by_id_and_refuses_gaps(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(targets_table([{"id": "a", "units": ["They meet."]}], FakeTeacher()), path)
    assert join([{"id": "a", "x": 1}], path) == [{"id": "a", "x": 1, "hint_units": 1, "hint_similarity": [1.0]}]
    with pytest.raises(ValueError, match="no targets for 1 rows"):
        join([{"id": "zz"}], path)
    with pytest.raises(FileNotFoundError, match="hint_targets"):
        join([{"id": "a"}], tmp_path / "val.parquet")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Tiny stage-one splits, a tokenizer and params with a hint variant."""
    from eric.data.tokenizer import build_tokenizer

    root = tmp_path_factory.mktemp("hint")
    rng = random.Random(0)
    for split, n in (("train", 8), ("val", 4)):
        rows = [story(i, rng)[0] for i in range(n)]
        (root / "data" / "stage_one").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=STAGE_ONE), root / "data" / "stage_one" / f"{split}.parquet")
        if split == "train":
            texts = [t for r in rows for t in (r["source"], r["target"])]
            build_tokenizer(texts, vocab_size=300, max_entities=100).save_pretrained(root / "tok")
    params = yaml.safe_load(DEFAULT_PARAMS.read_text())
    params["preprocess"]["out_dir"] = str(root / "data")
    params["tokenizer"]["out_dir"] = str(root / "tok")
    params["train"]["targets_dir"] = str(root / "data" / "targets")
    params["model"]["max_target_length"] = 96
    params["model"]["variants"]["hint"] = {"kind": "hint", "options": {"similarity_weight": 0.1}}
    params["train"].update(
        max_steps=2, micro_batch_size=2, log_every=1, checkpoint_every=2, progress=False, mlflow=False,
        eval_every=100, checkpoint_dir=str(root / "ckpt"), out_dir=str(root / "models"),
        metrics_dir=str(root / "metrics"), plots_dir=str(root / "plots"))
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root


def test_targets_stage_is_a_marker_only_no_op_without_a_hint_variant(workspace, monkeypatch):
    import hint_targets

    monkeypatch.setattr(hint_targets, "teacher", lambda: pytest.fail("no teacher for a non-hint variant"))
    out = workspace / "data" / "targets" / "hint" / "bart"
    assert hint_targets.run.fn("bart", str(workspace / "params.yaml")) == {"variant": "bart", "targets": False}
    assert [p.name for p in out.iterdir()] == [MARKER]
    first = (out / MARKER).read_text()
    hint_targets.run.fn("bart", str(workspace / "params.yaml"))  # the same output again
    assert [p.name for p in out.iterdir()] == [MARKER] and (out / MARKER).read_text() == first


def test_marker_is_written_without_prefect_only_when_no_server_is_set(workspace, monkeypatch):
    import hint_targets

    out = workspace / "data" / "targets" / "hint" / "eric"
    params = str(workspace / "params.yaml")
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:1/api")
    assert not hint_targets.marker_without_prefect(["eric", params]) and not out.exists()
    monkeypatch.delenv("PREFECT_API_URL")
    assert not hint_targets.marker_without_prefect(["hint", params])  # a hint variant: the flow
    assert not hint_targets.marker_without_prefect(["no_such_variant", params])  # the flow says why
    assert hint_targets.marker_without_prefect(["eric", params]) and [p.name for p in out.iterdir()] == [MARKER]


def test_targets_stage_then_training_joins_them(workspace, monkeypatch):
    import hint_targets
    import train_stage_one

    params = str(workspace / "params.yaml")
    with pytest.raises(TrainError, match="no hint similarity targets"):
        train_stage_one.prepare.fn(train_stage_one.read_params.fn(params, "hint"), "hint")
    teacher = FakeTeacher()
    monkeypatch.setattr(hint_targets, "teacher", lambda: teacher)
    result = hint_targets.run.fn("hint", params)
    assert result["rows"] == {"train": 8, "val": 4} and len(teacher.calls) == 2
    seen = [t for call in teacher.calls for t in call]  # a one-stage hint variant: real names, as it writes
    assert not any("Entity" in t or "<e" in t for t in seen) and any(n in seen[0] for n in NAMES)
    table = pq.read_table(workspace / "data/targets/hint/hint/train.parquet").to_pylist()
    units = pq.read_table(workspace / "data/stage_one/train.parquet", columns=["units"]).column("units").to_pylist()
    assert [r["hint_units"] for r in table] == [len(u) for u in units]
    assert all(v == pytest.approx(1.0) for v in table[0]["hint_similarity"])  # the fake teacher's [1, 1] everywhere

    job = train_stage_one.prepare.fn(train_stage_one.read_params.fn(params, "hint"), "hint")
    assert all(len(r["hint_similarity"]) == r["hint_units"] ** 2 for r in job.train_set + job.val_set)
    batch = job.collate_fn(job.train_set[:2])  # the training collator, with the class's extras
    assert {"hint_similarity", "hint_shuffled_labels", "hint_shuffled_orders", "hint_orders"} <= set(batch)
    out = job.model(**batch)
    assert out.similarity_loss is not None and out.order_loss is not None
    assert out.loss_terms()["similarity_loss"] > 0


def test_targets_stage_refuses_a_foreign_folder(workspace, monkeypatch):
    import hint_targets

    monkeypatch.setattr(hint_targets, "teacher", FakeTeacher)
    out = workspace / "data" / "targets" / "hint" / "hint"
    out.mkdir(parents=True, exist_ok=True)  # the folder may or may not hold an earlier test's targets
    (out / "notes.txt").write_text("mine")
    with pytest.raises(TargetsError, match="did not write"):
        hint_targets.run.fn("hint", str(workspace / "params.yaml"))
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()
