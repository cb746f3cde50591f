"""PlanAhead: the gated mixture and its NLL by hand, keyword extraction, the tied plan head, loading
for sampling, sampling from the mixture, building from params with the collator; the shared
architecture suite (tests/model/architecture_suite.py)."""

from __future__ import annotations

import math

import pytest
import torch

from eric.config import ModelParams
from eric.data.collate import StageOneCollator
from eric.data.tokenizer import special_token_ids, train_bpe
from eric.generate.loading import load_stage_one
from eric.model.plan_ahead import (
    IGNORE, KEYWORD_POS, KeywordTargets, PlanAheadConfig, PlanAheadForConditionalGeneration, keyword_loss, letter_pos,
    mixture_log_probs, mixture_nll,
)
from eric.model.variants import build_model
from tests.model.architecture_suite import BART_SWITCHES, ArchitectureTests
from tests.model.conftest import EOS, SENT, make_batch, tiny_config, tiny_model
CORPUS = [
    "<sent> The miller and the miller's son fish. <sent> <e0> sells the mill.",
    "<sent> The dragon burns the village. <sent> <e0> fights the dragon with <e1>.",
    "<sent> A storm hits the village and the mill. <sent> <e0> and <e1> hide.",
]


def tiny_plan_ahead(seed: int = 0, **overrides) -> PlanAheadForConditionalGeneration:
    torch.manual_seed(seed)
    fields = PlanAheadConfig.__dataclass_fields__
    base = {k: v for k, v in tiny_config(**BART_SWITCHES).to_dict().items() if k in fields}
    return PlanAheadForConditionalGeneration(PlanAheadConfig(**{**base, **overrides}))


def _names(model) -> set[str]:
    return {n for n, _ in model.named_parameters()}


def test_mixture_and_its_nll_match_a_hand_computation():
    lm = torch.log(torch.tensor([[0.25, 0.75]]))  # p_LM = (1/4, 3/4)
    plan = torch.zeros(1, 2)  # p_plan = (1/2, 1/2)
    gate = torch.tensor([[math.log(3.0)]])  # g = sigmoid(ln 3) = 3/4
    probs = mixture_log_probs(lm, plan, gate).exp()
    # p = 3/4 (1/4, 3/4) + 1/4 (1/2, 1/2) = (5/16, 11/16)
    torch.testing.assert_close(probs, torch.tensor([[5 / 16, 11 / 16]]))
    nll = torch.nn.functional.cross_entropy(mixture_log_probs(lm, plan, gate), torch.tensor([0]))
    assert nll.item() == pytest.approx(-math.log(5 / 16), abs=1e-6)
    # stable where the naive log(g p_LM + (1 - g) p_plan) underflows: g = 1 - e^-200, p_LM(0) ~ e^-300
    far = mixture_log_probs(torch.tensor([[-300.0, 0.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[200.0]]))
    assert far[0, 0].item() == pytest.approx(-200 - math.log(2), abs=1e-4)  # the plan's share survives
    assert torch.isfinite(far).all()
    # the training loss's gold-token shortcut is the cross-entropy of the full mixture
    g = torch.Generator().manual_seed(0)
    lm, plan, gate = torch.randn(2, 3, 7, generator=g), torch.randn(2, 7, generator=g), torch.randn(2, 3, 1, generator=g)
    labels = torch.tensor([[1, 6, IGNORE], [0, 3, 3]])
    full = torch.nn.functional.cross_entropy(mixture_log_probs(lm, plan[:, None], gate).view(-1, 7), labels.view(-1))
    torch.testing.assert_close(mixture_nll(lm, plan, gate, labels), full)


def test_keyword_loss_is_the_mean_keyword_nll_per_target():
    plan = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]))
    keywords = torch.tensor([[0, 1], [2, IGNORE], [IGNORE, IGNORE]])  # row 3 has none: left out
    expected = ((-math.log(0.5) - math.log(0.25)) / 2 + -math.log(0.8)) / 2
    assert keyword_loss(plan, keywords).item() == pytest.approx(expected, abs=1e-6)
    assert keyword_loss(plan[2:], keywords[2:]).item() == 0.0


