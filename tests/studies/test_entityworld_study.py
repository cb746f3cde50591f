"""The EntityWorld study's own code: the checker per story, and the verdict the page draws."""

from __future__ import annotations

import csv
import json

import pytest

from eric.world.generate import generate_stories
from studies.entityworld import render
from studies.entityworld.measure import name_counts, story_checks, summarize_checks


@pytest.fixture(scope="module")
def stories():
    return list(generate_stories(seed=3, count=4, cast=(3, 5), events=6))


def test_story_checks_count_units_parsed_and_violations_by_kind(stories):
    truth = ["<sent> " + " <sent> ".join(s.units) for s in stories]
    broken = list(truth)
    broken[0] = "<sent> <e0> traveled to Nowhere Town. <sent> <e0> mumbled."  # a place not in the story; unparsed
    checks = story_checks([s.scene for s in stories], broken, [s.id for s in stories], max_units=15)
    assert checks[0] == {"id": stories[0].id, "units": 2, "parsed": 1, "violations": 1, "state_violations": 0,
                         "grounding": 1, "clean": 0, "valid": 0}
    assert all(c["units"] == c["parsed"] == 6 and c["violations"] == 0 and c["valid"] == 1 for c in checks[1:])
    summary = summarize_checks(checks)
    assert summary["parse_rate"] == pytest.approx(19 / 20) and summary["grounding_rate"] == pytest.approx(1 / 19)
    assert summary["valid_stories"] == 0.75 and summary["state_violation_rate"] == 0


def _named(story, unit: str, names: dict[str, str] | None = None) -> str:
    """A unit with each placeholder written as a name (the cast's unless `names` says otherwise)."""
    import re

    return re.sub(r"<e(\d+)>", lambda m: (names or {}).get(m.group(0), story.cast[int(m.group(1))]), unit)


def test_final_texts_count_the_units_whose_names_map_back_to_the_cast(stories):
    story = stories[0]
    stage_one = "<sent> " + " <sent> ".join(story.units)
    named = [u for u in story.units if "<e" in u]
    final = "<sent> " + " <sent> ".join(_named(story, u) for u in story.units)
    assert name_counts(story.scene, stage_one, final, 15) == {"named": len(named), "mapped": len(named),
                                                               "faithful": len(named)}
    checks = story_checks([story.scene], [final], [story.id], 15, names=True)
    assert checks[0]["parsed"] == len(story.units) and checks[0]["violations"] == 0
    assert story_checks([story.scene], [final], [story.id], 15)[0]["parsed"] < len(story.units)  # names unread

    first = named[0]
    tags = sorted(set(__import__("re").findall(r"<e\d+>", first)))
    other = next(f"<e{k}>" for k in range(len(story.cast)) if f"<e{k}>" not in tags)
    cases = {  # the first named unit written three wrong ways
        "swapped": (_named(story, first, {tags[0]: story.cast[int(other[2:-1])]}), {"mapped": 1, "faithful": 0}),
        "outsider": (_named(story, first, {tags[0]: "Zdenek Zouch"}), {"mapped": 0, "faithful": 0}),
        "dropped": (_named(story, first, {tags[0]: "someone"}), {"mapped": 0, "faithful": 0}),
    }
    for name, (unit, expected) in cases.items():
        counts = name_counts(story.scene, f"<sent> {first}", f"<sent> {unit}", 15)
        assert counts == {"named": 1, **expected}, name
    rows = [{**c, "named": 2, "mapped": 1, "faithful": 1} for c in checks]
    assert summarize_checks(rows)["mapped_rate"] == 0.5 and "mapped_rate" not in summarize_checks(checks)


def _write_run(folder, state_violations: list[int], probe: float, parsed: int = 10) -> None:
    folder.mkdir(parents=True)
    with (folder / "stories.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "units", "parsed", "violations", "state_violations",
                                                    "grounding", "clean", "valid"])
        writer.writeheader()
        for i, v in enumerate(state_violations):
            writer.writerow({"id": f"s{i}", "units": 10, "parsed": parsed, "violations": v, "state_violations": v,
                             "grounding": 0, "clean": int(v == 0), "valid": int(v == 0)})
    (folder / "cases.csv").write_text("scoring,mode,text,unit,right\nlm,none,s0,1,1\n")
    probe_entry = {"accuracy": probe, "majority": 0.3, "gain": probe - 0.3, "gain_low": probe - 0.35,
                   "gain_high": probe - 0.25}
    (folder / "final.json").write_text(json.dumps({
        "checks": {}, "coherence": {"lm/none": 0.5}, "contrastive": {"train": None, "val": None},
        "probes": {"hidden/condition_before": probe_entry, "predicted/condition_before": probe_entry}}))


MIX = {"travel": 0.5, "meet": 0.3, "fight": 0.2}  # a small world's event mix


def _units(rate: float) -> tuple:
    """One story's parsed units at the world's mix, a `rate` share of each kind breaking a state rule."""
    out = []
    for kind, share in MIX.items():
        n = round(share * 100)
        out += [(kind, int(i < round(rate * n))) for i in range(n)]
    return tuple(out)


@pytest.mark.parametrize("eric_violations, eric_probe, verdict", [
    (1, 0.6, "ERIC tracks entities better than BART here"),  # a third of BART's violations, intervals apart
    (3, 0.6, "not shown"),  # as many violations as BART
    (1, 0.2, "partly"),  # fewer violations, apart, but a worse probe
])
def test_the_verdict_needs_fewer_state_violations_apart_and_a_better_probe(tmp_path, monkeypatch, eric_violations,
                                                                         eric_probe, verdict):
    monkeypatch.setattr(render, "OUTPUTS", tmp_path)
    monkeypatch.setattr(render, "world_mix", lambda: MIX)
    rates = {"eric": eric_violations / 10, "bart": 0.3}
    monkeypatch.setattr(render, "story_units", lambda arm: tuple(tuple(_units(rates[arm]) for _ in range(40))
                                                               for _ in range(3)))
    for seed in (1, 2, 3):
        _write_run(tmp_path / "eric" / f"seed-{seed}", [eric_violations] * 40, eric_probe)
        _write_run(tmp_path / "bart" / f"seed-{seed}", [3] * 40, 0.4)
    assert verdict in render.verdict()
    assert render.arms() == ["eric", "bart"]
    assert render.standardized("eric")[0].value == pytest.approx(rates["eric"])  # the world's mix, every kind read
    assert "| ERIC | 3 |" in "\n".join(render.final_table(render.arms()))  # three seeds pooled


def test_an_arm_writing_another_event_mix_is_named_and_standardized_to_the_worlds(monkeypatch):
    monkeypatch.setattr(render, "world_mix", lambda: MIX)
    travel_only = tuple(("travel", int(i < 5)) for i in range(50)) + (("meet", 1), ("meet", 1))
    monkeypatch.setattr(render, "story_units", lambda arm: ((travel_only,) * 10,))
    monkeypatch.setattr(render, "runs", lambda arm: {1: None})
    assert render.mix_distance("x") == [pytest.approx(0.5 * (abs(50 / 52 - 0.5) + abs(2 / 52 - 0.3) + 0.2))]
    found, covered = render.standardized("x", resamples=50)
    assert found.value == pytest.approx((0.5 * 0.1 + 0.3 * 1.0) / 0.8) and covered == pytest.approx(0.8)
