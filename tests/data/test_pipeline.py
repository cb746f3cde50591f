"""The preprocess stage end to end: synthetic corpora and a real slice of wikiplots-mini."""

import json
import re

import pyarrow.parquet as pq
import pytest

from eric.data.pipeline import run_preprocess
from eric.data.schema import SPLITS, STAGE_ONE, STAGE_TWO
from eric.data.split import assign_split
from tests.conftest import STORY_A, STORY_B, WIKIBIO_MINI, WIKIPLOTS_MINI


def read(out, stage, split="train"):
    return pq.read_table(out / stage / f"{split}.parquet")


def test_outputs_follow_the_schema_and_stats_balance(write_wikiplots, params_for, tmp_path):
    path = write_wikiplots([STORY_A, STORY_B, ["too short"]])
    stats = run_preprocess(params_for(path, "wikiplots", split_ratio=[1, 0, 0]), progress=False)
    out = tmp_path / "out"
    for split in SPLITS:  # every split file exists, even when empty
        assert read(out, "stage_one", split).schema.equals(STAGE_ONE)
        assert read(out, "stage_two", split).schema.equals(STAGE_TWO)
    saved = json.loads((out / "stats.json").read_text())
    assert saved["stories_in"] == 3 == saved["examples_out"] + saved["skipped_total"]
    assert saved["train"]["examples"] == 2 and saved["val"]["examples"] == 0
    assert stats.skipped == {"too_few_units": 1}


def test_stage_one_and_two_examples(write_wikiplots, params_for, tmp_path):
    path = write_wikiplots([STORY_A])
    run_preprocess(params_for(path, "wikiplots", split_ratio=[1, 0, 0]), progress=False)
    one = read(tmp_path / "out", "stage_one").to_pylist()[0]
    assert one["source"] == STORY_A[0]  # the input is not anonymized
    assert one["target"].startswith("<sent> ") and one["target"].count("<sent>") == len(STORY_A) - 1
    assert "Linda" not in one["target"] and "<e0>" in one["target"]  # spaCy tags Linda
    assert len(one["unit_entities"]) == len(one["units"])
    for unit, tags in zip(one["units"], one["unit_entities"]):
        assert tags == re.findall(r"<e\d+>", unit)
    two = read(tmp_path / "out", "stage_two").to_pylist()[0]
    assert two["source"] == one["source"] + " </s> " + one["target"]
    assert two["target"] == " ".join(f"{m['placeholder']} {m['mention']}" for m in one["mentions"])


def test_max_target_units_truncates(write_wikiplots, params_for, tmp_path):
    path = write_wikiplots([STORY_A])
    run_preprocess(params_for(path, "wikiplots", split_ratio=[1, 0, 0], max_target_units=5), progress=False)
    assert len(read(tmp_path / "out", "stage_one").column("units")[0]) == 5


def test_real_slice_of_wikiplots_mini(params_for, tmp_path):
    """Checked by eye: story 0 is 'Darby and Joan' (Gorry family, Moore)."""
    stats = run_preprocess(params_for(WIKIPLOTS_MINI, "wikiplots", max_stories=40), progress=False)
    assert stats.stories_in == 40 == stats.examples + sum(stats.skipped.values())
    rows = {r["title"]: r for split in SPLITS for r in read(tmp_path / "out", "stage_one", split).to_pylist()}
    darby = rows["Darby and Joan"]
    assert darby["source"] == "Mrs. Gorry and her son lived by an old mill stream."
    # resolve: "Mrs. Gorry" (the mother) is not Patrick Gorry; "Moore" alone (Sayle or Sheila) stays text
    assert darby["units"][1] == "Mrs. <e1> and her son <e0> were left nearly destitute, and in her heart there grew a great bitterness."
    assert ("<e0>", "Patrick") in [(m["placeholder"], m["mention"]) for m in darby["mentions"]]
    assert darby["unit_entities"][4] == ["<e0>", "<e3>"]  # "Patrick Gorry and Sheila Moore fell in love."
    assert darby["units"][3] == "Moore had a daughter of whom he was fond."
    assert 5 <= min(len(r["units"]) for r in rows.values()) and max(len(r["units"]) for r in rows.values()) <= 15
    means = stats.to_dict()["train"]
    assert 5 < means["entities"] < 12 and 150 < means["output_len"] < 450  # Table-1-like magnitudes


