"""The EntityWorld study's page: fluency lines, per-seed grounded rates and verdicts paired by
seed, from kept runs built by hand."""

from __future__ import annotations

import json

import pytest
import yaml

from studies import entityworld_page as page
from studies.spec import RUN_FILE, load_study


def _world(parse: float, grounding: float, share: float, grounded_rate: float) -> dict:
    stage = {"parse_rate": parse, "grounding_rate": grounding, "grounded_share": share,
             "grounded_state_violation_rate": grounded_rate, "state_violation_rate_at_world_mix": grounded_rate / 2,
             "event_mix_distance": grounding, "world_mix_covered": share,
             "parsed": 200, "by_rule": {"unknown_place": round(grounding * 200), "not_together": round(grounded_rate * 100),
                                        "wrong_place": round(grounded_rate * 60), "dead_character": 10}}
    return {"world": {"stage_one": stage, "final": {**stage, "grounded_state_violation_rate": grounded_rate + 0.1}}}


def _keep(root, name: str, variant: str, evaluate: dict) -> None:
    folder = root / "outputs" / name
    (folder / "metrics" / "evaluate").mkdir(parents=True)
    (folder / "metrics" / "evaluate" / f"{variant}.json").write_text(json.dumps(evaluate))
    (folder / RUN_FILE).write_text("{}")


@pytest.fixture
def spec(tmp_path):
    arms = {"eric": {"variants": ["eric"]}, "eric_no_state": {"variants": ["eric_no_state"]},
            "bart": {"variants": ["bart"]}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {
        "world": {"seeds": [1, 2, 3], "arms": arms},
        "fluency": {"seeds": [1], "arms": {"bart": {"variants": ["bart"]}}}}}))
    curve = {"step": [1000, 2000], "parse_rate": [0.93, 0.96], "grounding_rate": [0.4, 0.08],
             "grounded_share": [0.5, 0.81], "val_lm_loss": [1.2, 0.9],
             "val_input_gap": [0.0, 0.3]}
    fluent = _world(0.96, 0.08, 0.81, 0.5)
    _keep(tmp_path, "fluency-bart-seed1", "bart", {"world": {**fluent["world"], "curve": curve}})
    (tmp_path / "outputs" / "fluency-bart-seed1" / RUN_FILE).write_text(json.dumps({"commit": "08ab663" + "0" * 33}))
    for seed, noise in zip((1, 2, 3), (-0.01, 0.0, 0.01)):
        _keep(tmp_path, f"world-bart-seed{seed}", "bart", _world(0.97, 0.05, 0.85, 0.50 + noise))
        _keep(tmp_path, f"world-eric-seed{seed}", "eric", _world(0.97, 0.20, 0.85, 0.40 + 2 * noise))
        if seed < 3:  # one seed missing: the pair with it is over the seeds both kept
            _keep(tmp_path, f"world-eric_no_state-seed{seed}", "eric_no_state", _world(0.9, 0.05, 0.9, 0.40 - noise))
    return load_study(tmp_path)


def _line(table: str, start: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {start} "))


def test_fluency_needs_all_three_lines(spec):
    table = page.fluency_table(spec=spec)
    assert _line(table, "BART").endswith(
        "| 97.0 [97.0, 97.0] | 0.050 [0.050, 0.050] | 0.050, 0.050, 0.050 | 85.0 [85.0, 85.0] | yes | 3 of 3 |")
    assert _line(table, "ERIC").endswith("| no | 0 of 3 |")  # grounding violations 0.20 > 0.10
    assert _line(table, "ERIC w/o s_n").endswith("| no | 0 of 2 |")  # parses 90% < 95%


def test_fluent_means_need_not_be_fluent_seeds(tmp_path):
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {
        "world": {"seeds": [1, 2], "arms": {"bart": {"variants": ["bart"]}}}}}))
    for seed, grounding in ((1, 0.05), (2, 0.12)):
        _keep(tmp_path, f"world-bart-seed{seed}", "bart", _world(0.97, grounding, 0.85, 0.5))
    row = _line(page.fluency_table(spec=load_study(tmp_path)), "BART")
    assert "| 0.085 [" in row and row.endswith("| 0.050, 0.120 | 85.0 [85.0, 85.0] | yes | 1 of 2 |")


