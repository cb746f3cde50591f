"""DiscoDVT (Ji and Huang, EMNLP 2021, "DiscoDVT: Generating Long Text with Discourse-Aware
Discrete Variational Transformer"), a stage-one baseline: BART with `<sent>` units (ERIC's
`bart` variant) whose decoder also reads a sequence of discrete latent codes, one per span
of r = 2^downsample_layers target tokens.

    params.yaml  model.variants.discodvt: {kind: discodvt, options: {num_codes: 256, posterior: gumbel, ...}}

"DiscoDVT's code" below is the authors' release, github.com/cdjhz/DiscoDVT (file:line there).

Modules (parameter-name parts `code_posterior`, `code_upsampler`, `code_prior`, `relation_head`):

    posterior q(z|y)   the BART encoder (shared) over the target y = labels, then
                       `downsample_layers` strided convolutions (kernel = stride = 2, GELU
                       between) and a LayerNorm: z_e [B, M, d], M = ceil(T / r); then
      posterior: gumbel  (default, DiscoDVT's: src/modeling_bart.py:1466-1472) logits =
                       Linear(z_e) over the K codes; training: the decoder reads w @ E, w =
                       Gumbel-softmax(logits, tau), soft (its scripts pass --gumbel_trick, so
                       hard = False: src/main.py:197), tau = max(0.1, 0.9 exp(-1e-4 s)), s the
                       training forwards so far (src/main.py:36-38, 280-283; scripts/
                       wikiplots_train.sh:29-31), kept in the buffer `code_posterior.step`; eval:
                       one_hot(argmax); the code id is the argmax (src/modeling_bart.py:1529-1531)
      posterior: vq      z_q = e_k, k = argmin_k ||z_e - e_k||^2; the decoder reads the
                       straight-through z_e + sg(z_q - z_e)
                       E: the K x d codebook (K = num_codes, 256 as DiscoDVT's scripts)
    upsampler          transposed convolutions (kernel = stride = 2) back to one vector per
                       token; position t of the decoder input gets the vector of the code whose
                       span holds labels[t] (the token it predicts), added to its token embedding
    relation head      Linear([h_n; h_{n+1}]) -> relation, h_n = mean of the code vectors the
                       decoder reads over the tokens of unit n
    prior p(z|x)       an autoregressive transformer (an ERIC/BART decoder stack, `prior_layers`
                       layers, own code embeddings and BOS/EOS) cross-attending to the BART
                       encoder's output for the input x

Losses of the main phase:

    gumbel  L = L_rec + lambda_d L_disc - alpha H                       (DiscoDVT src/main.py:303)
    vq      L = L_rec + ||sg(z_e) - z_q||^2 + beta ||z_e - sg(z_q)||^2 + lambda_d L_disc - alpha H

L_rec the token cross-entropy of the decoder given x and the codes (= lm_loss); the two VQ
terms (VQ-VAE, van den Oord et al. 2017) are means over codes and dimensions (`codebook_loss`,
`commitment_loss`, beta = commitment_weight = 0.25); L_disc (`discourse_loss`, lambda_d =
discourse_weight = 0.1, DiscoDVT's --gamma in scripts/wikiplots_train.sh:23) the cross-entropy
of the relation between adjacent units: with `relation_labels: directed` (default) DiscoDVT's
20 classes, 10 markers with a direction and a supervised "none" (preprocess/encode_bpe.py:7-10;
eric/data/discourse.py `directed_relation`); with `marker` the 15 DisSent markers opening the
second unit, with `class` their 4 PDTB classes, and then pairs whose second unit opens with no
marker are not supervised. H (`entropy_loss` = -H, alpha = entropy_weight = 0.1, DiscoDVT's
--alpha in scripts/wikiplots_train.sh:22) is the entropy of each text's mean code distribution
over its codes, averaged over the texts (src/main.py:239-248): the distribution is
softmax(logits) (gumbel, before the noise, as there) or softmax(-||z_e - e_k||^2) (vq).
Prior phase (`prior_steps` more optimizer steps after the main ones, same lr and schedule
shape, posterior/encoder/decoder frozen): L_prior = cross-entropy of the posterior's code
sequence c_1..c_M, EOS under the prior (`prior_loss`, mean over codes + EOS).

Generation: codes are sampled from the prior with the same top-p/top-k/temperature as the
text (top-p 0.9 in the pipeline), with no minimum length, until EOS or ceil((max_new_tokens +
1) / r) codes; the text is then sampled from the decoder reading their upsampled vectors
(positions past the last code read none). `model.generate` returns `DiscoDVTGenerationOutput`
(sequences, codes; no units, so `out.units(row)` is empty).

Choices where the paper leaves room or this project differs (docs/baselines.md, DiscoDVT):
- the posterior shares BART's encoder with the input (DiscoDVT's is a copy of it:
  src/modeling_bart.py:1455); kernel = stride = 2 with GELU and a LayerNorm (its: kernel 4,
  stride 2, ReLU, 128 channels, then a 1x1 convolution to the K logits: :1418-1434), so each
  code covers exactly its r tokens (r = 8 by default, as its 3 layers); codes live in d_model
  (its 256) and no learned padding code (:1409, 1483);
- the entropy term averages over a text's real codes (its mean also counts the padding
  positions of its fixed 512-token targets: src/main.py:245-247 computes the masked
  probabilities and then averages the unmasked ones);
- gumbel in eval reads the argmax code (its validation samples the noise too);
- vq (no EMA, no remedy but the entropy term): z_e is layer-normed and the codebook starts
  N(0, 1), so codes and latents start at one scale; the codebook gets no weight decay;
- the relation head reads the code vectors before the upsampler, through a Linear over the
  pair (its: the upsampled per-token vectors, projected to 256, a Bilinear: :1412-1413, 1490-1502);
- DiscoDVT labels relations with its dependency-parse rules (preprocess/extract_discourse.py);
  here the units are the corpus's (`preprocess.unit`: sentences, or EDUs from
  eric/data/edu.py), and a relation is read off the units' text by `opening_marker` ("As a
  child" counts as "as"); "<m>21" needs the first unit to open with m and not end its sentence;
- its warm start (a first run on BookCorpus, scripts/warm_start.sh) is not a pipeline stage:
  `from_bart` on a DiscoDVT output (`model.init`) loads its code modules too (its
  --load_from_full, src/main.py:198-207), so a user can run it (docs/baselines.md);
- phases: one `train_stage_one` run; after the main steps a second DeepSpeed engine over the
  prior's parameters alone (eric/train/phases.py), checkpointed under the variant's checkpoint
  folder, so a killed run resumes in either phase;
- a forward with labels encodes them with the posterior (reconstruction, as in validation); a
  forward without labels (decoder inputs only: the coherence test) reads the prior's greedy
  codes for the input, the model's own plan, never the scored text.
"""