def test_second_corpus_by_params_only(params_for, tmp_path):
    stats = run_preprocess(params_for(WIKIBIO_MINI, "jsonl", max_stories=25), progress=False)
    assert stats.stories_in == 25 == stats.examples + sum(stats.skipped.values())
    row = read(tmp_path / "out", "stage_one").to_pylist()[0]
    assert 5 <= len(row["units"]) <= 15 and row["n_entities"] > 0
    assert not any("[[" in u or "]]" in u for u in row["units"])


def test_rerun_is_deterministic(write_wikiplots, params_for, tmp_path):
    path = write_wikiplots([STORY_A, STORY_B])
    params = params_for(path, "wikiplots")
    run_preprocess(params, progress=False)
    first = {s: read(tmp_path / "out", "stage_one", s) for s in SPLITS}
    run_preprocess(params, progress=False)
    assert all(read(tmp_path / "out", "stage_one", s).equals(first[s]) for s in SPLITS)


@pytest.mark.parametrize("n_process", [2])
def test_multiprocess_gives_the_same_examples(write_wikiplots, params_for, tmp_path, n_process):
    path = write_wikiplots([STORY_A, STORY_B] * 3)
    run_preprocess(params_for(path, "wikiplots", split_ratio=[1, 0, 0]), progress=False)
    single = read(tmp_path / "out", "stage_one")
    run_preprocess(params_for(path, "wikiplots", split_ratio=[1, 0, 0], n_process=n_process, batch_size=2), progress=False)
    assert read(tmp_path / "out", "stage_one").equals(single)


def test_duplicates_are_skipped_before_the_split(write_jsonl, params_for, tmp_path):
    """Repeated texts, under titles that hash to other splits, reach one split once; a
    distinct story that reuses an id is kept under a derived id and counted."""
    a, b = " ".join(STORY_A), " ".join(STORY_B)

    def title_in_another_split(than: str) -> str:
        return next(t for t in (f"copy {i}" for i in range(100)) if assign_split(t, (1, 1, 1)) != assign_split(than, (1, 1, 1)))

    lines = [
        {"id": "a", "title": "Evil Dead", "text": a},
        {"id": "b", "title": title_in_another_split("Evil Dead"), "text": a},  # same text
        {"id": "c", "title": "Strike", "text": b},
        {"id": "a", "title": title_in_another_split("Evil Dead"), "text": " ".join(reversed(STORY_A))},  # same id, other text
        {"id": "d", "title": title_in_another_split("Strike"), "text": "  " + b.upper()},  # same normalized text
        {"id": "e", "title": title_in_another_split("Evil Dead"), "text": a + " Ash drives home alone."},  # same example
    ]
    stats = run_preprocess(params_for(write_jsonl(lines), "jsonl", split_ratio=[1, 1, 1], max_target_units=5), progress=False)
    assert stats.skipped == {"duplicate": 3} and stats.examples == 3 and stats.stories_in == 6
    assert stats.id_collisions == 1 and stats.to_dict()["id_collisions"] == 1
    rows = [r for split in SPLITS for r in read(tmp_path / "out", "stage_one", split).to_pylist()]
    assert sorted(r["id"] for r in rows) == ["a", "a~2", "c"]
    texts = [(r["source"], r["target"]) for r in rows]
    assert len(set(texts)) == len(texts)


def test_mention_coverage_is_counted_per_split_and_resolution_closes_it(params_for, tmp_path):
    counts = {}
    for mode in ("paper", "exact", "resolve"):
        params = params_for(WIKIPLOTS_MINI, "wikiplots", max_stories=15, mentions=mode)
        stats = run_preprocess(params, progress=False)
        saved = json.loads((tmp_path / "out" / "stats.json").read_text())
        assert saved["mentions_mode"] == mode and "name coverage" in stats.summary()
        counts[mode] = {k: sum(saved[s][k] for s in SPLITS) for k in ("mentions", "propagated", "names_left")}
        assert saved["name_coverage"] == round(counts[mode]["mentions"] / (counts[mode]["mentions"] + counts[mode]["names_left"]), 4)
        for split in SPLITS:
            for row in read(tmp_path / "out", "stage_one", split).to_pylist():
                assert row["unit_entities"] == [re.findall(r"<e\d+>", u) for u in row["units"]]
    paper, exact, resolve = counts["paper"], counts["exact"], counts["resolve"]
    assert paper["propagated"] == 0 and paper["names_left"] > 0 and exact["propagated"] > 0
    assert exact["names_left"] == paper["names_left"] - exact["propagated"]  # the count is the same in every mode
    assert exact["mentions"] == paper["mentions"] + exact["propagated"]
    assert resolve["names_left"] < exact["names_left"] and resolve["propagated"] > exact["propagated"]
