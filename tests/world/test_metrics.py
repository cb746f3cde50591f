"""EntityWorld metrics: NMI and purity by hand, checker summaries."""

from __future__ import annotations

import math

import pytest

from eric.world.metrics import check_texts, nmi, purity, text_units
from tests.world.test_rules import SCENE


def test_nmi_and_purity_of_a_small_case_computed_by_hand():
    clusters = [0, 0, 0, 1, 1, 1]
    labels = ["a", "a", "b", "b", "b", "b"]
    # H(C) = ln 2; H(L) = -(1/3 ln 1/3 + 2/3 ln 2/3); I = sum p(c,l) ln p(c,l)/(p(c)p(l))
    h_c = math.log(2)
    h_l = -(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3))
    mi = (2 / 6) * math.log((2 / 6) / (1 / 2 * 1 / 3)) + (1 / 6) * math.log((1 / 6) / (1 / 2 * 2 / 3)) \
        + (3 / 6) * math.log((3 / 6) / (1 / 2 * 2 / 3))
    assert nmi(clusters, labels) == pytest.approx(mi / ((h_c + h_l) / 2))
    assert nmi(clusters, labels) == pytest.approx(0.3183 / 0.6648, abs=1e-3)  # 0.4787
    assert purity(clusters, labels) == pytest.approx(5 / 6)


def test_nmi_matches_scikit_learn_on_a_random_case():
    metrics = pytest.importorskip("sklearn.metrics")
    import random

    rng = random.Random(0)
    clusters = [rng.randrange(5) for _ in range(200)]
    labels = [c if rng.random() < 0.5 else rng.randrange(7) for c in clusters]
    assert nmi(clusters, labels) == pytest.approx(metrics.normalized_mutual_info_score(labels, clusters))


def test_nmi_limits():
    assert nmi([0, 0, 1, 1], ["x", "x", "y", "y"]) == pytest.approx(1.0)
    assert nmi([5, 5, 9, 9], ["y", "y", "x", "x"]) == pytest.approx(1.0)  # names do not matter
    assert nmi([0, 1, 0, 1], ["x", "x", "y", "y"]) == pytest.approx(0.0)  # independent
    assert nmi([0, 0, 0, 0], ["x", "x", "y", "y"]) == 0.0  # one state for everything
    assert nmi([0, 0], ["x", "x"]) == 1.0
    assert purity([0, 0, 0, 0], ["x", "x", "y", "y"]) == 0.5
    assert nmi([], []) is None
    with pytest.raises(ValueError):
        nmi([0], ["x", "y"])


def test_checker_summary_counts_parse_rate_violations_and_clean_stories():
    texts = [
        "<sent> <e0> traveled to the mill. <sent> <e0> met <e2>.",  # clean and valid
        "<sent> <e0> met <e2>. <sent> <e0> sang a song.",  # one violation, one unparsed
        "<sent> <e0> sang. <sent>",  # nothing parsed (the empty unit counts too)
    ]
    s = check_texts([SCENE] * 3, texts)
    assert s["units"] == 6 and s["parsed"] == 3
    assert s["parse_rate"] == pytest.approx(0.5)
    assert s["violations"] == 1 and s["violation_rate"] == pytest.approx(1 / 3)
    assert s["by_rule"] == {"not_together": 1}
    assert s["state_violations"] == 1 and s["state_violation_rate"] == pytest.approx(1 / 3)
    grounding = check_texts([SCENE], ["<sent> <e0> traveled to the lagoon. <sent> <e0> met <e0>."])
    assert grounding["violations"] == 2 and grounding["state_violations"] == 0
    assert s["clean_stories"] == pytest.approx(1 / 3) and s["valid_stories"] == pytest.approx(1 / 3)


def test_text_units_drop_special_tokens_and_cap_the_count():
    assert text_units("<sent> a. <sent> b.</s><pad>") == ["a.", "b."]
    assert text_units("<sent> a. <sent> b. <sent> c.", max_units=2) == ["a.", "b."]