from __future__ import annotations

import copy
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from huggingface_hub.dataclasses import strict
from pydantic import BaseModel, ConfigDict, Field
from safetensors.torch import load_file
from torch import nn
from torch.nn import functional as F
from transformers import AutoConfig
from transformers import initialization as init

from eric.data.discourse import DIRECTED_RELATIONS, MARKERS, RELATION_CLASS, directed_relation, opening_marker
from eric.data.schema import SENT_TOKEN
from eric.model.config import EricConfig
from eric.model.decoder import EricCache, EricDecoder
from eric.model.generation import EricGenerationOutput, sampling_warpers
from eric.model.modeling_eric import NEW_MODULES, EricForConditionalGeneration, EricOutput

IGNORE = -100
RELATION_SETS = {
    "directed": DIRECTED_RELATIONS,
    "marker": MARKERS,
    "class": tuple(dict.fromkeys(RELATION_CLASS.values())),
}
PHASES = ("main", "prior")


class DiscoDVTOptions(BaseModel):
    """`options` of a `kind: discodvt` variant (each also a DiscoDVTConfig field)."""

    model_config = ConfigDict(extra="forbid")
    num_codes: int = Field(256, ge=2)  # K (DiscoDVT: 256)
    downsample_layers: int = Field(3, ge=0, le=8)  # r = 2^layers tokens per code
    commitment_weight: float = Field(0.25, ge=0)  # beta
    discourse_weight: float = Field(0.1, ge=0)  # lambda_d (DiscoDVT's gamma: 0.1)
    relation_labels: Literal["directed", "marker", "class"] = "directed"  # directed: DiscoDVT's 20, "none" supervised
    entropy_weight: float = Field(0.1, ge=0)  # alpha: loss - alpha H(each text's mean code distribution)
    posterior: Literal["gumbel", "vq"] = "gumbel"  # q(z|y): Gumbel-softmax relaxation (DiscoDVT) | VQ
    gumbel_temperature: float = Field(0.9, gt=0)  # tau at the first training forward (gumbel)
    gumbel_min_temperature: float = Field(0.1, gt=0)  # tau never goes below it
    gumbel_anneal_rate: float = Field(1e-4, ge=0)  # tau = max(min, tau_0 exp(-rate * training forwards))
    prior_layers: int = Field(2, ge=1)
    prior_steps: int = Field(200, ge=0)  # optimizer steps of the prior phase (0: no prior training)