def test_per_seed_rates_and_their_means(spec):
    table = page.seeds_table(spec=spec)
    assert "| BART | 97.0 / 85.0 / 0.490; 97.0 / 85.0 / 0.500; 97.0 / 85.0 / 0.510 | 0.500 [0.475, 0.525] | 0.250 [" in table
    # the world's mix each seed reaches, then how far its kinds are from that mix
    assert _line(table, "BART").endswith("| 85.0, 85.0, 85.0 | 0.050 [0.050, 0.050] |")
    assert _line(table, "ERIC w/o s_n").endswith("| 90.0, 90.0 | 0.050 [0.050, 0.050] |")  # two seeds kept


def test_verdicts_are_paired_by_seed_and_need_the_interval_to_exclude_zero(spec):
    table = page.grounded_pairs(spec=spec)
    eric_bart = _line(table, "ERIC − BART")
    assert "| -0.110, -0.100, -0.090 | -0.100 [-0.125, -0.075] | yes: A breaks fewer | – |" in eric_bart  # no stories kept
    no_state = _line(table, "ERIC − ERIC w/o s_n")
    assert "| -0.030, +0.000 |" in no_state and no_state.endswith("| no | – |")  # seeds 1 and 2 only; spans 0
    final = page.grounded_pairs(form="final", spec=spec)
    assert "| -0.100 [-0.125, -0.075] |" in _line(final, "ERIC − BART")  # both +0.1 on the final texts
    assert page.verdict(page.seed_interval([0.1])) == "no: fewer than two seeds"
    assert page.verdict(page.seed_interval([0.1, 0.2, 0.15])) == "yes: A breaks more"


def test_the_answers_ask_the_issue_questions_of_the_arms_kept_on_both_texts(spec):
    table = page.answers_table(spec=spec)
    assert _line(table, "Do ERIC's states").endswith(
        "| ERIC − BART | 3 of 3 | -0.100 [-0.125, -0.075] | yes: A breaks fewer | -0.100 [-0.125, -0.075] | yes: A breaks fewer |")
    assert "| ERIC − ERIC w/o s_n | 2 of 3 |" in _line(table, "... against the same planner")  # seed 3 not kept
    assert "reference's states" not in table  # an arm without runs asks nothing
    assert table.endswith("BART meets all three fluency lines on 3 of its 3 seeds kept.")


def test_the_story_bootstrap_pools_the_seeds_both_arms_have_and_matches_stories_by_id():
    def world(ids, violations, grounded):
        return {"stories": {"id": ids, "stage_one": {"grounded_state_violations": violations, "grounded": grounded}}}
    ids = [f"s{k}" for k in range(6)]
    a = {1: world(ids, [1, 2, 1, 2, 1, 2], [4] * 6), 2: world(ids, [2] * 6, [4] * 6), 3: world(ids, [4] * 6, [4] * 6)}
    b = {1: world(ids[::-1], [3] * 6, [4] * 6), 2: world(ids[::-1], [4, 3, 3, 3, 3, 3], [4] * 6)}  # no seed 3
    columns = page.story_columns(a, b)
    assert [len(c) for c in columns] == [6] * 4 and columns[0][0] == [1, 2] and columns[2][5] == [3, 4]  # s5 of b is first
    cell = page.story_bootstrap(a, b)  # A: 21 / 48, B: 37 / 48 over seeds 1 and 2
    value, low, high = (float(x) for x in cell.replace("[", "").replace("]", "").replace(",", "").split())
    assert value == pytest.approx(-16 / 48, abs=5e-4) and low <= value <= high < 0
    assert page.story_bootstrap(a, {1: {}}) == "–"  # no per-story lists: no secondary view


