"""EntityWorld's measures in evaluate (eric/evaluate/world_*.py), each pinned on small
hand-built inputs: grounded rates, the event-mix standardization, name counts, probes, the
oracle lines, the learning curve's columns, the metrics file's compact JSON."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch

from eric.data.collate import StageOneCollator
from eric.data.examples import stage_one_target
from eric.evaluate.compact_json import dumps
from eric.evaluate.critics import Candidate, batch_pairs, candidate_mask, critic_loss
from eric.evaluate.state_probe import UnitState, linear_probe, majority_probe
from eric.evaluate.world_checks import (
    CHECK_FIELDS,
    NAME_FIELDS,
    columns,
    is_grounded,
    mention_counts,
    name_counts,
    rates,
    story_checks,
    story_counts,
)
from eric.evaluate.world_curve import snapshots, world_curve
from eric.evaluate.lm_loss import val_batches
from eric.evaluate.world_lines import LabelPrior, contrastive_ratios, critic_lines, oracle_event_probe, scene_blind_rates
from eric.evaluate.world_mix import kind_columns, standardized, world_mix
from eric.evaluate.world_probes import identity_votes, unit_labels
from eric.world.checker import check_story
from eric.world.corpus import stage_one_row
from eric.world.generate import generate_stories
from eric.world.oracle import FLOOR, Oracle, event_tables
from tests.generate.tiny import MAX_ENTITIES, tiny_tokenizer

SCENE = "Anna Berg and Tom Reed are at the harbor; Mia Cole is at the mill."
UNITS = [
    "<e0> met <e1>.",  # parsed, grounded, allowed
    "<e0> traveled to the lagoon.",  # unknown place: already_there was not checked
    "<e5> met <e0>.",  # a character outside the cast: no state rule was checked
    "<e1> fled from <e2> to the lagoon.",  # unknown place and not_together (a state rule)
    "<e0> talked with <e2>.",  # grounded: not_together and strangers
    "Blah blah.",  # unparsed
    "<e2> met <e2>.",  # one character in both roles: keeps not_together (<e0> met <e2> breaks it)
]


def test_grounded_units_are_those_whose_state_rules_were_all_applied():
    check = check_story(SCENE, UNITS)
    assert [is_grounded(u) for u in check.units] == [True, False, False, False, True, False, False]
    assert check.units[-1].violations == ("same_character",)  # no state rule broken, yet not grounded
    assert story_counts(check) == {"units": 7, "parsed": 6, "violations": 7, "state_violations": 3,
                                   "grounding": 4, "grounded": 2, "grounded_state_violations": 2,
                                   "clean": 0, "valid": 0}


def test_rates_per_parsed_and_per_grounded_unit():
    clean = check_story(SCENE, ["<e0> met <e1>.", "<e1> traveled to the mill."])
    counts = columns([story_counts(c) for c in (check_story(SCENE, UNITS), clean)])
    assert counts["grounded"] == [2, 2] and counts["clean"] == [0, 1] and counts["valid"] == [0, 1]
    out = rates(counts)
    assert out["grounded"] == 4 and out["grounded_share"] == pytest.approx(4 / 8)  # of 8 parsed units
    assert out["grounded_state_violation_rate"] == pytest.approx(2 / 4)
    assert out["grounding_violations"] == 4 and out["grounding_rate"] == pytest.approx(4 / 8)
    assert "mapped_rate" not in out


def test_the_scene_blind_line_reads_legal_stories_against_another_scene():
    """Against its own scene a generator story breaks nothing; against the next story's, its
    characters, places and items are often not that scene's, and where they are, their states
    are not the ones the story assumes."""
    found = scene_blind_rates(seed=3, stories=20)
    own, blind = found["own"], found["next"]
    assert own["grounding_rate"] == 0 and own["grounded_share"] == 1 and own["grounded_state_violation_rate"] == 0
    assert blind["grounding_rate"] > 0.2 and blind["grounded_share"] < 0.8 and blind["grounded_state_violation_rate"] > 0.2
    assert blind == scene_blind_rates(seed=3, stories=20)["next"]  # the same seed, the same line
    assert "state_violation_rate_at_world_mix" not in blind  # no mix given, no standardized reading


def test_the_scene_blind_line_at_the_world_mix():
    """Given the world's mix, each reading also carries its standardized rate: the generator's
    own stories break nothing at any mix and, drawn from the world, sit near its kind shares;
    read against another scene they break state rules at the mix too."""
    mix = world_mix(3, 200)
    found = scene_blind_rates(seed=3, stories=20, mix=mix)
    own, blind = found["own"], found["next"]
    assert own["state_violation_rate_at_world_mix"] == 0 and own["event_mix_distance"] < 0.2
    assert blind["state_violation_rate_at_world_mix"] > 0.2
    assert 0 < blind["world_mix_covered"] <= 1
    plain = scene_blind_rates(seed=3, stories=20)["next"]
    assert {k: blind[k] for k in plain} == plain  # the plain rates are unchanged by the mix


def test_the_event_mix_standardization_worked_by_hand():
    # story 1: two travels (no violation) and a meet that breaks one state rule; story 2: a clean meet
    by_kind = {"travel": {"grounded": [2, 0], "state_violations": [0, 0]},
               "meet": {"grounded": [1, 1], "state_violations": [1, 0]}}
    mix = {"travel": 0.5, "meet": 0.25, "fight": 0.25}
    out = standardized(by_kind, mix)
    # raw: 1 / 4 = 0.25; by kind: travel 0 / 2, meet 1 / 2; weighted by the mix of the kinds written
    assert out["state_violation_rate_at_world_mix"] == pytest.approx((0.5 * 0 + 0.25 * 0.5) / 0.75)
    assert out["world_mix_covered"] == pytest.approx(0.75)
    assert out["event_mix_distance"] == pytest.approx(0.5 * (0 + 0.25 + 0.25))  # shares 0.5 / 0.5 / 0
    assert standardized({}, mix) == {"state_violation_rate_at_world_mix": None, "world_mix_covered": None,
                                     "event_mix_distance": None}


def test_kind_columns_count_grounded_units_and_their_state_violations_per_story():
    checks = story_checks([SCENE, SCENE], [stage_one_target(UNITS), stage_one_target(["<e0> met <e1>."])])
    by_kind = kind_columns(checks)
    # the flee and the travel name a place the scene lacks, the second meet a character outside it
    assert sorted(by_kind) == ["meet", "talk"]
    assert by_kind["meet"] == {"grounded": [1, 1], "state_violations": [0, 0]}
    assert by_kind["talk"] == {"grounded": [1, 0], "state_violations": [2, 0]}  # <e2> met <e2>: not counted


def test_name_counts_of_a_final_text():
    stage_one = stage_one_target(["<e0> met <e1>.", "<e1> escaped.", "<e0> met <e1>.", "The wind blew."])
    final = stage_one_target(["Anna met Tom.", "Aaron escaped.", "Tom met Anna Berg.", "The wind blew."])
    # mapped: as many cast names as placeholders and no other name; faithful: the same characters
    assert name_counts(SCENE, stage_one, final) == {"named": 3, "mapped": 2, "faithful": 1}


def test_mention_counts_read_the_writers_output_mention_by_mention():
    """The issue's line for the writer (at least 90% of mentions are cast names) is per mention;
    a blend of two members' names is no cast name, another member's name is not the own one."""
    written = "<e0> Anna Berg <e1> Tom <e0> Anna <e2> Mia Reed <e1> Mia Cole <e2> Aaron"
    counts = mention_counts(SCENE, written)
    assert counts == {"mentions": 6, "cast_mentions": 4, "own_mentions": 3}
    assert mention_counts(SCENE, None) == {"mentions": 0, "cast_mentions": 0, "own_mentions": 0}  # one-stage
    out = rates(columns([{**story_counts(check_story(SCENE, UNITS[:1])), "named": 1, "mapped": 1, "faithful": 1,
                          **counts}], (*CHECK_FIELDS, *NAME_FIELDS)))
    assert out["mentions"] == 6 and out["cast_mention_rate"] == pytest.approx(4 / 6)
    assert out["own_mention_rate"] == pytest.approx(3 / 6)


def test_unit_labels_read_the_state_before_from_the_previous_unit_or_the_scene():
    row = {"source": SCENE, "world_events": ["fight", "recover"], "world_focal": ["<e2>", "<e1>"],
           "world_states": [[{}, {"condition": "wounded", "location": "harbor"}, {}],
                            [{}, {"condition": "well", "location": "mill"}, {}]]}
    row["world_states"][0][2] = {"condition": "wounded", "location": "mill"}
    assert unit_labels(row, 0) == {"event": "fight", "condition_before": "well", "location_before": "place 1",
                                   "condition": "wounded"}  # Mia Cole (<e2>) starts at the mill, the second place
    assert unit_labels(row, 1) == {"event": "recover", "condition_before": "wounded",
                                   "location_before": "place 0", "condition": "well"}
    assert unit_labels(row, 2) is None


def _pairs(labels: list[str]) -> list[UnitState]:
    return [UnitState(i // 2, i % 2, -1, -1, label) for i, label in enumerate(labels)]


def test_a_linear_probe_reads_separable_features_and_not_constant_ones():
    labels = ["well", "well", "well", "captive"] * 10  # with nothing to read, the regression says the majority
    separable = torch.tensor([[1.0, 0.0] if y == "well" else [0.0, 1.0] for y in labels])
    constant = torch.ones(len(labels), 2)
    test_labels = ["well"] * 6 + ["captive"] * 4
    test_x = torch.tensor([[1.0, 0.0]] * 6 + [[0.0, 1.0]] * 4)
    read = linear_probe((_pairs(labels), separable), (_pairs(test_labels), test_x), resamples=50)
    assert read.accuracy == 1.0 and read.gain > 0
    blind = linear_probe((_pairs(labels), constant), (_pairs(test_labels), torch.ones(10, 2)), resamples=50)
    assert blind.accuracy == blind.majority  # one answer for every unit: the floor


def test_a_majority_probe_of_state_ids_against_the_majority_class():
    train = [UnitState(i, 0, i % 2, 0, "a" if i % 2 else "b") for i in range(10)]
    test = [UnitState(i, 0, i % 2, 0, "a" if i % 2 else "b") for i in range(6)]
    by_state = majority_probe(train, test, "predicted", resamples=50)
    assert by_state.accuracy == 1.0 and by_state.majority == 0.5
    constant = majority_probe(train, test, "gold", resamples=50)  # one gold state for all: the majority
    assert constant.accuracy == constant.majority


def test_the_identity_line_votes_by_the_focal_placeholder_alone():
    rows = [{"world_focal": ["<e0>", "<e1>", "<e0>"]}, {"world_focal": ["<e1>", "<e1>", "<e2>"]}]
    labels = {(0, 0): "place 0", (0, 1): "place 1", (0, 2): "place 0", (1, 0): "place 1", (1, 1): "place 0",
              (1, 2): "place 1"}
    units = [UnitState(t, n, 7, 7, labels[t, n]) for t, n in labels]  # one state for every unit: no information
    voted = identity_votes(units, rows)
    assert [u.predicted for u in voted] == [0, 1, 0, 1, 1, 2] and [u.label for u in voted] == [u.label for u in units]
    found = majority_probe(voted, voted, "predicted", resamples=50)  # <e0> -> place 0, <e1> -> place 1 (2 of 3)
    assert found.accuracy == pytest.approx(5 / 6) and found.accuracy > majority_probe(units, units, resamples=50).accuracy


@pytest.fixture(scope="module")
def world_rows():
    return [stage_one_row(s) for s in generate_stories(seed=3, count=10, cast=(3, 5), events=6)]


def test_the_critic_lines_are_the_critics_on_the_loops_validation_batches(world_rows):
    tokenizer = tiny_tokenizer(world_rows)
    collator = StageOneCollator(tokenizer, 128, 128, max_entities=MAX_ENTITIES, hard_negatives=True, seed=1)
    val, train = world_rows[:5], world_rows  # the labels' marginal: every label of the batches is seen
    batches = val_batches(tokenizer, val, 4, 128, 128)
    assert sorted(i for b in batches for i in b) == list(range(5)) and [len(b) for b in batches] == [4, 1]
    out = critic_lines(collator, val, train, batches, seed=3, cast=(3, 5), events=6)
    assert out["batches"] == 2 and out["val_texts"] == 5
    # by hand, the batch set: the oracle's cross-entropy over every candidate of each batch,
    # weighted by its target tokens
    oracle = Oracle(event_tables(3, {r["id"] for r in val}, (3, 5), 6), val, train)
    parts = []
    for indices in batches:
        rows = [val[i] for i in indices]
        batch = collator(rows)
        pairs = batch_pairs(batch, [r["id"] for r in rows], collator.entity_class)
        assert pairs.negatives
        scores = oracle(pairs.anchors, pairs.candidates)
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(pairs.anchors)))
        parts.append((float(loss), math.log(len(pairs.candidates)), float((batch["labels"] != -100).sum())))
    weight = sum(w for _, _, w in parts)
    lines = out["batch"]
    assert lines["oracle"]["loss"] == pytest.approx(sum(l * w for l, _, w in parts) / weight, abs=1e-4)
    assert lines["chance"] == pytest.approx(sum(c * w for _, c, w in parts) / weight, abs=1e-4)
    for which in ("batch", "text"):  # identity alone beats chance where other placeholders compete
        lines = out[which]
        assert lines["identity"]["vs_chance"] < 1 and 0 < lines["oracle"]["vs_chance"] < 1
        # the bonus drops the candidates of other placeholders from the oracle's denominator
        assert lines["oracle_identity"]["loss"] < lines["oracle"]["loss"]
    entity = out["entity"]  # every candidate carries the anchor's placeholder: identity adds nothing
    assert entity["identity"] == {"loss": entity["chance"], "vs_chance": 1.0}
    assert entity["oracle_identity"] == entity["oracle"] and entity["oracle"]["vs_chance"] < 1
    assert entity["prior_identity"] == entity["prior"] and entity["prior"]["loss"] > 0
    assert out["batch"]["prior_identity"]["loss"] != out["batch"]["identity"]["loss"]  # the prior ranks within a placeholder
    assert 0 < entity["anchors"] < out["batch"]["anchors"] and entity["chance"] < out["text"]["chance"]


def test_the_anchor_blind_prior_scores_a_label_by_how_much_likelier_it_is_as_the_own_unit():
    rows = [{"id": "s", "world_events": ["meet", "travel", "die", "bury"], "world_focal": ["<e0>", "<e0>", "<e1>", "<e0>"]}]
    own = Counter({("meet", "a"): 3, ("travel", "a"): 1})
    later = Counter({("meet", "a"): 1, ("travel", "a"): 1, ("bury", "a"): 2})
    prior = LabelPrior(own, later, rows)
    anchors = [Candidate(0, "s", 0, 0), Candidate(0, "s", 1, 0)]
    scores = prior(anchors, anchors + [Candidate(0, "s", 3, 0), Candidate(0, "s", 2, 0)])
    assert torch.equal(scores[0], scores[1])  # blind to the anchor
    assert scores[0, 0] == pytest.approx(math.log(3))  # meet: 3/4 as the own unit, 1/4 later
    assert scores[0, 2] == pytest.approx(math.log(FLOOR) - math.log(2 / 4))  # bury: never the own unit
    assert scores[0, 3] == pytest.approx(math.log(FLOOR))  # ("die", "b"): never counted
    # anchor 1's candidates are its own unit and the later bury: the prior picks the own one
    allowed = torch.tensor([[True, True, True, False], [False, True, True, False]])
    loss, chance, counted = critic_loss(scores, allowed, torch.ones(2, dtype=torch.bool))
    assert counted == 2 and loss < 0.5 * chance


def test_the_prior_is_counted_on_the_entity_candidates_of_the_training_batches(world_rows):
    tokenizer = tiny_tokenizer(world_rows)
    collator = StageOneCollator(tokenizer, 128, 128, max_entities=MAX_ENTITIES, seed=1)
    prior = LabelPrior.fit(collator, world_rows, world_rows, batch_size=4)
    anchors = 0
    for start in range(0, len(world_rows), 4):
        chunk = world_rows[start:start + 4]
        pairs = batch_pairs(collator(chunk), [r["id"] for r in chunk], collator.entity_class)
        anchors += int(candidate_mask(pairs, "entity")[1].sum())
    assert anchors > 0 and prior.anchors == anchors
    assert prior.later_weight == pytest.approx(anchors)  # each anchor's later units weigh 1 in all
    assert prior.scores == LabelPrior.fit(collator, world_rows, world_rows, batch_size=4).scores  # seeded draws
    assert len(prior.scores) > 1


def test_the_oracle_event_probe_scores_every_test_unit(world_rows):
    out = oracle_event_probe(world_rows[5:], world_rows[:5], seed=3, cast=(3, 5), events=6)
    assert out["units"] == sum(len(r["world_events"]) for r in world_rows[:5])
    assert 0 <= out["majority"] <= 1 and out["majority"] <= out["accuracy"] <= 1


def test_the_curve_columns_and_the_contrastive_ratios(tmp_path):
    (tmp_path / "eric_val.csv").write_text(
        "step,val_lm_loss,val_contrastive_loss,val_contrastive_chance,val_input_gap\n0,9.0,5.0,5.0,0.0\n4,6.5,2.0,4.0,0.25\n")
    (tmp_path / "eric.csv").write_text("step,contrastive_loss,contrastive_chance\n4,3.0,4.0\n")
    texts = [stage_one_target(UNITS), stage_one_target(["<e0> met <e1>."])]
    curve = world_curve([(4, texts), (8, texts[::-1])], [SCENE, SCENE], tmp_path / "eric_val.csv")
    assert curve["step"] == [4, 8] and curve["val_lm_loss"] == [6.5, None] and curve["val_cl_ratio"] == [0.5, None]
    assert curve["val_input_gap"] == [0.25, None]
    assert curve["parse_rate"] == [7 / 8] * 2 and curve["grounded_share"] == [round(3 / 7, 5)] * 2  # 5 digits
    assert curve["grounded_state_violation_rate"] == [round(2 / 3, 5)] * 2
    none = {"entity_train": None, "entity_val": None}  # a run before the entity-candidate columns
    assert contrastive_ratios(tmp_path, "eric") == {"train": 0.75, "val": 0.5, **none}
    assert contrastive_ratios(tmp_path, "bart") == {"train": None, "val": None, **none}
    (tmp_path / "new_val.csv").write_text(  # a run with them: entity candidates beside its own
        "step,val_contrastive_loss,val_contrastive_chance,val_contrastive_entity_loss,val_contrastive_entity_chance\n"
        "4,2.0,4.0,0.9,1.0\n")
    (tmp_path / "new.csv").write_text("step,contrastive_loss,contrastive_chance,contrastive_entity_loss,"
                                      "contrastive_entity_chance\n4,3.0,4.0,1.2,1.5\n")
    assert contrastive_ratios(tmp_path, "new") == {"train": 0.75, "val": 0.5, "entity_train": 0.8, "entity_val": 0.9}
    folder = tmp_path / "eric"  # <train.snapshots_dir>/<variant>
    for step in (10, 2, 100):
        (folder / f"step-{step:06d}").mkdir(parents=True)
    assert [s for s, _ in snapshots(tmp_path, "eric")] == [2, 10, 100] and snapshots(tmp_path, "bart") == []


def test_compact_json_is_indented_json_with_lists_of_values_on_one_line():
    plain = {"a": 1, "b": {"c": 0.5, "d": None, "e": {}}, "f": "x"}
    assert dumps(plain) == json.dumps(plain, indent=2)  # a non-world metrics file: byte for byte
    tree = {"ids": ["s1", "s2"], "n": [1, 2, 3], "rows": [{"x": [1]}, 2], "empty": [], "nan": math.inf}
    text = dumps(tree)
    assert '"n": [1, 2, 3]' in text and '"ids": ["s1", "s2"]' in text and '"empty": []' in text
    assert json.loads(text) == tree
