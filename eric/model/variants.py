"""Model variants (ERIC, its ablations, the baselines) from params.yaml's `model` section.

    eric                       every mechanism
    eric_no_state_attention    w/o StateAttn
    eric_no_state              w/o s_n (state input, state space, predictor, sentence encoder, L_CL)
    eric_no_state_no_entity    w/o s_n & p_n (also the entity input and planner)
    bart                       plain BART reading sentence tokens, from model.init
    seq2seq                    the same, randomly initialized
    <name> with kind: <arch>   a baseline (SimCTG, HINT, PlanAhead, DiscoDVT): its own module,
                               eric/model/<arch>.py, found through eric/model/registry.py

    variant = resolve_variant(params.model, "eric")   # name, spec, class, options: resolved once
    config = build_config(params.model, variant, len(tokenizer), special_token_ids(tokenizer, 100))
    model = build_model(params.model, variant, tokenizer)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from transformers import BartConfig, PreTrainedTokenizerBase

from eric.config import ModelParams, ParamsError, VariantParams, resolve_path
from eric.data.tokenizer import SpecialTokenIds, special_token_ids
from eric.model.config import EricConfig
from eric.model.modeling_eric import EricForConditionalGeneration
from eric.model.registry import architecture

SIZE_PRESETS = {
    "mini": dict(  # about 3x faster a step than tiny on one CPU thread: EntityWorld studies
        d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=512, decoder_ffn_dim=512,
    ),
    "tiny": dict(
        d_model=256, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=1024, decoder_ffn_dim=1024,
    ),
    "base": dict(  # facebook/bart-base
        d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12, decoder_attention_heads=12,
        encoder_ffn_dim=3072, decoder_ffn_dim=3072,
    ),
}


@dataclass(frozen=True)
class Variant:
    """A `model.variants` entry resolved once: its name, its spec, its architecture and that
    architecture's validated options. Every stage reads what it needs of a variant from here.

        v = resolve_variant(params.model, "simctg")
        v.cls, v.kind, v.two_stage, v.options, v.switches
    """

    name: str
    spec: VariantParams
    cls: type
    options: dict  # the architecture's config fields set by `options` (validated by its config's options_model)

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def two_stage(self) -> bool:
        return self.spec.two_stage

    @property
    def switches(self) -> dict:
        """EricConfig's mechanism switches."""
        return self.spec.switches


def resolve_variant(params: ModelParams, name: str) -> Variant:
    """The variant `name` of params.model.variants; ParamsError (one line) for an unknown name,
    kind or option."""
    if name not in params.variants:
        raise ParamsError(f"unknown variant {name!r}; params.yaml model.variants has {sorted(params.variants)}")
    spec = params.variants[name]
    try:
        cls = architecture(spec.kind)
        options = cls.config_options(spec.options)
    except ValueError as exc:
        raise ParamsError(f"model.variants.{name}: {' '.join(str(exc).split())}") from None
    return Variant(name, spec, cls, options)


def _resolved(params: ModelParams, variant: Variant | str) -> Variant:
    return variant if isinstance(variant, Variant) else resolve_variant(params, variant)


def eric_options(params: ModelParams, variant: Variant | str, ids: SpecialTokenIds) -> dict:
    """Everything of EricConfig that is not a BART dimension, and the variant's name (saved in
    config.json, so that a loader can tell one variant's model from another's)."""
    variant = _resolved(params, variant)
    return dict(
        variant=variant.name,
        two_stage=variant.two_stage,
        **params.eric_settings(),  # the model section's ERIC settings under EricConfig's own names
        sent_token_id=ids.sent,
        entity_token_ids=list(ids.entities),
        pad_token_id=ids.pad,
        bos_token_id=ids.bos,
        eos_token_id=ids.eos,
        decoder_start_token_id=ids.decoder_start,
        forced_eos_token_id=ids.eos,
        dropout=params.dropout,
        **variant.switches,
    )


def variant_options(params: ModelParams, variant: Variant | str, ids: SpecialTokenIds) -> dict:
    """Every non-dimension config field of a variant: ERIC's, plus its architecture's options."""
    v = _resolved(params, variant)
    return {**eric_options(params, v, ids), **v.options}


def build_config(params: ModelParams, variant: Variant | str, vocab_size: int, ids: SpecialTokenIds) -> EricConfig:
    """The config of a randomly initialized variant at the preset size."""
    v = _resolved(params, variant)
    return v.cls.config_class(vocab_size=vocab_size, max_position_embeddings=1024, **SIZE_PRESETS[params.size],
                              **variant_options(params, v, ids))


def build_model(params: ModelParams, variant: Variant | str, tokenizer: PreTrainedTokenizerBase) -> EricForConditionalGeneration:
    """A fresh variant. With `params.init` (a local BART directory) the model takes BART's
    dimensions, and its weights unless the variant is not pretrained (Seq2Seq)."""
    v = _resolved(params, variant)
    ids = special_token_ids(tokenizer, params.max_entities)
    if not params.init:
        return v.cls(build_config(params, v, len(tokenizer), ids))
    init = Path(resolve_path(params.init))
    options = variant_options(params, v, ids)
    if v.spec.pretrained:
        return v.cls.from_bart(init, vocab_size=len(tokenizer), **options)
    return v.cls(v.cls.config_class(**{**bart_dimensions(init), "vocab_size": len(tokenizer), **options}))


def bart_dimensions(bart_dir: Path) -> dict:
    """The architecture fields of a BART checkpoint's config.json."""
    if not (bart_dir / "config.json").is_file():
        raise FileNotFoundError(f"{bart_dir}: no BART checkpoint here (expected config.json + weights)")
    bart = BartConfig.from_pretrained(bart_dir, local_files_only=True)
    keys = [*SIZE_PRESETS["base"], "max_position_embeddings", "activation_function", "scale_embedding",
            "attention_dropout", "activation_dropout", "init_std"]
    return {k: getattr(bart, k) for k in keys}


def parameter_counts(variants: dict[str, dict], size: str = "base", vocab_size: int = 50265 + 101) -> dict[str, int]:
    """Parameters of each variant spec (a `model.variants` entry) at a preset size, with bart-base's
    vocabulary + `<sent>` + 100 placeholders by default. Built on the meta device: nothing is allocated."""
    import torch

    params = ModelParams(size=size, variants=variants)
    ids = SpecialTokenIds(bos=0, eos=2, pad=1, sent=vocab_size - 101, entities=list(range(vocab_size - 100, vocab_size)))
    counts = {}
    for name in variants:
        with torch.device("meta"):
            variant = resolve_variant(params, name)
            model = variant.cls(build_config(params, variant, vocab_size, ids))
        counts[name] = sum(p.numel() for p in model.parameters())
    return counts