def test_the_fluency_curve_marks_the_first_snapshot_that_meets_every_line_and_the_runs_code(spec):
    table = page.fluency_curve(spec=spec)
    assert _line(table, "BART").startswith("| BART | 1 | 08ab663 | 1000 | 93.0 | 0.400 | 50.0 | 1.200 | 0.000 | no |")
    assert table.splitlines()[-1] == "| BART | 1 | 08ab663 | 2000 | 96.0 | 0.080 | 81.0 | 0.900 | 0.300 | yes |"
    assert _line(page.fluency_table(spec=spec), "BART").startswith("| BART | 3 |")  # the world grid's own runs


def test_the_grid_curve_averages_each_snapshot_over_the_seeds_that_reached_it(tmp_path):
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {
        "world": {"seeds": [1, 2], "arms": {"eric": {"variants": ["eric"]}}}}}))
    curves = ({"step": [250, 500], "parse_rate": [0.9, 0.96], "grounding_rate": [0.3, 0.1], "grounded_share": [0.7, 0.8],
               "grounded_state_violation_rate": [0.9, 0.7], "val_lm_loss": [1.0, 0.8], "val_cl_ratio": [0.95, 0.9]},
              {"step": [250], "parse_rate": [0.8], "grounding_rate": [0.5], "grounded_share": [0.5],
               "grounded_state_violation_rate": [1.1], "val_lm_loss": [1.2], "val_cl_ratio": [None]})
    for seed, curve in zip((1, 2), curves):
        _keep(tmp_path, f"world-eric-seed{seed}", "eric", {"world": {"curve": curve}})
    table = page.grid_curve(spec=load_study(tmp_path))
    rows = [line for line in table.splitlines() if line.startswith("| ERIC ")]
    assert rows == ["| ERIC | 2 | 250 | 85.0 | 0.400 | 60.0 | 1.000 | 1.100 | 0.950 | no |",
                    "| ERIC | 1 | 500 | 96.0 | 0.100 | 80.0 | 0.700 | 0.800 | 0.900 | yes |"]


def test_the_grid_final_table_reads_the_two_stage_texts_of_every_seed(spec):
    table = page.final_table(spec=spec)
    assert _line(table, "BART").startswith("| BART | 3 | 97.0 [97.0, 97.0] | – | – | – | 0.600 [0.575, 0.625] |")
    assert _line(table, "ERIC w/o s_n").startswith("| ERIC w/o s_n | 2 |")


def test_the_scene_blind_line_renders_beside_the_own_scene_row():
    table = page.scene_blind(seed=3, stories=20)
    blind, own = _line(table, "20 stories"), _line(table, "the same")
    assert "| 0.000 | 100.0 | 0.000 | 0.000 |" in own and "| 0.000 | 100.0 |" not in blind
    # at the world's event mix too, as the arms are read: what the other scene grounds is
    # mostly one-character events, far further from the world's mix than its own stories
    *_, rate, distance = (float(cell) for cell in blind.strip("| ").split(" | ")[1:])
    own_distance = float(own.strip("| ").split(" | ")[-1])
    assert rate > 0.2 and distance > own_distance + 0.2


