"""From judgments to the paper's Table 3 figures, for one study (system A vs B).

Per item and aspect the final label is the majority vote of its annotators: the label
most of them chose, and "tie" when no single label leads (e.g. A / B / tie). A text has
entity issues when more than half its annotators say so. Percentages are over the
scored items; Fleiss' kappa (statsmodels) is over each annotator's label per item; the
sign test (scipy's two-sided binomial test at 1/2) compares wins with losses, ties
left out, and for entity issues the items where only one system's text has them.
"""

from __future__ import annotations

import math
from collections import Counter

from eric.humaneval.answers import Checked
from eric.humaneval.questions import ASPECTS
from eric.humaneval.study import Key

OUTCOMES = ("a", "b", "tie")  # A wins, A loses, tie


def majority(labels: list[str], no_leader: str = "tie") -> str:
    """The label most annotators chose; `no_leader` when two or more share the lead."""
    counts = Counter(labels).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return no_leader
    return counts[0][0]


def has_issue(votes: list[str]) -> bool:
    """Entity issues by strict majority (more than half say yes)."""
    return 2 * votes.count("yes") > len(votes)


def fleiss(labels_per_item: list[list[str]], categories: tuple[str, ...]) -> float | None:
    """Fleiss' kappa of equally many raters per item; None when it is undefined (no items,
    or every rating in one category, where chance agreement is 1)."""
    import numpy as np
    from statsmodels.stats.inter_rater import fleiss_kappa

    if not labels_per_item:
        return None
    table = [[labels.count(c) for c in categories] for labels in labels_per_item]
    with np.errstate(divide="ignore", invalid="ignore"):
        value = float(fleiss_kappa(table, method="fleiss"))
    return None if math.isnan(value) or math.isinf(value) else value


def sign_test(successes: int, failures: int) -> float | None:
    """Two-sided sign test p-value; None with no untied pairs."""
    from scipy.stats import binomtest

    n = successes + failures
    return None if n == 0 else float(binomtest(successes, n, 0.5).pvalue)


def _to_systems(answer: dict, left: str) -> dict[str, str]:
    """One annotator's answer in terms of systems: aspect -> a/b/tie, issue_a/issue_b -> yes/no."""
    right = "b" if left == "a" else "a"
    side = {"left": left, "right": right, "tie": "tie"}
    out = {aspect: side[answer[aspect]] for aspect in ASPECTS}
    out[f"issue_{left}"] = answer["entity_issue_left"]
    out[f"issue_{right}"] = answer["entity_issue_right"]
    return out


def score_study(key: Key, checked: Checked) -> dict:
    left_of = key.left_of()
    items = {item: [_to_systems(a, left_of[item]) for a in answers] for item, answers in checked.judgments.items()}
    n = len(items)
    result: dict = {"study_id": key.study_id, "a": key.name("a"), "b": key.name("b"), "annotators": key.annotators,
                    "items_in_key": len(key.items), "items_scored": n}
    for aspect in ASPECTS:
        votes = [[a[aspect] for a in answers] for answers in items.values()]
        final = Counter(majority(v) for v in votes)
        wins, losses, ties = final["a"], final["b"], final["tie"]
        result[aspect] = {"wins": wins, "losses": losses, "ties": ties, **_shares(n, win=wins, lose=losses, tie=ties),
                          "kappa": fleiss(votes, OUTCOMES), "p_value": sign_test(wins, losses)}
    issues = {}
    flags = {}
    for system in ("a", "b"):
        votes = [[a[f"issue_{system}"] for a in answers] for answers in items.values()]
        flags[system] = [has_issue(v) for v in votes]
        issues[system] = sum(flags[system])
        issues[f"kappa_{system}"] = fleiss(votes, ("yes", "no"))
    only_a = sum(fa and not fb for fa, fb in zip(flags["a"], flags["b"]))
    only_b = sum(fb and not fa for fa, fb in zip(flags["a"], flags["b"]))
    result["entity_issues"] = {"a_count": issues["a"], "b_count": issues["b"],
                               "a": _share(issues["a"], n), "b": _share(issues["b"], n),
                               "kappa_a": issues["kappa_a"], "kappa_b": issues["kappa_b"],
                               "only_a": only_a, "only_b": only_b, "p_value": sign_test(only_b, only_a)}
    result["problems"] = {kind: checked.count(kind) for kind in sorted(checked.problems)}
    result["problem_examples"] = {kind: found[:5] for kind, found in sorted(checked.problems.items())}
    return result


def _share(count: int, n: int) -> float | None:
    return None if n == 0 else 100.0 * count / n


def _shares(n: int, **counts: int) -> dict[str, float | None]:
    return {name: _share(count, n) for name, count in counts.items()}


def flat_metrics(result: dict) -> dict[str, float]:
    """Numbers for MLflow: informativeness.win, coherence.kappa, entity_issues.a, ..."""
    out = {"items_scored": result["items_scored"]}
    for section in (*ASPECTS, "entity_issues"):
        for name, value in result[section].items():
            if isinstance(value, (int, float)) and value is not None:
                out[f"{section}.{name}"] = value
    out.update({f"problems.{kind}": count for kind, count in result["problems"].items()})
    return out
