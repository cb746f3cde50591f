"""The paper's text metrics (Table 2), on token lists from `eric.evaluate.text`.

Definitions: docs/paper-notes.md ("Evaluation"). Ratios are
returned as fractions in [0, 1]; the caller scales them to percentages for display.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence

import numpy as np
from nltk.translate.bleu_score import corpus_bleu

Tokens = Sequence[str]


def ngrams(tokens: Tokens, n: int) -> list[tuple[str, ...]]:
    """The n-grams of one text (never across texts)."""
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def bleu(hypotheses: Sequence[Tokens], references: Sequence[Tokens], n: int) -> float:
    """BLEU-n: NLTK corpus_bleu, one reference per text, uniform weights, no smoothing."""
    weights = tuple([1.0 / n] * n)
    with warnings.catch_warnings():
        # NLTK warns (and returns 0) when an order has no match: that 0 is the answer.
        warnings.simplefilter("ignore")
        score = corpus_bleu([[list(r)] for r in references], [list(h) for h in hypotheses], weights)
    return float(score)


def length_matched_bleu(hypotheses: dict[str, Sequence[Tokens]], references: Sequence[Tokens], n: int) -> dict[str, float]:
    """BLEU-n of every system on equal lengths: text i of every system and reference i are cut
    to the shortest of them, so each system is scored on the same tokens' worth of every text
    and the brevity penalty is 1 (BLEU's reward for length is gone; precision is left)."""
    systems = list(hypotheses)
    if any(len(hypotheses[s]) != len(references) for s in systems):
        raise ValueError("every system needs one text per reference")
    cuts = [min(len(ref), *(len(hypotheses[s][i]) for s in systems)) for i, ref in enumerate(references)]
    refs = [ref[:cut] for ref, cut in zip(references, cuts)]
    return {s: bleu([h[:cut] for h, cut in zip(hypotheses[s], cuts)], refs, n) for s in systems}


def _mean_ngram_counts(texts: Sequence[Tokens], n: int) -> dict[tuple[str, ...], float]:
    counts: Counter = Counter()
    for tokens in texts:
        counts.update(ngrams(tokens, n))
    # Per-text averages make sets of different sizes comparable.
    return {gram: c / len(texts) for gram, c in counts.items()}


def ngram_jaccards(hypotheses: Sequence[Tokens], references: Sequence[Tokens], n: int) -> list[float]:
    """Multiset Jaccard index of the per-text n-gram counts, for orders 1..n."""
    per_order = []
    for order in range(1, n + 1):
        p = _mean_ngram_counts(hypotheses, order)
        q = _mean_ngram_counts(references, order)
        grams = p.keys() | q.keys()  # a set: its order varies with the hash seed, so sum exactly (fsum)
        union = math.fsum(max(p.get(g, 0.0), q.get(g, 0.0)) for g in grams)
        inter = math.fsum(min(p.get(g, 0.0), q.get(g, 0.0)) for g in grams)
        per_order.append(inter / union if union else 0.0)
    return per_order


def geometric_mean(values: Sequence[float]) -> float:
    if min(values) == 0.0:
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ms_jaccard(hypotheses: Sequence[Tokens], references: Sequence[Tokens], n: int) -> float:
    """MS-Jaccard-n: geometric mean over orders 1..n of the multiset Jaccard index."""
    return geometric_mean(ngram_jaccards(hypotheses, references, n))


def repeated_fraction(tokens: Tokens, length: int) -> float:
    """Share of tokens that also occur among the previous `length - 1` tokens."""
    if not tokens:
        return 0.0
    window = length - 1  # the published numbers match only this window
    last_seen: dict[str, int] = {}
    hits = 0
    for i, token in enumerate(tokens):
        previous = last_seen.get(token)
        if previous is not None and i - previous <= window:
            hits += 1
        last_seen[token] = i
    return hits / len(tokens)


def repetition(texts: Sequence[Tokens], length: int) -> float:
    """Rpt-L: `repeated_fraction` averaged over texts."""
    return float(np.mean([repeated_fraction(t, length) for t in texts])) if texts else 0.0


def distinct(texts: Sequence[Tokens], n: int) -> float:
    """Distinct-n: distinct n-grams / all n-grams, over all texts together."""
    counts: Counter = Counter()
    for tokens in texts:
        counts.update(ngrams(tokens, n))
    total = sum(counts.values())
    return len(counts) / total if total else 0.0


def zipf_coefficient(texts: Sequence[Tokens], top: int = 5000) -> float:
    """Minus the least-squares slope of log frequency on log rank, `top` tokens."""
    counts = Counter(token for tokens in texts for token in tokens)
    freqs = np.array(sorted(counts.values(), reverse=True)[:top], dtype=float)
    if len(freqs) < 2:
        return float("nan")  # a line through one point has no slope
    ranks = np.arange(1, len(freqs) + 1, dtype=float)
    slope, _ = np.polyfit(np.log(ranks), np.log(freqs), 1)
    return float(-slope)


def mean_length(texts: Sequence[Tokens]) -> float:
    """Len: mean tokens per text."""
    return float(np.mean([len(t) for t in texts])) if texts else 0.0
