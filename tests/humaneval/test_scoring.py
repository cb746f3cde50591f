"""Majority vote, Fleiss' kappa, the sign test and a whole study, on hand-computed cases."""

from __future__ import annotations

import pytest

from eric.humaneval.answers import Checked
from eric.humaneval.score import fleiss, has_issue, majority, score_study, sign_test
from eric.humaneval.study import Key
from eric.humaneval.table import to_markdown


def test_majority_vote_and_ties():
    assert majority(["a", "a", "tie"]) == "a"
    assert majority(["b", "b", "b"]) == "b"
    assert majority(["a", "b", "tie"]) == "tie"  # no label leads
    assert majority(["a", "a", "b", "b"]) == "tie"
    assert majority(["a", "a", "b", "tie"]) == "a"  # a plurality is enough
    assert has_issue(["yes", "yes", "no"]) and not has_issue(["yes", "no", "no"])
    assert not has_issue(["yes", "yes", "no", "no"])  # half is not a majority


def test_fleiss_kappa_matches_hand_computation():
    # counts per item (a, b, tie): [3,0,0] [2,1,0] [0,3,0] [1,0,2]
    # P_i = 1, 1/3, 1, 1/3 -> P = 2/3; p_j = 1/2, 1/3, 1/6 -> Pe = 7/18; kappa = (2/3-7/18)/(11/18) = 5/11
    votes = [["a", "a", "a"], ["a", "a", "b"], ["b", "b", "b"], ["tie", "tie", "a"]]
    assert fleiss(votes, ("a", "b", "tie")) == pytest.approx(5 / 11)
    assert fleiss([["a", "a", "a"], ["b", "b", "b"]], ("a", "b", "tie")) == pytest.approx(1.0)
    assert fleiss([["a", "a", "a"]] * 3, ("a", "b", "tie")) is None  # chance agreement 1: undefined
    assert fleiss([], ("a", "b")) is None


def test_sign_test_matches_binomial_tails():
    # 9 wins, 1 loss: two-sided p = 2 * P(X >= 9 | n=10, 1/2) = 2 * 11/1024
    assert sign_test(9, 1) == pytest.approx(22 / 1024)
    assert sign_test(1, 9) == pytest.approx(22 / 1024)
    assert sign_test(2, 1) == pytest.approx(1.0)
    assert sign_test(0, 0) is None


def _answer(side_of: dict, left: str, pref: str, issue_a: str, issue_b: str) -> dict:
    """An answer given in A/B terms, written as the annotator saw it (left/right)."""
    to_side = {"tie": "tie", left: "left", ("b" if left == "a" else "a"): "right"}
    issues = {left: "entity_issue_left", ("b" if left == "a" else "a"): "entity_issue_right"}
    return {"informativeness": to_side[pref], "coherence": to_side[pref],
            issues["a"]: issue_a, issues["b"]: issue_b}


def test_whole_study_by_hand():
    lefts = {"1": "a", "2": "b", "3": "a", "4": "b"}
    key = Key("s1", {"a": {"name": "eric"}, "b": {"name": "bart"}}, 0, 3,
              [{"item_id": i, "sample_id": i, "left": l} for i, l in lefts.items()])
    prefs = {"1": "aaa", "2": "aab", "3": "bbb", "4": ["tie", "tie", "a"]}
    issues_a = {"1": "yyn", "2": "nnn", "3": "yyy", "4": "nyn"}
    issues_b = {"1": "nnn", "2": "yyn", "3": "yny", "4": "yyy"}
    yes = {"y": "yes", "n": "no"}
    judgments = {i: [_answer(None, lefts[i], prefs[i][k], yes[issues_a[i][k]], yes[issues_b[i][k]])
                     for k in range(3)] for i in lefts}
    result = score_study(key, Checked(judgments))
    info = result["informativeness"]
    assert (info["wins"], info["losses"], info["ties"]) == (2, 1, 1)
    assert (info["win"], info["lose"], info["tie"]) == (50.0, 25.0, 25.0)
    assert info["kappa"] == pytest.approx(5 / 11)  # the same votes as the kappa case above
    assert info["p_value"] == pytest.approx(1.0)
    issues = result["entity_issues"]
    assert (issues["a"], issues["b"]) == (50.0, 75.0)  # A: items 1, 3; B: items 2, 3, 4
    assert (issues["only_a"], issues["only_b"]) == (1, 2)
    # A's votes (yes, no): [2,1] [0,3] [3,0] [1,2]: P = 2/3, Pe = 1/2, kappa = 1/3
    assert issues["kappa_a"] == pytest.approx(1 / 3)
    # B's: [0,3] [2,1] [2,1] [3,0]: P = 2/3, Pe = (49 + 25)/144, kappa = 22/70
    assert issues["kappa_b"] == pytest.approx(22 / 70)
    table = to_markdown([result], {"eric": "ERIC", "bart": "BART"}.get)
    assert "| ERIC vs. BART | 50 (κ 0.45) / 25 / 25 | 50 (κ 0.45) / 25 / 25 | 50 (κ 0.33) / 75 (κ 0.31) |" in table


def test_stars_mark_significant_wins_only():
    from eric.humaneval.table import row

    base = {"a": "eric", "b": "bart", "entity_issues": {"a": 10.0, "b": 40.0, "a_count": 1, "b_count": 4,
                                                        "kappa_a": None, "kappa_b": None, "p_value": 0.03}}
    aspect = {"win": 90.0, "lose": 10.0, "tie": 0.0, "wins": 9, "losses": 1, "kappa": 0.5, "p_value": 22 / 1024}
    cells = row({**base, "informativeness": aspect, "coherence": {**aspect, "wins": 1, "losses": 9}})
    assert cells[1].startswith("90* (κ 0.50)")
    assert cells[2].startswith("90 (κ")  # p is small but A lost: no star
    assert cells[3] == "10* / 40"
