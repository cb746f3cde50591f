"""ERIC stage one: config, model, generation (see modeling_eric.py for the interface)."""

from transformers import AutoConfig, AutoModelForSeq2SeqLM

from eric.model.config import EricConfig
from eric.model.generation import EricGenerationOutput
from eric.model.modeling_eric import EricForConditionalGeneration, EricOutput

AutoConfig.register("eric", EricConfig, exist_ok=True)
AutoModelForSeq2SeqLM.register(EricConfig, EricForConditionalGeneration, exist_ok=True)

__all__ = ["EricConfig", "EricForConditionalGeneration", "EricGenerationOutput", "EricOutput"]
