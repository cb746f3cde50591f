"""SimCTG (Su et al., NeurIPS 2022, "A Contrastive Framework for Neural Text Generation"),
a stage-one baseline: BART with `<sent>` units (ERIC's `bart` variant) trained with the
language-model loss plus SimCTG's token-level contrastive loss.

    params.yaml  model.variants.simctg: {kind: simctg, options: {margin: 0.5}}

For one target with decoder states h_1..h_T at its T non-padding positions (those with a
label, i.e. `<s> <sent> ... </s>` as the decoder reads them):

    L_CL = 1 / (T (T - 1)) * sum_i sum_{j != i} max(0, rho - s(h_i, h_i) + s(h_i, h_j))

with s the cosine (so s(h_i, h_i) = 1) and the margin rho = 0.5 (SimCTG's default).
loss = L_LM + contrastive_weight * L_CL (SimCTG adds the two unweighted: weight 1).

Choices SimCTG leaves open for an encoder-decoder model (its paper trains GPT-2):
- h are the decoder's last hidden states (before the LM head), the representations whose
  anisotropy SimCTG corrects; the encoder is not regularized;
- L_CL is a mean over the target's ordered pairs, then a mean over the targets of the batch
  that have at least two tokens (the reference code averages over all valid pairs of the batch;
  per-target means keep long targets from dominating, and equal it when lengths are equal);
- the model adds no parameters: the `bart` variant's parameter set, the same initialization
  (from `model.init` when set).
Decoding: the ERIC paper samples every system with top-p 0.9, so SimCTG is sampled like the
others by default; `sample.decoding: original` uses its contrastive search instead
(`original_decoding`, eric/model/generation.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from huggingface_hub.dataclasses import strict
from pydantic import BaseModel, ConfigDict, Field
from transformers import AutoConfig

from eric.model.config import EricConfig
from eric.model.modeling_eric import EricForConditionalGeneration, EricOutput

IGNORE = -100


class SimCTGOptions(BaseModel):
    """`options` of a `kind: simctg` variant (each also a SimCTGConfig field)."""

    model_config = ConfigDict(extra="forbid")
    margin: float = Field(0.5, gt=0, le=2)  # rho; cosines lie in [-1, 1]
    contrastive_weight: float = Field(1.0, ge=0)


@strict
class SimCTGConfig(EricConfig, options=SimCTGOptions):
    model_type = "eric_simctg"


@dataclass
class SimCTGOutput(EricOutput):
    token_contrastive_loss: torch.Tensor | None = None


def token_contrastive_loss(hidden: torch.Tensor, valid: torch.Tensor, margin: float) -> torch.Tensor | None:
    """SimCTG's L_CL: `hidden` [B, T, d] decoder states, `valid` [B, T] bool (the target's tokens).
    None when no target has two tokens."""
    unit = torch.nn.functional.normalize(hidden.float(), dim=-1)
    cosines = unit @ unit.transpose(1, 2)  # [B, T, T]; the diagonal is s(h_i, h_i) = 1
    hinge = (margin - cosines.diagonal(dim1=1, dim2=2).unsqueeze(-1) + cosines).clamp(min=0)
    pairs = valid.unsqueeze(2) & valid.unsqueeze(1)
    pairs &= ~torch.eye(valid.shape[1], dtype=torch.bool, device=valid.device)
    counts = pairs.sum(dim=(1, 2))
    kept = counts > 0
    if not kept.any():
        return None
    per_target = (hinge * pairs).sum(dim=(1, 2))[kept] / counts[kept]
    return per_target.mean()


class SimCTGForConditionalGeneration(EricForConditionalGeneration):
    config_class = SimCTGConfig
    # contrastive search, k = 5, alpha = 0.6: SimCTG's open-ended story generation
    # (yxuansu/SimCTG story_generation/README.md:108, 148, WritingPrompts; ROCStories: alpha 0.65, :217)
    original_decoding = {"penalty_alpha": 0.6, "top_k": 5, "top_p": 1.0, "temperature": 1.0}

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs) -> SimCTGOutput:
        out = SimCTGOutput(**super().forward(input_ids, attention_mask, labels, **kwargs))
        if out.loss is None:  # no labels, or the LM head skipped (`without_lm_head`)
            return out
        out.token_contrastive_loss = token_contrastive_loss(
            out.decoder_last_hidden_state, labels != IGNORE, self.config.margin
        )
        if out.token_contrastive_loss is not None:
            out.loss = out.loss + self.config.contrastive_weight * out.token_contrastive_loss
        return out


AutoConfig.register(SimCTGConfig.model_type, SimCTGConfig, exist_ok=True)


ARCHITECTURE = SimCTGForConditionalGeneration  # what a `kind` naming this module builds (eric/model/registry.py)
