"""`corpus.kind: world` through the preprocess entry point: the Parquet contract plus ground truth."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from eric.config import ParamsError, load_params
from eric.data.pipeline import run_preprocess
from eric.world.corpus import write_world_corpus
from eric.data.schema import SPLITS, STAGE_ONE, STAGE_TWO
from eric.evaluate.io import deanonymize
from eric.world.checker import check_story
from eric.world.corpus import WORLD_STAGE_ONE


@pytest.fixture(scope="module")
def processed(tmp_path_factory):
    out = tmp_path_factory.mktemp("world") / "processed"
    cfg = load_params(overrides={"corpus.kind": "world", "corpus.name": "entityworld", "corpus.world.stories": 60,
                                 "corpus.world.seed": 3, "preprocess.out_dir": str(out)})
    stats = run_preprocess(cfg, progress=False, world=write_world_corpus)
    return out, stats


def test_the_stage_one_and_stage_two_sets_keep_the_preprocess_contract(processed):
    out, stats = processed
    rows = []
    for split in SPLITS:
        one = pq.read_table(out / "stage_one" / f"{split}.parquet")
        two = pq.read_table(out / "stage_two" / f"{split}.parquet")
        assert one.schema.equals(WORLD_STAGE_ONE) and two.schema.equals(STAGE_TWO)
        assert STAGE_ONE.names == one.schema.names[: len(STAGE_ONE.names)]
        assert one.num_rows == two.num_rows
        rows += one.to_pylist()
    assert len(rows) == 60 == stats.examples
    assert json.loads((out / "stats.json").read_text())["world"] == {"seed": 3, "stories": 60, "cast": [3, 8]}


def test_rows_carry_consistent_placeholders_mentions_and_ground_truth(processed):
    out, _ = processed
    for row in pq.read_table(out / "stage_one" / "train.parquet").to_pylist():
        units = row["units"]
        assert row["target"] == " ".join(f"<sent> {u}" for u in units)
        assert all(len(x) == len(units) for x in (row["unit_entities"], row["world_events"], row["world_focal"],
                                                 row["world_states"]))
        for unit, entities, focal in zip(units, row["unit_entities"], row["world_focal"]):
            assert focal in entities and all(e in unit for e in entities)
        for m in row["mentions"]:  # the mention is the cast member's full or first name
            name = row["world_cast"][int(m["placeholder"][2:-1])]
            assert m["mention"] in (name, name.split()[0])
        assert check_story(row["source"], units).violations == 0
        assert "<e" not in deanonymize(row["target"], row["mentions"])
        last = row["world_states"][-1]
        assert len(last) == len(row["world_cast"]) and {s["condition"] for s in last} <= {
            "well", "wounded", "captive", "dead"}


def test_the_same_params_write_the_same_files(processed, tmp_path):
    out, _ = processed
    cfg = load_params(overrides={"corpus.kind": "world", "corpus.world.stories": 60, "corpus.world.seed": 3,
                                 "preprocess.out_dir": str(tmp_path / "again")})
    run_preprocess(cfg, progress=False, world=write_world_corpus)
    for split in SPLITS:
        assert pq.read_table(tmp_path / "again" / "stage_one" / f"{split}.parquet").equals(
            pq.read_table(out / "stage_one" / f"{split}.parquet"))


@pytest.mark.parametrize("key,value,match", [("corpus.world.cast", [1, 4], "cast"),
                                             ("corpus.world.cast", [6, 4], "cast"),
                                             ("corpus.world.stories", 0, "stories"),
                                             ("corpus.world.size", 3, "size")])
def test_bad_world_params_fail_at_load_time_in_one_line(key, value, match):
    with pytest.raises(ParamsError, match=match) as err:
        load_params(overrides={"corpus.kind": "world", key: value})
    assert "\n" not in str(err.value)


def test_an_out_dir_with_foreign_files_is_refused_as_for_any_corpus(tmp_path):
    from eric.data.errors import OutputError

    (tmp_path / "notes.txt").write_text("mine")
    cfg = load_params(overrides={"corpus.kind": "world", "corpus.world.stories": 5, "preprocess.out_dir": str(tmp_path)})
    with pytest.raises(OutputError, match="notes.txt"):
        run_preprocess(cfg, progress=False, world=write_world_corpus)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_stats_count_every_generated_mention_as_replaced(processed):
    out, _ = processed
    stats = json.loads((out / "stats.json").read_text())
    mentions = sum(len(r["mentions"]) for s in SPLITS for r in pq.read_table(out / "stage_one" / f"{s}.parquet").to_pylist())
    assert sum(stats[s]["mentions"] for s in SPLITS) == mentions > 0
