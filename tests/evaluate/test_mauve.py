"""MAUVE on precomputed features, and the two offline featurizers."""

import numpy as np
import pytest

from eric.evaluate.errors import EvaluationError
from eric.evaluate.mauve_score import (
    MAUVE_SEEDS,
    GPT2Featurizer,
    cached_features,
    make_featurizer,
    mauve_score,
    mauve_spread,
)
from eric.evaluate.scoring import evaluate_texts


def clusters(centres: np.ndarray, n: int, seed: int) -> np.ndarray:
    """n points around the given centres (a few well separated modes)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(centres), size=n)
    return centres[picks] + 0.05 * rng.normal(size=(n, centres.shape[1]))


CENTRES = np.eye(16)[:4] * 5


def test_same_distribution_scores_high_disjoint_scores_near_zero():
    human = clusters(CENTRES, 60, seed=1)
    same = clusters(CENTRES, 60, seed=2)  # another sample of the same modes
    disjoint = clusters(-CENTRES, 60, seed=3)  # modes nowhere near the human ones
    assert mauve_score(human, same, seed=42)[0] > 0.9
    assert mauve_score(human, disjoint, seed=42)[0] < 0.05


def test_mauve_is_deterministic_given_the_seed():
    human, model = clusters(CENTRES, 50, seed=4), clusters(CENTRES[:3], 50, seed=5)
    assert mauve_score(human, model, seed=7) == mauve_score(human, model, seed=7)


def test_the_spread_is_over_consecutive_kmeans_seeds_and_moves_with_them():
    # two overlapping clouds of 40 points: k-means' start decides the buckets, as on real texts
    rng = np.random.default_rng(0)
    human, model = rng.normal(size=(40, 8)), rng.normal(0.3, 1.0, size=(40, 8))
    spread = mauve_spread(human, model, seed=5, draws=6)
    assert spread.seeds == (5, 6, 7, 8, 9, 10)
    assert spread.scores == tuple(mauve_score(human, model, seed=s)[0] for s in spread.seeds)
    assert spread.mean == pytest.approx(np.mean(spread.scores)) and spread.sd == pytest.approx(np.std(spread.scores, ddof=1))
    assert len(set(spread.scores)) > 1 and spread.sd > 0  # one seed's score is not the score
    assert mauve_spread(human, model, seed=5, draws=1).sd == 0.0
    with pytest.raises(EvaluationError, match="at least one k-means seed"):
        mauve_spread(human, model, seed=5, draws=0)


class CountingFeaturizer:
    """Deterministic features from the text itself (word counts over a tiny vocabulary)."""

    name = "bag-of-words (test)"
    vocab = ["ash", "linda", "cabin", "ship", "storm", "captain"]

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, texts):
        self.seen.extend(texts)
        counts = [[t.lower().split().count(w) for w in self.vocab] for t in texts]
        return np.array(counts, dtype=float) + 0.01 * np.arange(len(texts))[:, None]


def test_evaluate_texts_scores_input_plus_text_and_records_provenance():
    gens = ["<sent> Ash finds the cabin ."] * 10 + ["<sent> The ship meets a storm ."] * 10
    refs = ["<sent> Linda reaches the cabin ."] * 10 + ["<sent> The captain sails on ."] * 10
    inputs = [f"Prompt {i} ." for i in range(20)]
    featurizer = CountingFeaturizer()
    result = evaluate_texts(gens, refs, inputs, featurizer=featurizer, seed=3)
    assert 0.0 < result["MAUVE"] <= 100.0
    assert (result["mauve_featurizer"], result["mauve_seed"]) == ("bag-of-words (test)", 3)
    # MAUVE is the mean of the seeds' scores, each recorded with their spread
    scores = result["mauve_scores"]
    assert result["mauve_seeds"] == len(scores) == MAUVE_SEEDS
    assert result["MAUVE"] == pytest.approx(np.mean(scores))
    assert (result["mauve_min"], result["mauve_max"]) == (min(scores), max(scores))
    assert result["mauve_sd"] == pytest.approx(np.std(scores, ddof=1))
    # special tokens gone, punctuation glued as the authors' scorer does, input first
    assert "Prompt 0. Ash finds the cabin." in featurizer.seen
    assert "Prompt 0. Linda reaches the cabin." in featurizer.seen
    no_mauve = evaluate_texts(gens, refs, mauve=False)
    assert "MAUVE" not in no_mauve and "mauve_featurizer" not in no_mauve
    assert no_mauve["B-1"] == result["B-1"]


def test_feature_cache_reuses_features_of_the_same_texts_and_featurizer(tmp_path):
    featurizer = CountingFeaturizer()
    texts = ["ash cabin", "ship storm"]
    first = cached_features(featurizer, texts, tmp_path)
    again = cached_features(featurizer, texts, tmp_path)
    assert np.array_equal(first, again) and featurizer.seen == texts  # computed once
    featurizer.name = "another featurizer"
    cached_features(featurizer, texts, tmp_path)
    assert featurizer.seen == texts * 2  # a different featurizer never reads those features


def test_generations_and_references_must_pair_up():
    with pytest.raises(EvaluationError, match="3 generations but 2 references"):
        evaluate_texts(["a", "b", "c"], ["a", "b"], mauve=False)
    with pytest.raises(EvaluationError, match="no generations"):
        evaluate_texts([])


def test_minilm_featurizer_offline():
    featurizer = make_featurizer("minilm")
    features = featurizer(["Ash drives to the cabin.", "Ash drives to the cabin.", "A storm hits the ship."])
    assert features.shape == (3, 384)
    assert np.allclose(features[0], features[1])
    assert not np.allclose(features[0], features[2])
    assert "all-MiniLM-L6-v2" in featurizer.name and "256 tokens" in featurizer.name


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A random 2-layer GPT-2 with a byte-level BPE trained here: a local checkpoint folder."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2Model, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("gpt2")
    bpe = ByteLevelBPETokenizer()
    corpus = ["Ash drives to the cabin in the woods.", "A storm hits the ship at night."] * 20
    bpe.train_from_iterator(corpus, vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    tokenizer.save_pretrained(folder)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=64)
    GPT2Model(config).save_pretrained(folder)
    return folder


def test_gpt2_featurizer_takes_the_last_real_token_whatever_the_batch(tiny_gpt2):
    texts = ["Ash drives.", "A storm hits the ship at night in the woods.", "Ash"]
    one_by_one = GPT2Featurizer(tiny_gpt2, max_tokens=32, batch_size=1)(texts)
    batched = GPT2Featurizer(tiny_gpt2, max_tokens=32, batch_size=3)(texts)  # right padding inside
    assert one_by_one.shape == (3, 32)
    assert np.allclose(one_by_one, batched, atol=1e-5)
    assert "gpt2" in make_featurizer(str(tiny_gpt2)).name


def test_gpt2_featurizer_truncates_to_max_tokens(tiny_gpt2):
    featurizer = GPT2Featurizer(tiny_gpt2, max_tokens=4, batch_size=2)
    long = "Ash drives to the cabin in the woods. " * 20  # far beyond 64 positions
    assert featurizer([long]).shape == (1, 32)


def test_missing_or_broken_gpt2_folder_is_a_one_line_error(tmp_path):
    with pytest.raises(EvaluationError, match="not 'minilm' and not a local GPT-2 folder") as info:
        make_featurizer(str(tmp_path / "gpt2"))
    assert "\n" not in str(info.value)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EvaluationError, match="cannot load a GPT-2 checkpoint"):
        make_featurizer(str(tmp_path))