def test_the_writer_table_reads_the_two_stage_runs_final_texts_per_unit_and_per_mention(tmp_path):
    arms = {"bart": {"variants": ["bart"]}, "bart_two_stage": {"variants": ["bart"]},
            "bart_two_stage_novels": {"variants": ["bart"]}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {"fluency": {"seeds": [1], "arms": arms}}}))
    final = {"parse_rate": 0.41, "named": 1400, "mapped_rate": 0.446}
    _keep(tmp_path, "fluency-bart-seed1", "bart", {"world": {"final": {"parse_rate": 0.9, "named": 0}}})
    _keep(tmp_path, "fluency-bart_two_stage-seed1", "bart", {"world": {"final": final}})  # from before mention_counts
    _keep(tmp_path, "fluency-bart_two_stage_novels-seed1", "bart",
          {"world": {"final": {**final, "cast_mention_rate": 0.602, "own_mention_rate": 0.402, "mentions": 2159,
                               "grounded_state_violation_rate": 0.83}}})
    (tmp_path / "outputs" / "fluency-bart_two_stage_novels-seed1" / "metrics" / "train").mkdir()
    (tmp_path / "outputs" / "fluency-bart_two_stage_novels-seed1" / "metrics" / "train" / "mentions.json").write_text(
        json.dumps({"steps": 500, "final_val_loss": 0.875}))
    table = page.writer_table(spec=load_study(tmp_path))
    assert "| BART |" not in table  # one-stage: no writer
    assert _line(table, "BART (two-stage)") == "| BART (two-stage) | 1 | – | – | – | – | 41.0 | 44.6 | – | – | – | – |"
    assert _line(table, "BART (two-stage) from novels") == (
        "| BART (two-stage) from novels | 1 | – | 500 | 0.875 | 2159 | 41.0 | 44.6 | 60.2 | 40.2 | 0.830 | no |")


def test_the_fluency_rules_count_what_each_two_stage_run_gets_wrong(tmp_path):
    arms = {"bart": {"variants": ["bart"]}, "bart_two_stage_novels": {"variants": ["bart"]}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {"fluency": {"seeds": [1], "arms": arms}}}))
    stage = {"parsed": 200, "grounding_rate": 0.125, "grounding_violations": 25, "grounded_share": 0.9,
             "grounded_state_violation_rate": 0.8,
             "by_rule": {"same_character": 20, "unknown_item": 3, "unknown_place": 2, "not_together": 30,
                         "already_there": 90, "dead_character": 0}}
    curve = {"step": [250, 500], "grounded_state_violation_rate": [0.91, 0.78]}
    _keep(tmp_path, "fluency-bart-seed1", "bart", {"world": {"stage_one": stage, "final": {"named": 0}}})
    _keep(tmp_path, "fluency-bart_two_stage_novels-seed1", "bart",
          {"world": {"stage_one": stage, "final": {"named": 1400}, "curve": curve}})
    table = page.fluency_rules(spec=load_study(tmp_path))
    assert "| BART |" not in table  # one-stage: its grounding is its spelling of names
    assert _line(table, "BART (two-stage) from novels") == (
        "| BART (two-stage) from novels | 1 | – | 200 | 0.125 | 25 | 20 (0.100) | 5 | 90.0 | 0.800 | 0.780–0.910 "
        "| already_there (75.0%) |")


def _states_run(root, name: str, variant: str, batch: float, entity: float, event_gain: float, coherence: tuple,
                used: int | None = None) -> None:
    probes = {"predicted_vector/event": {"gain": event_gain}, "oracle_event": {"accuracy": 0.33, "majority": 0.27},
              "predicted_vector/location_before": {"gain": 0.11}, "identity/location_before": {"gain": 0.12}}
    lines = {"batch": {"identity": {"vs_chance": 0.63}}, "entity": {"prior": {"vs_chance": 0.95}}}
    evaluate = {"world": {"probes": probes, "lines": lines, "states": {"states_used": used},
                          "coherence": {"accuracy": {"lm/predicted": coherence[0], "lm/random": coherence[1]}}}}
    _keep(root, name, variant, evaluate)
    train = {f"final_val_{term}_{part}": value for term, ratio in (("contrastive", batch), ("contrastive_entity", entity))
             for part, value in (("loss", ratio * 2.0), ("chance", 2.0))}
    (root / "outputs" / name / "metrics" / "train").mkdir()
    (root / "outputs" / name / "metrics" / "train" / f"{variant}.json").write_text(json.dumps(train))