def test_forward_loss_is_the_mixture_nll_plus_the_weighted_keyword_loss():
    model, batch = tiny_plan_ahead(plan_weight=0.5), make_batch()
    keyword_ids = torch.tensor([[30, 31, IGNORE], [40, IGNORE, IGNORE], [50, 51, 52]])
    out = model(**batch, keyword_ids=keyword_ids)
    hidden = out.decoder_last_hidden_state
    g = torch.sigmoid(model.plan_gate(hidden))
    p_lm = torch.softmax(model.lm_logits(hidden), -1)
    p_plan = torch.softmax(out.plan_logits, -1)[:, None]
    labels = batch["labels"]
    mixture = (g * p_lm + (1 - g) * p_plan)[labels != -100]
    by_hand = -mixture.gather(1, labels[labels != -100][:, None]).log().mean()
    torch.testing.assert_close(out.lm_loss, by_hand)
    torch.testing.assert_close(out.plan_loss, keyword_loss(out.plan_logits, keyword_ids))
    torch.testing.assert_close(out.loss, out.lm_loss + 0.5 * out.plan_loss)
    assert {"plan_loss", "gate_mean"} <= set(out.loss_terms())
    out.loss.backward()
    assert model.plan_head.out.weight.grad.abs().sum() > 0 and model.plan_gate.weight.grad.abs().sum() > 0


def test_without_keywords_the_loss_is_the_lm_loss_of_the_mixture():
    out = tiny_plan_ahead()(**make_batch())
    assert out.plan_loss is None and torch.equal(out.loss, out.lm_loss)
    torch.testing.assert_close(out.logits.exp().sum(-1), torch.ones(out.logits.shape[:2]))


def test_keyword_extraction_on_a_tiny_corpus(tmp_path):
    tokenizer = train_bpe(CORPUS * 3, vocab_size=300, max_entities=5)
    keywords = KeywordTargets.fit(tokenizer, CORPUS, num_keywords=2, keyword_pos="any")
    # the/and/with: stop words; idf = ln(4 / (1 + df)) + 1: <e0> (df 3) 1, village, mill, <e1> (df 2) 1.29,
    # the others (df 1) 1.69; score tf * idf, ties by first occurrence
    assert keywords.words(CORPUS[0]) == ["miller", "son"]  # miller: tf 2 (miller's); son before fish
    assert keywords.words(CORPUS[1]) == ["dragon", "burns"]
    assert keywords.words(CORPUS[2]) == ["storm", "hits"]
    assert KeywordTargets.fit(tokenizer, CORPUS, 4, "any").words(CORPUS[1]) == ["dragon", "burns", "fights", "village"]
    # the tokens covering every occurrence of the chosen words, nothing else
    ids = keywords.token_ids(CORPUS[1])
    # " burns" is "Ġ bu r ns" in this tiny BPE: the bare space token is no part of the word
    assert tokenizer.convert_ids_to_tokens(ids) == ["Ġdragon", "bu", "r", "ns"]
    assert all(t in tokenizer(CORPUS[1], add_special_tokens=False)["input_ids"] for t in ids)
    for mode in KEYWORD_POS:  # placeholders are candidates (they stand for names), <sent> is not a word
        placeholders = KeywordTargets.fit(tokenizer, CORPUS, 10, mode).words(CORPUS[1])
        assert "<e1>" in placeholders and "sent" not in placeholders and "the" not in placeholders
    batch = keywords.for_rows([{"id": "a", "target": CORPUS[1]}, {"id": "b", "target": "<sent> the and"}])
    assert batch[0].tolist()[: len(ids)] == ids and (batch[1] == IGNORE).all()
    assert keywords.cache["a"] == ids  # computed once per row id


POS_CORPUS = [
    "<sent> The gloomy knight rides slowly to a gloomy castle. <sent> The castle is gloomy and <e0> waits.",
    "<sent> The knight sleeps. <sent> <e0> waits.",
    "<sent> A castle burns. <sent> <e0> waits.",
]


