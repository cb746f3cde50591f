"""Each Table-2 text metric on tiny examples computed by hand."""

import math

import pytest

from eric.evaluate import metrics
from eric.evaluate.text import glue_punctuation, prepare, split_units, tokenize


def toks(text: str) -> list[str]:
    return text.split()


# --- what is scored ------------------------------------------------------------


def test_model_output_markers_split_units_and_special_tokens_go():
    assert split_units("<s><sent> Ash runs . <sent> Linda hides .</s><pad><pad>") == [
        "Ash runs .",
        "Linda hides .",
    ]


def test_released_format_units_and_cap():
    text = "<mask>one<mask>two<mask>three"
    assert prepare(text, max_units=15) == "one two three"
    assert prepare(text, max_units=2) == "one two"


def test_wordpunct_tokens_keep_placeholders_whole():
    expected = ["<e0>", "meets", "<e12>", "'", "s", "dog", ",", "again", "."]
    assert tokenize("<e0> meets <e12>'s dog, again.") == expected


# --- BLEU ----------------------------------------------------------------------


def test_bleu_by_hand():
    hyp, ref = toks("the cat sat on the mat"), toks("the cat is on the mat")
    # unigrams: the x2, cat, on, mat match -> 5/6; bigrams: the cat, on the, the mat -> 3/5
    assert metrics.bleu([hyp], [ref], 1) == pytest.approx(5 / 6)
    assert metrics.bleu([hyp], [ref], 2) == pytest.approx(math.sqrt(5 / 6 * 3 / 5))


def test_bleu_is_corpus_level_with_brevity_penalty():
    pairs = [(toks("the cat sat on the mat"), toks("the cat is on the mat")), (toks("a b"), toks("a b"))]
    hyps, refs = zip(*pairs)
    # counts are pooled over the corpus: 7 matches of 8 (the mean of sentence scores would be 0.917)
    assert metrics.bleu(hyps, refs, 1) == pytest.approx(7 / 8)
    assert metrics.bleu([toks("the cat")], [toks("the cat sat")], 1) == pytest.approx(math.exp(1 - 3 / 2))


def test_length_matched_bleu_takes_away_the_reward_for_length():
    ref = toks("a b c d e f g h")
    longer, shorter = toks("a b c d x y z w"), toks("a b c d")
    # B-1 ranks the longer text first only through the brevity penalty: 4/8 against exp(1 - 8/4) * 4/4
    assert metrics.bleu([longer], [ref], 1) == pytest.approx(0.5)
    assert metrics.bleu([shorter], [ref], 1) == pytest.approx(math.exp(-1))
    # both (and the reference) cut to 4 tokens: the same words, the same score, no penalty
    assert metrics.length_matched_bleu({"long": [longer], "short": [shorter]}, [ref], 1) == {
        "long": pytest.approx(1.0), "short": pytest.approx(1.0)}
    # text by text: the second input's cut is 2 tokens, where only one system matches
    second = toks("p q r"), toks("z z"), toks("p q")
    matched = metrics.length_matched_bleu({"long": [longer, second[0]], "short": [shorter, second[1]]},
                                          [ref, second[2]], 1)
    assert matched == {"long": pytest.approx(6 / 6), "short": pytest.approx(4 / 6)}


def test_length_matched_bleu_needs_one_text_per_reference():
    with pytest.raises(ValueError, match="one text per reference"):
        metrics.length_matched_bleu({"a": [toks("x")]}, [toks("x"), toks("y")], 1)


def test_bleu_without_any_bigram_match_is_zero_not_an_error():
    # NLTK returns a denormal-scale number (about 1e-154) rather than exactly 0
    assert metrics.bleu([toks("a b")], [toks("b a")], 2) == pytest.approx(0.0, abs=1e-12)


# --- MS-Jaccard ------------------------------------------------------------------