def test_the_states_table_puts_each_figure_beside_its_trivial_line_and_skips_arms_without_states(tmp_path):
    arms = {"eric": {"variants": ["eric"]}, "bart": {"variants": ["bart"]},
            "eric_no_state_attention": {"variants": ["eric_no_state_attention"]}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {"world": {"seeds": [1, 2], "arms": arms}}}))
    for seed, (batch, coherence, used) in zip((1, 2), ((0.80, (0.45, 0.46), 71), (0.84, (0.48, 0.46), 8))):
        _states_run(tmp_path, f"world-eric-seed{seed}", "eric", batch, 1.01, -0.01, coherence, used)
        _keep(tmp_path, f"world-bart-seed{seed}", "bart", _world(0.97, 0.05, 0.85, 0.5))
    _states_run(tmp_path, "world-eric_no_state_attention-seed1", "eric_no_state_attention", 0.9, 1.0, 0.02, (0.5, 0.4))
    table = page.states_table(spec=load_study(tmp_path))
    eric = _line(table, "ERIC")
    assert eric.startswith("| ERIC | 2 | 0.820 [") and "(identity 0.630 [0.630, 0.630])" in eric
    assert "| 1.010 [1.010, 1.010] (prior 0.950 [0.950, 0.950]) |" in eric
    assert "| -0.010 [-0.010, -0.010] (oracle 0.060 [0.060, 0.060]) |" in eric
    assert "| 0.110 [0.110, 0.110] (identity 0.120 [0.120, 0.120]) |" in eric
    assert eric.endswith("| 0.5 [-18.6, 19.6] | 71, 8 |")  # -1 and +2 points, paired by seed; states per seed
    assert _line(table, "ERIC w/o StateAttn").endswith("| 10.0 | – |")  # one seed: a value, no interval
    assert not any(line.startswith("| BART ") for line in table.splitlines())


def test_violations_fall_into_rule_families_per_parsed_unit(spec):
    table = page.rules_table(spec=spec)
    header = table.splitlines()[0]
    assert header.startswith("| arm | seeds | grounded % of parsed | names outside the scene | one character in both roles |")
    # ERIC, every seed: 40 unknown places and 10 dead characters of 200 parsed units
    eric = _line(table, "ERIC")
    assert eric.startswith("| ERIC | 3 | 85.0 [85.0, 85.0] | 0.200 [0.200, 0.200] | 0.000 [0.000, 0.000] | 0.050 [0.050, 0.050] |")
    location = [(round(r * 100) + round(r * 60)) / 200 for r in (0.38, 0.40, 0.42)]
    assert f"| {page.seed_interval(location).format(3)} |" in eric
    assert page.family_rates({"hands_full": 3, "same_character": 1}, 0)["items"] is None  # nothing parsed: no rate
    families = [rule for members in page.RULE_FAMILIES.values() for rule in members]
    assert sorted(families) == sorted(page.rules.RULES)  # every rule in exactly one family


def test_the_world_tables_leave_out_configurations_that_ran_at_older_code(spec, monkeypatch):
    assert page.older_note(spec=spec) == ""  # kept without a dvc.lock: nothing to compare
    monkeypatch.setattr(page, "study_drift", lambda spec, name, root: None if name.endswith("seed2") else object())
    monkeypatch.setattr(page, "older", lambda drift: drift is not None)
    monkeypatch.setattr(page, "PROJECT_ROOT", spec.folder.parent)
    note = page.older_note(spec=spec)
    assert "world-eric-seed1" in note and "world-bart-seed3" in note and "seed2" not in note
    assert "not in the table" in note and "fluency-" not in note
    # seed 2 alone is left: one seed, so no interval and no verdict
    assert "| -0.100 | -0.100 | no: fewer than two seeds |" in _line(page.grounded_pairs(spec=spec), "ERIC − BART")
    assert "| BART | 97.0 / 85.0 / 0.500 | 0.500 |" in page.seeds_table(spec=spec)
    # the fluency grid's runs stay, marked as what the older code measured
    assert "shown as that code measured them: fluency-bart-seed1" in page.older_note("fluency", spec=spec)
    assert _line(page.fluency_curve(spec=spec), "BART")