@strict
class DiscoDVTConfig(EricConfig, options=DiscoDVTOptions):
    model_type = "eric_discodvt"

    # a config.json saved before `posterior` existed holds a VQ model (a variant's default is gumbel)
    posterior: str = "vq"

    def validate_discodvt(self):
        if not self.gumbel_min_temperature <= self.gumbel_temperature:
            raise ValueError("gumbel temperatures must be gumbel_min_temperature <= gumbel_temperature")

    @property
    def code_span(self) -> int:
        """r: target tokens per code."""
        return 2**self.downsample_layers

    @property
    def relations(self) -> tuple[str, ...]:
        return RELATION_SETS[self.relation_labels]


@dataclass
class DiscoDVTOutput(EricOutput):
    codebook_loss: torch.Tensor | None = None
    commitment_loss: torch.Tensor | None = None
    discourse_loss: torch.Tensor | None = None
    entropy_loss: torch.Tensor | None = None  # -H: the loss adds entropy_weight * entropy_loss
    prior_loss: torch.Tensor | None = None


@dataclass
class DiscoDVTGenerationOutput(EricGenerationOutput):
    codes: torch.Tensor | None = None  # [B, M] the prior's codes, -1 after EOS


@dataclass
class Posterior:
    latents: torch.Tensor  # z_e [B, M, d]
    indices: torch.Tensor  # [B, M] code ids, -1 = no code
    quantized: torch.Tensor  # z_q [B, M, d]: the chosen codes' vectors
    straight_through: torch.Tensor  # what the decoder reads: vq z_e + sg(z_q - z_e); gumbel w @ E
    mask: torch.Tensor  # [B, M] bool
    logits: torch.Tensor  # [B, M, K] of the code distribution (the entropy term's): vq -||z_e - e_k||^2


# -- the pieces ---------------------------------------------------------------------------
class Quantizer(nn.Module):
    """A K x d codebook; nearest code by squared Euclidean distance."""

    def __init__(self, num_codes: int, dim: int):
        super().__init__()
        self.codebook = nn.Parameter(torch.empty(num_codes, dim))

    def nearest(self, latents: torch.Tensor) -> torch.Tensor:
        flat = latents.reshape(-1, latents.shape[-1]).float()
        codebook = self.codebook.float()
        distances = flat.pow(2).sum(-1, keepdim=True) - 2 * flat @ codebook.t() + codebook.pow(2).sum(-1)
        return distances.argmin(-1).view(latents.shape[:-1])

    def soft_assignment_logits(self, latents: torch.Tensor) -> torch.Tensor:
        """-||z_e - e_k||^2 [.., K]: the logits of the code distribution the entropy term reads."""
        flat = latents.float()
        codebook = self.codebook.float()
        return -(flat.pow(2).sum(-1, keepdim=True) - 2 * flat @ codebook.t() + codebook.pow(2).sum(-1))

    def lookup(self, indices: torch.Tensor) -> torch.Tensor:
        return F.embedding(indices.clamp(min=0), self.codebook)


