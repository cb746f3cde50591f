"""`evaluate_texts`: every Table-2 metric for a set of generations, as one flat dict.

Ratios are percentages (as in the paper's table); Zipf and Len are plain numbers.
Reference metrics (B, MSJ, MAUVE) appear only when references are given; BLEU pairs
generation i with reference i. The dict also records what produced the numbers
(tokenizer, unit cap, MAUVE featurizer and seeds), so a metrics file explains itself. MAUVE is
the mean over `MAUVE_SEEDS` k-means seeds from `seed` on; `mauve_sd`, `mauve_min`, `mauve_max`
and `mauve_scores` (one per seed) give its spread over them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eric.config import resolve_path
from eric.evaluate import metrics
from eric.evaluate.errors import EvaluationError
from eric.evaluate.mauve_score import (
    MINILM,
    Featurizer,
    cached_features,
    make_featurizer,
    mauve_spread,
)
from eric.evaluate.text import TOKENIZER_NAME, prepare, tokenize

METRIC_NAMES = (
    "B-1", "B-2", "MSJ-1", "MSJ-2", "MAUVE",
    "Rpt-16", "Rpt-32", "Rpt-64", "D-3", "D-4", "Zipf", "Len",
)  # fmt: skip
REFERENCE_FREE = ("Rpt-16", "Rpt-32", "Rpt-64", "D-3", "D-4", "Zipf", "Len")


def evaluate_with(settings, generations: Sequence[str], references: Sequence[str] | None = None,
                  inputs: Sequence[str] | None = None) -> dict:
    """`evaluate_texts` with params.yaml's evaluate section (an EvaluateParams): the one place its
    settings are unpacked, for the DVC stage and `eric evaluate`."""
    featurizer = settings.featurizer if settings.featurizer == MINILM else str(resolve_path(settings.featurizer))
    return evaluate_texts(
        generations, references, inputs, mauve=settings.mauve, featurizer=featurizer, seed=settings.seed,
        max_units=settings.max_units, zipf_top=settings.zipf_top, mauve_max_tokens=settings.mauve_max_tokens,
        feature_batch_size=settings.feature_batch_size,
        feature_cache=resolve_path(settings.feature_cache) if settings.feature_cache else None,
    )


def evaluate_texts(
    generations: Sequence[str],
    references: Sequence[str] | None = None,
    inputs: Sequence[str] | None = None,
    *,
    mauve: bool = True,
    featurizer: str | Featurizer = MINILM,
    seed: int = 42,
    max_units: int = 15,
    zipf_top: int = 5000,
    mauve_max_tokens: int = 512,
    feature_batch_size: int = 32,
    feature_cache: str | Path | None = None,
) -> dict:
    """Score generations (optionally against references); see the module docstring."""
    _check_lengths(generations, references, inputs)
    hyp_texts = [prepare(t, max_units) for t in generations]
    hyps = [tokenize(t) for t in hyp_texts]
    scores = _reference_free(hyps, zipf_top)
    about = {"n_texts": len(hyps), "n_references": 0, "max_units": max_units, "tokenizer": TOKENIZER_NAME}
    if references is not None:
        ref_texts = [prepare(t, max_units) for t in references]
        scores.update(_with_references(hyps, [tokenize(t) for t in ref_texts]))
        about["n_references"] = len(ref_texts)
        if mauve:
            featurizer = _featurizer(featurizer, mauve_max_tokens, feature_batch_size)
            score, provenance = _mauve(hyp_texts, ref_texts, inputs, featurizer, seed, feature_cache)
            scores["MAUVE"] = score
            about.update(provenance)
    return {**{k: scores[k] for k in METRIC_NAMES if k in scores}, **about}


def _check_lengths(generations, references, inputs) -> None:
    if not generations:
        raise EvaluationError("no generations to evaluate")
    for name, other in (("references", references), ("inputs", inputs)):
        if other is not None and len(other) != len(generations):
            raise EvaluationError(
                f"{len(generations)} generations but {len(other)} {name}: they must pair up"
            )


def _reference_free(hyps, zipf_top: int) -> dict:
    scores = {f"Rpt-{n}": 100 * metrics.repetition(hyps, n) for n in (16, 32, 64)}
    scores.update({f"D-{n}": 100 * metrics.distinct(hyps, n) for n in (3, 4)})
    scores["Zipf"] = metrics.zipf_coefficient(hyps, zipf_top)
    scores["Len"] = metrics.mean_length(hyps)
    return scores


def _with_references(hyps, refs) -> dict:
    scores = {f"B-{n}": 100 * metrics.bleu(hyps, refs, n) for n in (1, 2)}
    jaccards = metrics.ngram_jaccards(hyps, refs, 2)  # MSJ-1 and MSJ-2 share order 1
    scores.update({f"MSJ-{n}": 100 * metrics.geometric_mean(jaccards[:n]) for n in (1, 2)})
    return scores


def _featurizer(spec: str | Featurizer, max_tokens: int, batch_size: int) -> Featurizer:
    if isinstance(spec, str):
        return make_featurizer(spec, max_tokens=max_tokens, batch_size=batch_size)
    return spec


def _mauve(hyp_texts, ref_texts, inputs, featurizer: Featurizer, seed, cache) -> tuple[float, dict]:
    if inputs is not None:  # the paper scores input + " " + text on both sides
        inputs = [prepare(i) for i in inputs]  # prepared like the texts, as the authors do
        hyp_texts = [f"{i} {t}" for i, t in zip(inputs, hyp_texts)]
        ref_texts = [f"{i} {t}" for i, t in zip(inputs, ref_texts)]
    human = cached_features(featurizer, ref_texts, cache)
    model = cached_features(featurizer, hyp_texts, cache)
    spread = mauve_spread(human, model, seed)
    percent = [100 * s for s in spread.scores]
    provenance = {"mauve_featurizer": featurizer.name, "mauve_seed": seed, "mauve_seeds": len(spread.seeds),
                  "mauve_buckets": spread.buckets, "mauve_sd": 100 * spread.sd, "mauve_min": min(percent),
                  "mauve_max": max(percent), "mauve_scores": percent}
    return 100 * spread.mean, provenance


def matched_b1(generations: dict[str, Sequence[str]], references: Sequence[str], max_units: int = 15) -> dict[str, float]:
    """B-1 (%) of every variant at matched length (metrics.length_matched_bleu), the texts
    prepared and tokenized as for Table 2; generation i of every variant pairs with reference i."""
    refs = [tokenize(prepare(t, max_units)) for t in references]
    hyps = {v: [tokenize(prepare(t, max_units)) for t in texts] for v, texts in generations.items()}
    return {v: 100 * score for v, score in metrics.length_matched_bleu(hyps, refs, 1).items()}


def mauve_note(metrics: dict, spread: bool = False) -> str:
    """How a metrics dict's MAUVE was made (featurizer, k-means seeds), with `spread` its range."""
    if "mauve_featurizer" not in metrics:
        return "not computed"
    seed, seeds = metrics.get("mauve_seed"), metrics.get("mauve_seeds")
    if seeds is None:  # scored before the seeds' spread was recorded: one seed
        return f"{metrics['mauve_featurizer']}, seed {seed}"
    note = f"{metrics['mauve_featurizer']}, mean over {seeds} k-means seeds from {seed}"
    if spread:
        note += f" (sd {metrics['mauve_sd']:.2f}, lowest {metrics['mauve_min']:.2f}, highest {metrics['mauve_max']:.2f})"
    return note


def format_value(name: str, value: float) -> str:
    """As the paper prints it: Len whole, everything else with two decimals."""
    return f"{value:.0f}" if name == "Len" else f"{value:.2f}"