def test_noun_verb_keywords_are_the_nouns_and_verbs_in_tf_idf_order():
    tokenizer = train_bpe(POS_CORPUS * 3, vocab_size=300, max_entities=5)
    # idf = ln(4 / (1 + df)) + 1 over every candidate whatever its tag: df 1 (gloomy, rides, slowly) 1.693,
    # df 2 (knight, castle) 1.288, df 3 (<e0>, waits) 1. POS_CORPUS[0]: gloomy 3 x 1.693 = 5.08 (an adjective
    # each time), castle 2 x 1.288 = 2.58, rides 1.693 = slowly 1.693 (an adverb; rides first), knight 1.288,
    # <e0> 1 = waits 1 (<e0> first)
    target = POS_CORPUS[0]
    every = ["gloomy", "castle", "rides", "slowly", "knight", "<e0>", "waits"]
    assert KeywordTargets.fit(tokenizer, POS_CORPUS, 10, "any").words(target) == every
    nouns_verbs = KeywordTargets.fit(tokenizer, POS_CORPUS, 10, "noun_verb")
    assert nouns_verbs.words(target) == [w for w in every if w not in ("gloomy", "slowly")]  # same order
    assert KeywordTargets.fit(tokenizer, POS_CORPUS, 4, "any").words(target) == ["gloomy", "castle", "rides", "slowly"]
    top = KeywordTargets.fit(tokenizer, POS_CORPUS, 4)  # noun_verb: the default
    assert top.keyword_pos == "noun_verb" and top.words(target) == ["castle", "rides", "knight", "<e0>"]
    assert "Ġgloomy" not in tokenizer.convert_ids_to_tokens(top.token_ids(target))
    # the tags: one tagger pass over the training targets in fit, the same as tagging a text alone
    assert set(top.allowed) == set(POS_CORPUS)
    assert letter_pos([target]) == letter_pos(POS_CORPUS)[:1]
    assert letter_pos([target])[0][:5] == ["DET", "ADJ", "NOUN", "VERB", "ADV"]  # The gloomy knight rides slowly
    # the tagger reads a placeholder as a name and no special token: "<e12>'s brother" is a name's brother
    named = letter_pos(["<sent> <e12>'s brother opened the door.", "Ann's brother opened the door."])
    assert named[0] == named[1][1:] == ["PART", "NOUN", "VERB", "DET", "NOUN"]
    # a row's ids are cached by row id, then its tags are let go; a target not seen in fit is tagged when met
    unseen = "<sent> The gloomy dragon sleeps."
    batch = top.for_rows([{"id": "a", "target": target}, {"id": "b", "target": unseen}])
    assert top.cache == {"a": top.token_ids(target), "b": top.token_ids(unseen)}
    assert batch[0].tolist()[: len(top.cache["a"])] == top.cache["a"] and top.words(unseen) == ["dragon", "sleeps"]
    with pytest.raises(ValueError, match="keyword_pos"):
        KeywordTargets.fit(tokenizer, POS_CORPUS, 4, "adjectives")


def test_tying_the_plan_head_drops_its_output_matrix_and_the_added_count_is_by_hand():
    bart, plan = tiny_model(**BART_SWITCHES), tiny_plan_ahead()
    tied = tiny_plan_ahead(tie_plan_head=True)
    assert _names(plan) - _names(tied) == {"plan_head.out.weight"}
    d, v = plan.config.d_model, plan.config.vocab_size
    extra = sum(p.numel() for p in plan.parameters()) - sum(p.numel() for p in bart.parameters())
    assert extra == d * d + d + d * v + v + d + 1


def test_load_stage_one_gives_back_the_saved_plan_ahead_model(tmp_path):
    tokenizer = train_bpe(CORPUS * 3, vocab_size=300, max_entities=5)
    model = tiny_plan_ahead(num_keywords=7, vocab_size=len(tokenizer)).eval()
    with torch.no_grad():
        model.plan_head.bias.normal_()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, _ = load_stage_one(tmp_path)
    assert isinstance(loaded, PlanAheadForConditionalGeneration) and loaded.config.num_keywords == 7
    batch = make_batch()
    keyword_ids = torch.tensor([[30], [31], [32]])
    a, b = model(**batch, keyword_ids=keyword_ids), loaded(**batch, keyword_ids=keyword_ids)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.loss, b.loss)


