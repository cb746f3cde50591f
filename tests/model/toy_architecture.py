"""A toy baseline kept outside eric/model, for the test that a new architecture is one module
plus one `model.variants` entry (tests/model/test_toy_variant.py):

    model.variants.toy: {kind: tests.model.toy_architecture, options: {bias_weight: 0.5}}

BART with `<sent>` units plus a penalty on the squared final-logits bias (its one option).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from huggingface_hub.dataclasses import strict
from pydantic import BaseModel, ConfigDict, Field
from transformers import AutoConfig

from eric.model.config import EricConfig
from eric.model.modeling_eric import EricForConditionalGeneration, EricOutput


class ToyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bias_weight: float = Field(0.1, ge=0)


@strict
class ToyConfig(EricConfig, options=ToyOptions):
    model_type = f"eric_{__name__}"  # "eric_" + its kind: how a saved model names its architecture


@dataclass
class ToyOutput(EricOutput):
    bias_loss: torch.Tensor | None = None


class ToyForConditionalGeneration(EricForConditionalGeneration):
    config_class = ToyConfig

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs) -> ToyOutput:
        out = ToyOutput(**super().forward(input_ids, attention_mask, labels, **kwargs))
        if labels is not None:
            out.bias_loss = self.final_logits_bias.pow(2).mean() + 1.0  # never zero: the curve shows it
            out.loss = out.loss + self.config.bias_weight * out.bias_loss
        return out


AutoConfig.register(ToyConfig.model_type, ToyConfig, exist_ok=True)
ARCHITECTURE = ToyForConditionalGeneration
