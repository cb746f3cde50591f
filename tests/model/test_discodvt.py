"""DiscoDVT: each loss by hand, the quantizer round trip, the phases, KV-cached sampling of codes;
the shared architecture suite (tests/model/architecture_suite.py)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F
from transformers import BartConfig

from eric.data.discourse import DIRECTED_RELATIONS, MARKERS, directed_relation
from eric.model.discodvt import (
    DiscoDVTConfig,
    DiscoDVTForConditionalGeneration,
    Quantizer,
    discourse_loss,
    mean_code_entropy,
    prior_loss,
    prior_sequences,
    unit_means,
    vq_losses,
)
from eric.train.meters import loss_terms
from tests.model.architecture_suite import BART_SWITCHES, ArchitectureTests
from tests.model.conftest import BOS, EOS, SENT, make_batch, tiny_config
NEW_PARTS = ("code_posterior", "code_upsampler", "code_prior", "relation_head")


def tiny_dvt(seed: int = 0, **overrides) -> DiscoDVTForConditionalGeneration:
    torch.manual_seed(seed)
    base = {k: v for k, v in tiny_config(**BART_SWITCHES).to_dict().items() if k in DiscoDVTConfig.__dataclass_fields__}
    options = dict(num_codes=8, downsample_layers=2, prior_layers=1)
    return DiscoDVTForConditionalGeneration(DiscoDVTConfig(**{**base, **options, **overrides}))


def dvt_batch(**kwargs) -> dict:
    batch = make_batch(**kwargs)  # units (3, 4, 2): relation pairs 2, 3, 1
    batch["relation_labels"] = torch.tensor([[0, -100, -100], [3, 1, -100], [-100, -100, -100]])
    return batch


def test_vq_losses_and_nearest_code_by_hand():
    q = Quantizer(3, 2)
    q.codebook.data = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    latents = torch.tensor([[[1.5, 0.2], [0.1, 0.1], [0.2, 2.0]]], requires_grad=True)
    indices = q.nearest(latents)
    assert indices.tolist() == [[1, 0, 2]]
    quantized = q.lookup(indices)
    # squared errors per code: 0.25 + 0.04, 0.01 + 0.01, 0.04 + 1.0; means over codes x dims
    codebook, commitment = vq_losses(latents, quantized, torch.tensor([[True, True, True]]))
    assert codebook.item() == pytest.approx(1.35 / 6) and commitment.item() == pytest.approx(1.35 / 6)
    codebook, commitment = vq_losses(latents, quantized, torch.tensor([[True, True, False]]))
    assert codebook.item() == pytest.approx(0.31 / 4)
    codebook.backward(retain_graph=True)  # the codebook term moves only the codes
    assert latents.grad is None and q.codebook.grad[1].abs().sum() > 0 and q.codebook.grad[2].abs().sum() == 0
    commitment.backward()  # the commitment term moves only the latents
    assert latents.grad[0, 0].abs().sum() > 0 and latents.grad[0, 2].abs().sum() == 0


def test_every_code_quantizes_back_to_itself():
    model = tiny_dvt()
    quantizer = model.code_posterior.quantizer
    codes = torch.arange(model.config.num_codes)[None]
    assert torch.equal(quantizer.nearest(quantizer.lookup(codes)), codes)


def test_prior_targets_and_loss_by_hand():
    codes = torch.tensor([[3, 1, -1], [2, -1, -1]])
    inputs, targets = prior_sequences(codes, codes >= 0, num_codes=4)  # EOS = 4, BOS = 5
    assert inputs.tolist() == [[5, 3, 1, 0], [5, 2, 0, 0]]
    assert targets.tolist() == [[3, 1, 4, -100], [2, 4, -100, -100]]
    assert prior_loss(torch.zeros(2, 4, 5), targets).item() == pytest.approx(math.log(5))
    # one row, K = 2: p(code 1) = 1 / (1 + 1 + 2) at step 1, p(EOS) = 1/3 at step 2
    logits = torch.tensor([[[0.0, 0.0, math.log(2)], [0.0, 0.0, 0.0]]])
    loss = prior_loss(logits, torch.tensor([[1, 2]]))
    assert loss.item() == pytest.approx((math.log(4) + math.log(3)) / 2)


def test_unit_means_and_discourse_loss_by_hand():
    labels = torch.tensor([[BOS, SENT, 30, 31, SENT, 32, EOS, -100]])
    vectors = torch.arange(8, dtype=torch.float)[None, :, None]  # position t holds t
    means, exists = unit_means(vectors, labels, SENT)
    assert means[0, :, 0].tolist() == [2.0, 5.0]  # positions 1-3 and 4-6 (</s> in the last unit)
    assert exists.tolist() == [[True, True]]
    logits = torch.tensor([[[0.0, math.log(3)], [5.0, 0.0]]])
    assert discourse_loss(logits, torch.tensor([[1, -100]])).item() == pytest.approx(math.log(4 / 3))
    assert discourse_loss(logits, torch.tensor([[-100, -100]])) is None


def test_mean_code_entropy_is_per_text_over_real_codes_by_hand():
    # K = 2; text 1: one code (1, 0); text 2: one code (0, 1) and a padding code (1, 0);
    # text 3: (1/2, 1/2) and (1, 0) -> mean (3/4, 1/4)
    inf = float("inf")
    logits = torch.tensor([[[0.0, -inf], [0.0, 0.0]], [[-inf, 0.0], [0.0, -inf]], [[0.0, 0.0], [0.0, -inf]]])
    mask = torch.tensor([[True, False], [True, False], [True, True]])
    h3 = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    # per text: 0, 0, h3 (one batch-wide mean distribution would give log 2 for texts 1-2)
    assert mean_code_entropy(logits, mask).item() == pytest.approx(h3 / 3)
    assert mean_code_entropy(logits[:2], mask[:2]).item() == pytest.approx(0.0, abs=1e-6)
    assert mean_code_entropy(logits, torch.zeros_like(mask)).item() == 0.0


def test_the_entropy_term_is_minus_alpha_times_the_entropy_of_the_soft_assignments():
    model, batch = tiny_dvt(entropy_weight=0.3), dvt_batch()
    out = model(**batch)
    post = model.posterior(batch["labels"])
    distances = torch.cdist(post.latents.float(), model.code_posterior.quantizer.codebook.float()) ** 2
    assert out.entropy_loss.item() == pytest.approx(-mean_code_entropy(-distances, post.mask).item(), rel=1e-4)
    assert out.entropy_loss.item() < 0 and "entropy_loss" in loss_terms(out)
    expected = (out.lm_loss + out.codebook_loss + 0.25 * out.commitment_loss + 0.1 * out.discourse_loss
                + 0.3 * out.entropy_loss)
    assert torch.allclose(out.loss, expected)
    assert tiny_dvt(entropy_weight=0.0)(**batch).entropy_loss is None


def test_gumbel_temperature_anneals_by_hand():
    posterior = tiny_dvt(posterior="gumbel").code_posterior  # tau_0 0.9, min 0.1, rate 1e-4
    for step, tau in ((0, 0.9), (10_000, 0.9 * math.exp(-1)), (30_000, 0.1)):  # 0.9 e^-3 = 0.045 < 0.1
        posterior.step.fill_(step)
        assert posterior.temperature() == pytest.approx(tau)


def test_gumbel_posterior_reads_a_soft_mixture_of_codes_in_training_and_the_argmax_code_in_eval():
    model, batch = tiny_dvt(posterior="gumbel", entropy_weight=0.2, discourse_weight=0.5), dvt_batch()
    posterior = model.code_posterior
    d, k = model.config.d_model, model.config.num_codes
    with torch.no_grad():  # code k = the k-th basis vector: the decoder's input shows the weights
        posterior.quantizer.codebook.copy_(torch.eye(k, d))
    model.eval()
    post = model.posterior(batch["labels"])
    assert torch.equal(post.indices, torch.where(post.mask, post.logits.argmax(-1), -1))
    assert torch.equal(post.straight_through[..., :k], F.one_hot(post.logits.argmax(-1), k).float())
    assert int(posterior.step) == 0  # eval forwards do not anneal
    model.train()
    out = model(**batch)
    assert int(posterior.step) == 1
    post = model.posterior(batch["labels"])
    weights = post.straight_through[..., :k]
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:2])) and bool((weights > 0).all())
    assert not torch.equal(weights, weights.round())  # relaxed (DiscoDVT's hard = False), not one-hot
    assert out.codebook_loss is None and out.commitment_loss is None
    assert torch.allclose(out.loss, out.lm_loss + 0.5 * out.discourse_loss + 0.2 * out.entropy_loss)
    out.loss.backward()
    assert posterior.to_logits.weight.grad.abs().sum() > 0 and posterior.quantizer.codebook.grad.abs().sum() > 0


def test_directed_relations_are_discodvts_twenty_by_hand():
    assert len(DIRECTED_RELATIONS) == 20 and DIRECTED_RELATIONS[0] == "none" and "then21" not in DIRECTED_RELATIONS
    assert DIRECTED_RELATIONS[1:5] == ("after12", "after21", "also12", "also21")
    assert directed_relation("He fell.", "Then he rose.") == "then12"
    assert directed_relation("He fell", "because he slipped.") == "because12"
    assert directed_relation("Because he slipped,", "he fell.") == "because21"
    assert directed_relation("Because he slipped.", "He fell.") == "none"  # the marker's sentence ended
    assert directed_relation("Then, in the end,", "he rose.") == "none"  # then21 is no class
    assert directed_relation("He fell,", "but he rose.") == "none"  # "but" is not one of its markers
    assert directed_relation("He fell.", "He rose.") == "none"


def test_relation_labels_come_from_the_opening_markers_of_kept_units():
    labels = torch.tensor([[BOS, SENT, 30, SENT, 31, SENT, 32, EOS], [BOS, SENT, 30, SENT, 31, EOS, -100, -100]])
    rows = [{"target": "<sent> He came home. <sent> But she left. <sent> Then it rained."},
            {"target": "<sent> A storm. <sent> Nobody came. <sent> So it ended."}]  # row 2: unit 3 cut
    for kind, expected in (("marker", [[MARKERS.index("but"), MARKERS.index("then")], [-100, -100]]),
                           ("class", [[2, 0], [-100, -100]]),  # comparison, temporal
                           ("directed", [[0, DIRECTED_RELATIONS.index("then12")], [0, -100]])):  # none supervised
        config = tiny_dvt(relation_labels=kind).config
        out = DiscoDVTForConditionalGeneration.batch_extras(config, None, rows, {"labels": labels})
        assert out["relation_labels"].tolist() == expected


def test_loss_is_reconstruction_plus_vq_plus_discourse():
    model, batch = tiny_dvt(commitment_weight=0.5, discourse_weight=2.0, entropy_weight=0.0), dvt_batch()
    out = model(**batch)
    expected = out.lm_loss + out.codebook_loss + 0.5 * out.commitment_loss + 2.0 * out.discourse_loss
    assert torch.allclose(out.loss, expected)
    assert {"codebook_loss", "commitment_loss", "discourse_loss"} <= set(loss_terms(out))  # the loop logs them
    assert out.state_ids.shape == (3, math.ceil(batch["labels"].shape[1] / 4)) and 0 < out.codebook_usage <= 1
    out.loss.backward()
    grads = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert any(n.startswith("relation_head") for n in grads) and "code_posterior.quantizer.codebook" in grads
    assert not any(n.startswith("code_prior") for n in grads)  # the prior learns in its own phase
    plain = model(**{k: v for k, v in batch.items() if k != "relation_labels"})  # e.g. the plain collator
    assert plain.discourse_loss is None
    assert torch.allclose(plain.loss, plain.lm_loss + plain.codebook_loss + 0.5 * plain.commitment_loss)


def test_without_labels_the_decoder_reads_the_priors_greedy_codes():
    model, batch = tiny_dvt().eval(), dvt_batch()
    decoder_input_ids = batch["labels"].clamp(min=1)
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                decoder_input_ids=decoder_input_ids)
    encoded = model.encode(batch["input_ids"], batch["attention_mask"])
    codes = model.sample_codes(encoded, batch["attention_mask"], do_sample=False,
                               max_codes=math.ceil(decoder_input_ids.shape[1] / 4))
    given = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                  decoder_input_ids=decoder_input_ids, codes=codes)
    assert out.loss is None and torch.allclose(out.logits, given.logits)
    no_codes = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     decoder_input_ids=decoder_input_ids, codes=torch.full_like(codes, -1))
    assert not torch.allclose(out.logits, no_codes.logits)  # the codes reach the decoder


def test_the_prior_phase_trains_only_the_prior_on_the_posteriors_codes():
    model, batch = tiny_dvt(dropout=0.3), dvt_batch()
    model.set_training_phase("prior")
    model.train()
    out = model(**batch)
    with torch.no_grad():
        model.eval()
        post = model.posterior(batch["labels"])
        inputs, targets = prior_sequences(post.indices, post.mask, model.config.num_codes)
        encoded = model.encode(batch["input_ids"], batch["attention_mask"])
        model.train()
    assert torch.equal(out.state_ids, post.indices)  # dropout off in the frozen posterior
    assert out.prior_loss is out.loss and out.lm_loss is None
    model.code_prior.eval()
    logits = model.code_prior(inputs, encoded, batch["attention_mask"])
    assert torch.allclose(model(**batch).loss, prior_loss(logits, targets))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith("code_prior.") for n in trainable)
    model.set_training_phase("main")
    assert not any(p.requires_grad for n, p in model.named_parameters() if n.startswith("code_prior."))
    assert model.training_phases() == [("prior", 200)] and tiny_dvt(prior_steps=0).training_phases() == []


def test_sampling_codes_with_and_without_the_kv_cache_gives_the_same_codes():
    model, batch = tiny_dvt().eval(), dvt_batch()
    encoded = model.encode(batch["input_ids"], batch["attention_mask"])
    codes = [model.sample_codes(encoded, batch["attention_mask"], max_codes=10, top_p=0.9, use_cache=cache,
                                generator=torch.Generator().manual_seed(5)) for cache in (True, False)]
    assert torch.equal(*codes) and codes[0].shape[1] > 1
    out = model.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=24, do_sample=True, top_p=0.9,
                         generator=torch.Generator().manual_seed(3))
    assert out.units(0) == [] and out.codes.shape[1] <= math.ceil(25 / 4)  # a code per r = 4 tokens


def test_model_init_on_a_discodvt_output_loads_its_code_modules_the_warm_start(tmp_path):
    first = tiny_dvt(posterior="gumbel")
    with torch.no_grad():
        first.code_posterior.quantizer.codebook.add_(1.0)
        first.code_posterior.step.fill_(5)
    first.save_pretrained(tmp_path)
    bart_fields = set(BartConfig.__dataclass_fields__) - {"pad_token_id", "bos_token_id", "eos_token_id",
                                                         "decoder_start_token_id", "forced_eos_token_id"}
    options = {k: v for k, v in first.config.to_dict().items()
               if k in DiscoDVTConfig.__dataclass_fields__ and k not in bart_fields}
    second = DiscoDVTForConditionalGeneration.from_bart(tmp_path, **options)
    before, after = first.state_dict(), second.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before if k != "code_posterior.step"), \
        [k for k in before if not torch.equal(before[k], after[k])]
    assert int(second.code_posterior.step) == 0  # tau's anneal restarts, as a new run of the original
    with pytest.raises(ValueError, match="code modules differ"):
        DiscoDVTForConditionalGeneration.from_bart(tmp_path, **{**options, "posterior": "vq"})


class TestDiscoDVTArchitecture(ArchitectureTests):
    kind = "discodvt"
    options = {"num_codes": 12, "prior_steps": 5}
    option_defaults = {"downsample_layers": 3, "relation_labels": "directed", "discourse_weight": 0.1,
                       "entropy_weight": 0.1, "posterior": "gumbel", "gumbel_temperature": 0.9}
    invalid_options = ({"num_codes": 1}, {"relation_labels": "x"}, {"entropy_weight": -1}, {"posterior": "x"},
                       {"gumbel_temperature": 0})
    round_trip_overrides = ({}, {"posterior": "vq"})
    added_parameters = tuple(f"{part}." for part in NEW_PARTS)

    def tiny(self, seed: int = 0, **overrides):
        return tiny_dvt(seed, **{"posterior": "gumbel", **overrides})

    def batch(self):
        return dvt_batch()