def test_a_grid_all_at_one_older_code_stays_and_one_at_two_codes_is_left_out(spec, monkeypatch):
    """After a code change the whole grid ran at one older code: its arms were still measured
    alike, so its tables stay (marked); once its kept runs read two codes, the older ones go."""
    monkeypatch.setattr(page, "study_drift", lambda spec, name, root: object())  # every run is late
    monkeypatch.setattr(page, "older", lambda drift: drift is not None)
    monkeypatch.setattr(page, "PROJECT_ROOT", spec.folder.parent)
    world = [name for name in spec.configurations if name.startswith("world-") and spec.is_done(name)]

    def ran_at(name: str, md5: str) -> None:
        stage = {"deps": [{"path": "eric/evaluate", "md5": md5}, {"path": "eric/world", "md5": "w.dir"}]}
        (spec.outputs / name / "dvc.lock").write_text(yaml.safe_dump({"stages": {"evaluate": stage}}))

    for name in world:
        ran_at(name, "a.dir")
    assert page.one_older_code("world", spec)
    note = page.older_note(spec=spec)
    assert f"All {len(world)} configurations of this grid ran at one older code" in note and "seed1" not in note
    assert "fewer than two seeds" not in _line(page.grounded_pairs(spec=spec), "ERIC − BART")
    ran_at(world[0], "b.dir")  # one run read another eric/evaluate
    assert not page.one_older_code("world", spec)
    assert "not in the table until rerun" in page.older_note(spec=spec)
    assert page.grounded_pairs(spec=spec) == page.NONE_YET


def test_the_cost_table_counts_each_training_once_however_many_arms_took_it_from_the_run_cache(tmp_path):
    arms = {"eric": {"variants": ["eric"]}, "eric_random_states": {"variants": ["eric"]}, "bart": {"variants": ["bart"]}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {"world": {"seeds": [1, 2], "arms": arms}}},
                                                        sort_keys=False))  # the arms' order: who counts a run first
    for seed in (1, 2):
        writer = {"train_seconds": 600.0 * seed, "steps": 2000, "mlflow_run_id": f"w{seed}"}
        eric = {"train_seconds": 3000.0 + 600 * seed, "steps": 1500, "mlflow_run_id": f"e{seed}"}
        for arm, variant, stage in (("eric", "eric", eric), ("eric_random_states", "eric", eric),
                                    ("bart", "bart", {"train_seconds": 1200.0, "steps": 1500, "mlflow_run_id": f"b{seed}"})):
            _keep(tmp_path, f"world-{arm}-seed{seed}", variant, {"world": {}})
            train = tmp_path / "outputs" / f"world-{arm}-seed{seed}" / "metrics" / "train"
            train.mkdir()
            (train / f"{variant}.json").write_text(json.dumps(stage))
            (train / "mentions.json").write_text(json.dumps(writer))
    table = page.cost_table(("world",), spec=load_study(tmp_path))
    assert _line(table, "world") == "| world | ERIC | 1500 | 2 | 65 (60–70) | 2 | 15 (10–20) |"
    assert "ERIC, random states" not in table  # ERIC's training and the seed's writer: counted once
    assert table.splitlines()[-1] == "| world | BART | 1500 | 2 | 20 | 0 | – |"


def test_the_cost_table_tells_runs_apart_without_mlflow_ids(tmp_path):
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"title": "t", "grids": {"world": {
        "seeds": [1, 2], "arms": {"bart": {"variants": ["bart"]}}}}}))
    for seed in (1, 2):
        _keep(tmp_path, f"world-bart-seed{seed}", "bart", {"world": {}})
        train = tmp_path / "outputs" / f"world-bart-seed{seed}" / "metrics" / "train"
        train.mkdir()
        (train / "bart.json").write_text(json.dumps({"train_seconds": 600.0 * seed, "steps": 1500, "mlflow_run_id": None}))
    table = page.cost_table(("world",), spec=load_study(tmp_path))
    assert _line(table, "world") == "| world | BART | 1500 | 2 | 15 (10–20) | 0 | – |"