def vq_losses(latents: torch.Tensor, quantized: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codebook loss ||sg(z_e) - z_q||^2, commitment loss ||z_e - sg(z_q)||^2), means over the
    codes in `mask` and their dimensions."""
    z, q = latents[mask].float(), quantized[mask].float()
    if z.shape[0] == 0:
        zero = latents.sum() * 0.0 + quantized.sum() * 0.0
        return zero, zero
    return F.mse_loss(q, z.detach()), F.mse_loss(z, q.detach())


def mean_code_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """H(q_b), q_b = mean of softmax(logits) over the codes in `mask` of text b, then the mean
    over the texts that have a code (DiscoDVT src/main.py:239-248, per text, not per batch)."""
    probs = torch.softmax(logits.float(), dim=-1) * mask[..., None].to(torch.float32)
    counts = mask.sum(1)
    rows = counts > 0
    if not bool(rows.any()):
        return probs.sum() * 0.0
    mean = probs.sum(1)[rows] / counts[rows, None]
    return -(mean * mean.clamp_min(1e-12).log()).sum(-1).mean()


class Downsampler(nn.Module):
    """Token states [B, T, d] -> one latent per span of r tokens [B, M, d]."""

    def __init__(self, dim: int, layers: int):
        super().__init__()
        self.span = 2**layers
        self.convs = nn.ModuleList([nn.Conv1d(dim, dim, kernel_size=2, stride=2) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, length, _ = hidden.shape
        codes = math.ceil(length / self.span)
        x = hidden * mask[..., None].to(hidden.dtype)
        x = F.pad(x, (0, 0, 0, codes * self.span - length)).transpose(1, 2)  # [B, d, M r]
        for i, conv in enumerate(self.convs):
            x = conv(x if i == 0 else F.gelu(x))
        code_mask = F.pad(mask, (0, codes * self.span - length))[:, :: self.span]  # a span's first token is real
        return self.norm(x.transpose(1, 2)), code_mask.bool()


class Upsampler(nn.Module):
    """Code vectors [B, M, d] -> one vector per token [B, M r, d] (zero past a row's codes)."""

    def __init__(self, dim: int, layers: int):
        super().__init__()
        self.span = 2**layers
        self.convs = nn.ModuleList([nn.ConvTranspose1d(dim, dim, kernel_size=2, stride=2) for _ in range(layers)])

    def forward(self, codes: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = (codes * mask[..., None].to(codes.dtype)).transpose(1, 2)
        for i, conv in enumerate(self.convs):
            x = conv(x if i == 0 else F.gelu(x))
        token_mask = mask.repeat_interleave(self.span, dim=1)
        return x.transpose(1, 2) * token_mask[..., None].to(x.dtype)


class CodePosterior(nn.Module):
    """vq: nearest code, straight-through. gumbel (DiscoDVT src/modeling_bart.py:1466-1472): logits
    = Linear(z_e); in training the decoder reads w @ E, w = Gumbel-softmax(logits, tau) (soft: its
    scripts pass --gumbel_trick, so hard = False); in eval one_hot(argmax); the code id is the argmax
    (its get_codebook_indices, :1529-1531). `step` counts the training forwards that anneal tau."""

    def __init__(self, config: DiscoDVTConfig):
        super().__init__()
        self.config = config
        self.downsample = Downsampler(config.d_model, config.downsample_layers)
        self.quantizer = Quantizer(config.num_codes, config.d_model)
        if config.posterior == "gumbel":
            self.to_logits = nn.Linear(config.d_model, config.num_codes)
            self.register_buffer("step", torch.zeros((), dtype=torch.long))

    def temperature(self) -> float:
        """tau = max(min, tau_0 exp(-rate * step)) (DiscoDVT src/main.py:280-283)."""
        c = self.config
        return max(c.gumbel_min_temperature, c.gumbel_temperature * math.exp(-c.gumbel_anneal_rate * int(self.step)))

    def forward(self, token_states: torch.Tensor, token_mask: torch.Tensor) -> Posterior:
        latents, mask = self.downsample(token_states, token_mask)
        if self.config.posterior == "vq":
            indices = self.quantizer.nearest(latents)
            quantized = self.quantizer.lookup(indices).to(latents.dtype)
            straight = latents + (quantized - latents).detach()
            logits = self.quantizer.soft_assignment_logits(latents)
            return Posterior(latents, torch.where(mask, indices, -1), quantized, straight, mask, logits)
        logits = self.to_logits(latents)
        indices = logits.argmax(-1)
        if self.training:
            weights = F.gumbel_softmax(logits.float(), tau=self.temperature(), hard=False, dim=-1)
            self.step += 1
        else:
            weights = F.one_hot(indices, self.config.num_codes).float()
        read = (weights @ self.quantizer.codebook.float()).to(latents.dtype)
        quantized = self.quantizer.lookup(indices).to(latents.dtype)
        return Posterior(latents, torch.where(mask, indices, -1), quantized, read, mask, logits)


class CodePrior(nn.Module):
    """p(c_1..c_M, EOS | x): code embeddings (codes, EOS = K, BOS = K + 1) -> decoder stack with
    cross-attention to the input's encoding -> logits over codes + EOS."""

    def __init__(self, config: DiscoDVTConfig):
        super().__init__()
        sub = copy.deepcopy(config)
        sub.decoder_layers, sub.use_state_attention = config.prior_layers, False
        self.num_codes = config.num_codes
        self.embed = nn.Embedding(config.num_codes + 2, config.d_model)
        self.decoder = EricDecoder(sub)
        self.head = nn.Linear(config.d_model, config.num_codes + 1)

    @property
    def bos(self) -> int:
        return self.num_codes + 1

    @property
    def eos(self) -> int:
        return self.num_codes

    def forward(self, inputs, encoder_hidden, encoder_mask=None, cache: EricCache | None = None) -> torch.Tensor:
        embeds = self.embed(inputs)
        no_sent = torch.zeros_like(inputs, dtype=torch.bool)
        return self.head(self.decoder(embeds, no_sent, encoder_hidden, encoder_mask, cache=cache))

    def empty_cache(self) -> EricCache:
        return EricCache.empty(self.decoder.config)


def prior_sequences(codes: torch.Tensor, mask: torch.Tensor, num_codes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs `BOS c_1 .. c_M`, targets `c_1 .. c_M EOS`, -100 after) for the prior."""
    lengths = mask.sum(1)
    batch, width = codes.shape
    targets = torch.full((batch, width + 1), IGNORE, dtype=torch.long, device=codes.device)
    targets[:, :width] = torch.where(mask, codes, IGNORE)
    targets[torch.arange(batch, device=codes.device), lengths] = num_codes  # EOS
    inputs = torch.cat([torch.full_like(codes[:, :1], num_codes + 1), codes.clamp(min=0)], dim=1)
    return inputs, targets


def prior_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the codes and EOS of every row."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE)


def unit_means(token_vectors: torch.Tensor, labels: torch.Tensor, sent_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(h [B, N, d]: mean of `token_vectors` over each unit's label positions, from its `<sent>`
    to the next one; exists [B, N])."""
    is_sent = labels == sent_id
    unit = is_sent.long().cumsum(1) - 1  # -1 before the first unit (the <s>)
    valid = (labels != IGNORE) & (unit >= 0)
    units = max(int(is_sent.sum(1).max()), 1)
    weights = F.one_hot(unit.clamp(min=0), units).to(token_vectors.dtype) * valid[..., None].to(token_vectors.dtype)
    sums = weights.transpose(1, 2) @ token_vectors  # [B, N, d]
    counts = weights.sum(1)  # [B, N]
    return sums / counts.clamp(min=1)[..., None], counts > 0


def discourse_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
    """Cross-entropy over the labelled adjacent-unit pairs; None when there is none."""
    found = labels != IGNORE
    if not bool(found.any()):
        return None
    return F.cross_entropy(logits[found].float(), labels[found])


def relation_id(first: str, second: str, relations: tuple[str, ...], labels: str) -> int | None:
    """The label of the link between adjacent units `first` and `second`: DiscoDVT's directed
    class (`directed`, never None), or the marker opening `second` (`marker`) or its class."""
    if labels == "directed":
        return relations.index(directed_relation(first, second))
    marker = opening_marker(second)
    if marker is None:
        return None
    return relations.index(marker if labels == "marker" else RELATION_CLASS[marker])


def unit_texts(target: str) -> list[str]:
    """The units of a stage-one target `<sent> unit <sent> unit ...`."""
    return [piece.strip() for piece in target.split(SENT_TOKEN)[1:]]


@contextmanager
def evaluating(*modules: nn.Module):
    """Run `modules` in eval mode (no dropout), then restore their modes."""
    modes = [m.training for m in modules]
    for m in modules:
        m.eval()
    try:
        yield
    finally:
        for m, mode in zip(modules, modes):
            m.train(mode)


# -- the model ----------------------------------------------------------------------------
class DiscoDVTForConditionalGeneration(EricForConditionalGeneration):
    config_class = DiscoDVTConfig
    new_modules = (*NEW_MODULES, "code_posterior", "code_upsampler", "code_prior", "relation_head")

    def __init__(self, config: DiscoDVTConfig):
        super().__init__(config)
        self.code_posterior = CodePosterior(config)
        self.code_upsampler = Upsampler(config.d_model, config.downsample_layers)
        self.code_prior = CodePrior(config)
        self.relation_head = nn.Linear(2 * config.d_model, len(config.relations))
        self.training_phase = "main"
        self._latent: torch.Tensor | None = None  # per-position code vectors the decoder adds
        self.post_init()

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, Quantizer):
            init.normal_(module.codebook, mean=0.0, std=1.0)  # the scale of the layer-normed z_e

    @classmethod
    def from_bart(cls, bart_dir, vocab_size: int | None = None, **eric_options) -> DiscoDVTForConditionalGeneration:
        """BART's weights from `bart_dir`; when it is a DiscoDVT model (the warm start: a first
        run's output), its code modules too (codebook, posterior, upsampler, relation head,
        prior), as DiscoDVT's --load_from_full (src/main.py:198-207); tau's anneal restarts."""
        model = super().from_bart(bart_dir, vocab_size=vocab_size, **eric_options)
        bart_dir = Path(bart_dir)
        if json.loads((bart_dir / "config.json").read_text()).get("model_type") != DiscoDVTConfig.model_type:
            return model
        if not (bart_dir / "model.safetensors").is_file():
            raise FileNotFoundError(f"{bart_dir}: a DiscoDVT model without model.safetensors (sharded?)")
        parts = tuple(f"{name}." for name in cls.new_modules)
        own = {k: v for k, v in load_file(bart_dir / "model.safetensors").items()
               if k.startswith(parts) and k != "code_posterior.step"}
        expected = {k for k in model.state_dict() if k.startswith(parts) and k != "code_posterior.step"}
        if set(own) != expected:
            raise ValueError(f"{bart_dir}: its code modules differ from this variant's (posterior, num_codes, "
                             f"relation_labels?): {sorted(set(own) ^ expected)[:3]}")
        model.load_state_dict(own, strict=False)  # a shape mismatch raises
        return model

    def no_weight_decay(self) -> list[str]:
        return [*super().no_weight_decay(), "code_posterior.quantizer.codebook"]

    @classmethod
    def batch_extras(cls, config, tokenizer, rows: list[dict], batch: dict) -> dict:
        """relation_labels [B, N - 1]: the relation of each kept unit to the one before it;
        `directed`: DiscoDVT's class (or "none") of every pair; `marker`/`class`: the marker
        opening the second unit (or its class), -100 where it opens with none."""
        kept = (batch["labels"] == config.sent_token_id).sum(1).tolist()
        out = torch.full((len(rows), max(max(kept, default=1) - 1, 1)), IGNORE, dtype=torch.long)
        for i, row in enumerate(rows):
            units = unit_texts(row["target"])[: kept[i]]
            for n, (first, second) in enumerate(zip(units, units[1:])):
                label = relation_id(first, second, config.relations, config.relation_labels)
                if label is not None:
                    out[i, n] = label
        return {"relation_labels": out}

    # -- training phases (eric/train/phases.py) --
    def training_phases(self) -> list[tuple[str, int]]:
        """Phases after the main one: the prior's, if it has steps."""
        return [("prior", self.config.prior_steps)] if self.config.prior_steps else []

    def set_training_phase(self, phase: str) -> None:
        """main: all but the prior train; prior: only the prior (set before building its engine)."""
        if phase not in PHASES:
            raise ValueError(f"unknown training phase {phase!r}; known: {PHASES}")
        self.training_phase = phase
        for name, param in self.named_parameters():
            param.requires_grad_(name.startswith("code_prior.") == (phase == "prior"))

    # -- codes --
    def posterior(self, labels: torch.Tensor) -> Posterior:
        """The target's codes: BART's encoder over the labels, downsampled, quantized."""
        mask = labels != IGNORE
        ids = torch.where(mask, labels, self.config.pad_token_id)
        states = self.model.encoder(input_ids=ids, attention_mask=mask.long()).last_hidden_state
        return self.code_posterior(states, mask)

    def code_vectors(self, codes: torch.Tensor) -> torch.Tensor:
        """Per-token decoder inputs [B, M r, d] for code ids [B, M] (-1 = none)."""
        mask = codes >= 0
        return self.code_upsampler(self.code_posterior.quantizer.lookup(codes), mask)

    @torch.no_grad()
    def sample_codes(self, encoder_hidden, encoder_mask=None, *, max_codes: int, do_sample: bool = True,
                     top_p: float = 1.0, top_k: int = 0, temperature: float = 1.0, use_cache: bool = True,
                     generator: torch.Generator | None = None) -> torch.Tensor:
        """Codes [B, M] from the prior (-1 after EOS), until EOS or `max_codes`; no minimum length."""
        prior, batch = self.code_prior, encoder_hidden.shape[0]
        device = encoder_hidden.device
        warpers = sampling_warpers(do_sample, temperature, top_k, top_p)
        inputs = torch.full((batch, 1), prior.bos, dtype=torch.long, device=device)
        cache = prior.empty_cache() if use_cache else None
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        codes = []
        for _ in range(max_codes):
            step = inputs[:, -1:] if use_cache else inputs
            logits = prior(step, encoder_hidden, encoder_mask, cache)[:, -1].float()
            logits = warpers(inputs, logits)
            if do_sample:
                chosen = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]
            else:
                chosen = logits.argmax(-1)
            finished |= chosen == prior.eos
            codes.append(torch.where(finished, -1, chosen))
            if bool(finished.all()):
                break
            inputs = torch.cat([inputs, chosen[:, None]], dim=1)
        if not codes:
            return torch.zeros(batch, 0, dtype=torch.long, device=device)
        return torch.stack(codes, dim=1)

    @contextmanager
    def reading_codes(self, latent: torch.Tensor | None):
        """Inside, every decoder pass adds `latent` [B, L, d] at its positions."""
        previous, self._latent = self._latent, latent
        try:
            yield
        finally:
            self._latent = previous

    def decoder_inputs(self, decoder_input_ids, unit_embeds, start: int = 0):
        if self._latent is not None:
            length = decoder_input_ids.shape[1]
            piece = self._latent[:, start : start + length]
            piece = F.pad(piece, (0, 0, 0, length - piece.shape[1]))  # no code past the last one
            unit_embeds = piece if unit_embeds is None else unit_embeds + piece
        return super().decoder_inputs(decoder_input_ids, unit_embeds, start)

    # -- forward --
    def forward(self, input_ids=None, attention_mask=None, labels=None, decoder_input_ids=None,
                relation_labels=None, codes=None, encoder_hidden_states=None, **kwargs) -> DiscoDVTOutput:
        """`codes` [B, M] (optional) are read instead of the posterior's (analysis, tests)."""
        if self.training_phase == "prior" and labels is not None:
            return self._prior_forward(input_ids, attention_mask, labels)
        if encoder_hidden_states is None:
            encoder_hidden_states = self.encode(input_ids, attention_mask)
        post = None
        if codes is None and labels is not None:
            post = self.posterior(labels)
            latent = self.code_upsampler(post.straight_through, post.mask)
        else:
            if codes is None:  # no target to encode: the prior's greedy plan for the input
                length = decoder_input_ids.shape[1]
                codes = self.sample_codes(encoder_hidden_states, attention_mask, do_sample=False,
                                          max_codes=math.ceil(length / self.config.code_span))
            latent = self.code_vectors(codes)
        with self.reading_codes(latent):
            out = DiscoDVTOutput(**super().forward(
                input_ids, attention_mask, labels, decoder_input_ids,
                encoder_hidden_states=encoder_hidden_states, **kwargs,
            ))
        if post is not None and out.loss is None:  # the LM head skipped (`without_lm_head`): codes, no objective
            out.state_ids = post.indices
        elif post is not None:
            self._posterior_objectives(out, post, labels, relation_labels)
        return out

    def _posterior_objectives(self, out: DiscoDVTOutput, post: Posterior, labels, relation_labels) -> None:
        config = self.config
        out.state_ids = post.indices  # the loop counts the codes used (StateUsageWindow)
        used = post.indices[post.mask].unique().numel()
        out.codebook_usage = torch.tensor(used / config.num_codes, device=labels.device)
        if config.posterior == "vq":
            out.codebook_loss, out.commitment_loss = vq_losses(post.latents, post.quantized, post.mask)
            out.loss = out.loss + out.codebook_loss + config.commitment_weight * out.commitment_loss
        if config.entropy_weight > 0:
            out.entropy_loss = -mean_code_entropy(post.logits, post.mask)
            out.loss = out.loss + config.entropy_weight * out.entropy_loss
        if relation_labels is None:
            return
        tokens = post.straight_through.repeat_interleave(config.code_span, dim=1)[:, : labels.shape[1]]
        means, _ = unit_means(tokens, labels, config.sent_token_id)
        logits = self.relation_head(torch.cat([means[:, :-1], means[:, 1:]], dim=-1))
        width = min(logits.shape[1], relation_labels.shape[1])
        out.discourse_loss = discourse_loss(logits[:, :width], relation_labels[:, :width])
        if out.discourse_loss is not None:
            out.loss = out.loss + config.discourse_weight * out.discourse_loss
        else:  # keep the head in the graph (ranks must agree on which parameters got gradients)
            out.loss = out.loss + 0.0 * logits.sum()

    def _prior_forward(self, input_ids, attention_mask, labels) -> DiscoDVTOutput:
        """The prior phase: the frozen posterior's codes (no dropout) are the prior's targets."""
        with torch.no_grad(), evaluating(self.model.encoder, self.code_posterior):
            encoder_hidden = self.encode(input_ids, attention_mask)
            post = self.posterior(labels)
        inputs, targets = prior_sequences(post.indices, post.mask, self.config.num_codes)
        loss = prior_loss(self.code_prior(inputs, encoder_hidden, attention_mask), targets)
        return DiscoDVTOutput(loss=loss, prior_loss=loss, state_ids=post.indices)

    # -- generation --
    @torch.no_grad()
    def generate(self, input_ids, attention_mask=None, *, max_new_tokens: int = 512, do_sample: bool = True,
                 temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, use_cache: bool = True,
                 generator: torch.Generator | None = None, codes: torch.Tensor | None = None,
                 **kwargs) -> DiscoDVTGenerationOutput:
        """Codes from the prior (or `codes`), then the text from the decoder reading them."""
        was_training = self.training
        self.eval()
        if codes is None:
            encoder_hidden = self.encode(input_ids, attention_mask)
            max_codes = math.ceil((max_new_tokens + 1) / self.config.code_span)
            codes = self.sample_codes(encoder_hidden, attention_mask, max_codes=max_codes, do_sample=do_sample,
                                      top_p=top_p, top_k=top_k, temperature=temperature, use_cache=use_cache,
                                      generator=generator)
        with self.reading_codes(self.code_vectors(codes)):
            out = super().generate(input_ids, attention_mask, max_new_tokens=max_new_tokens, do_sample=do_sample,
                                   temperature=temperature, top_k=top_k, top_p=top_p, use_cache=use_cache,
                                   generator=generator, **kwargs)
        self.train(was_training)
        return DiscoDVTGenerationOutput(out.sequences, out.entity_ids, out.state_ids, codes=codes)


AutoConfig.register(DiscoDVTConfig.model_type, DiscoDVTConfig, exist_ok=True)


ARCHITECTURE = DiscoDVTForConditionalGeneration  # what a `kind` naming this module builds (eric/model/registry.py)