def _gated_model(gate_bias: float) -> PlanAheadForConditionalGeneration:
    model = tiny_plan_ahead().eval()
    with torch.no_grad():
        model.final_logits_bias[0, SENT] = 0.2
        model.plan_gate.bias.fill_(gate_bias)
    return model


def test_generation_samples_from_the_mixture_at_every_step():
    batch = make_batch(rows=2)
    # g -> 0: every step is the plan's argmax (one token per input, fixed for the call)
    model = _gated_model(-50.0)
    plan = model.plan_logits(model.encode(batch["input_ids"], batch["attention_mask"]), batch["attention_mask"])
    out = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=8, do_sample=False)
    expected = plan.argmax(-1)
    assert (out.sequences[:, 3:] == expected[:, None]).all()  # after the forced </s> <s> <sent>
    # greedy generation agrees with the teacher-forced mixture of the training forward
    model = _gated_model(0.0)
    seq = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=12, do_sample=False).sequences
    forward = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], decoder_input_ids=seq[:, :-1])
    live = torch.ones_like(seq[:, 1:], dtype=torch.bool)
    live[:, 1:] = (seq[:, 1:-1] != EOS).cumprod(1).bool()
    live[:, :2] = False
    assert torch.equal(forward.logits.argmax(-1)[live], seq[:, 1:][live])
    # coherence scoring's per-row logits are the same mixture
    torch.testing.assert_close(model.row_logits(forward, 1, slice(2, 6)), forward.logits[1, 2:6])


def test_builds_from_params_and_trains_on_collated_batches():
    tokenizer = train_bpe(CORPUS * 3, vocab_size=300, max_entities=5)
    params = ModelParams(size="tiny", max_entities=5, variants={
        "plan_ahead": {"kind": "plan_ahead", "options": {"num_keywords": 3, "tie_plan_head": True}}})
    torch.manual_seed(0)
    model = build_model(params, "plan_ahead", tokenizer)
    assert isinstance(model, PlanAheadForConditionalGeneration) and model.config.num_keywords == 3
    assert model.plan_head.out is None and not model.config.use_state
    rows = [{"id": str(i), "source": "A story.", "target": t, "unit_entities": [[], []]} for i, t in enumerate(CORPUS)]
    rows[1]["unit_entities"] = [[], ["<e0>", "<e1>"]]
    collator = StageOneCollator(tokenizer, max_entities=5)
    collator.extras = PlanAheadForConditionalGeneration.collator_extras(model.config, tokenizer, rows)
    batch = collator(rows)
    assert batch["keyword_ids"].shape[0] == 3 and (batch["keyword_ids"][:, 0] >= 0).all()
    out = model(**batch)
    assert out.plan_loss is not None and torch.isfinite(out.loss)
    with pytest.raises(ValueError, match="IDF"):
        PlanAheadForConditionalGeneration.batch_extras(model.config, tokenizer, rows, batch)


class TestPlanAheadArchitecture(ArchitectureTests):
    kind = "plan_ahead"
    options = {"num_keywords": 3, "tie_plan_head": True}
    option_defaults = {"plan_weight": 1.0, "keyword_pos": "noun_verb"}
    invalid_options = ({"num_keywords": 0}, {"keyword_pos": "adjectives"})
    added_parameters = ("plan_head.dense.weight", "plan_head.dense.bias", "plan_head.out.weight", "plan_head.bias",
                        "plan_gate.weight", "plan_gate.bias")
    round_trip_overrides = ({}, {"tie_plan_head": False})

    def tiny(self, seed: int = 0, **overrides):
        return tiny_plan_ahead(seed, **overrides)

    def extras(self, model, batch):
        return {"keyword_ids": torch.tensor([[30, 31, IGNORE], [40, IGNORE, IGNORE], [50, 51, 52]])}

    def sampling_model(self):
        return _gated_model(0.0)