def test_ms_jaccard_by_hand():
    hyps, refs = [toks("a b a b")], [toks("a b a c")]
    # unigrams min/max: (2+1)/(2+2+1) = 3/5; bigrams: ab 2|1, ba 1|1, ac 0|1 -> 2/4
    assert metrics.ms_jaccard(hyps, refs, 1) == pytest.approx(3 / 5)
    assert metrics.ms_jaccard(hyps, refs, 2) == pytest.approx(math.sqrt(3 / 5 * 1 / 2))


def test_ms_jaccard_normalizes_by_set_size():
    # two copies of a text have the same per-text n-gram distribution as one copy
    assert metrics.ms_jaccard([["a"], ["a"]], [["a"]], 1) == pytest.approx(1.0)
    assert metrics.ms_jaccard([toks("a b")], [toks("a c")], 2) == 0.0


# --- Rpt, Distinct, Zipf, Len ------------------------------------------------------


def test_repetition_window_is_length_minus_one():
    tokens = toks("a b c d a")  # the second "a" is 4 tokens after the first
    assert metrics.repeated_fraction(tokens, 5) == pytest.approx(1 / 5)  # window 4: a hit
    assert metrics.repeated_fraction(tokens, 4) == 0.0  # window 3: not a hit (window L would say 1/5)


def test_repetition_averages_per_text():
    texts = [toks("a a"), toks("x y z w")]  # 1/2 and 0
    assert metrics.repetition(texts, 16) == pytest.approx(0.25)


def test_distinct_counts_ngrams_within_texts_only():
    assert metrics.distinct([toks("a b c a b c")], 3) == pytest.approx(3 / 4)
    # the same tokens as two texts: no trigram spans the boundary
    assert metrics.distinct([toks("a b c"), toks("a b c")], 3) == pytest.approx(1 / 2)


def test_zipf_recovers_the_exponent_of_a_power_law():
    exponent = 1.3
    texts = [[f"w{r}"] * round(20000 * r**-exponent) for r in range(1, 60)]
    assert metrics.zipf_coefficient(texts) == pytest.approx(exponent, abs=0.01)


def test_zipf_uses_only_the_top_tokens():
    texts = [["a"] * 8 + ["b"] * 2 + ["c"]]  # top 2: slope between ranks 1 and 2 only
    assert metrics.zipf_coefficient(texts, top=2) == pytest.approx(math.log(8 / 2) / math.log(2))


def test_length_is_mean_tokens_per_text():
    assert metrics.mean_length([toks("a b c"), toks("d")]) == 2.0


def test_glue_punctuation_merges_adjacent_marks_into_one_token():
    # the authors' scorer glues marks to the word before; "Inc . ," becomes "Inc.,"
    assert glue_punctuation("Inc . , he said ! Bob ' s dog isn 't here .") == "Inc., he said! Bob's dog isn 't here."
    assert tokenize(prepare("<mask>Smith Inc . , a firm .")) == ["Smith", "Inc", ".,", "a", "firm", "."]


def test_plain_text_is_cut_to_its_first_units_as_sentences():
    from eric.evaluate.text import prepare, split_units

    plain = " ".join(f"Sentence number {i} ends here." for i in range(1, 21))
    assert len(split_units(plain)) == 20
    kept = prepare(plain, max_units=15)
    assert "number 15 ends" in kept and "number 16" not in kept
    marked = "<sent> One. Two. <sent> Three."
    assert split_units(marked) == ["One. Two.", "Three."]  # markers win: no sentence split


def test_ms_jaccard_is_the_same_whatever_the_hash_seed():
    """The n-grams are a set, iterated in an order the hash seed picks: the sums must not
    depend on it (a float sum in another order can differ in its last bits)."""
    import subprocess
    import sys

    script = ("import random; from eric.evaluate import metrics; r = random.Random(0); "
              "words = [f'w{i}' for i in range(40)]; "
              "texts = lambda: [[r.choice(words) for _ in range(r.randint(3, 30))] for _ in range(7)]; "
              "print(repr(metrics.ngram_jaccards(texts(), texts(), 2)))")
    runs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in (1, 2, 3, 4)}
    assert len(runs) == 1 and runs.pop().startswith("[0.")
