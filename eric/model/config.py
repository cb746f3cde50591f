"""`EricConfig`: a BART config plus the entity-state knobs of the paper.

ERIC's fields are not declared here. Each is declared once in eric/config.py, with its
default, bounds and comment, and EricConfig takes a field of the same name from there
(`eric_fields`), typed as config.json holds it:

    EricSettings           K, D, max_entities, tau, the loss weights, the state attention's
                           heads, and the switches that reproduce the authors' released code
                           where it differs from the paper; EricConfig keeps the paper's
                           default for each (PAPER_VALUES where params.yaml's is the code's)
    SWITCHES               the ablation switches use_<mechanism> of VariantParams' mechanisms
    StateSpaceParams       the state space's options, the paper recipe's values as defaults

A saved model's config.json holds each under its name; a key an older config.json lacks
reads as that default. `validate_eric` checks every value against its declaration.

The state space (docs/state-space.md), what each option does. Defaults are the paper and the
authors' code; params.yaml's `model.state_space.recipe` names bundles of these (eric/config.py RECIPES):

    codebook_init_std      None: BART's init_std (0.02, the code's nn.Embedding);
                           1.0 was this project's first version (nearly frozen under Adam)
    codebook_gradient      dense (code): L_CL reaches every code through the cosines;
                           selected: only the chosen rows
    sentence_encoder_embeddings
                           own (code): a copy of the token embeddings; shared: model.shared
    decay_codebook_and_embeddings
                           False (code: weight decay 0); True decays them with the rest
    decay_weights          False (code, the paper recipe): AdamW decays no weight at all
  remedies, off by default:
    state_init             random (paper) | kmeans: codes from k-means over the first
                           `state_init_events` event vectors (eric/train/codebook.py)
    dead_code_steps        0 = off; N: a code unused for N steps is re-seeded from a recent
                           event vector (optimizer state reset; all ranks agree)
    ema_decay              0 = off; the codebook follows an EMA of assigned e_n
    entropy_weight         0 = off; weight of log K - H(mean soft assignment) in the loss
    event_norm             none (paper) | batch: e_n centred and scaled over the batch
                           (BatchNorm without affine) before normalizing
  what trains e_n and what the predictor reads (docs/state-space.md, why L_CL stayed at chance):
    event_gradient         all (paper and code): L_LM through the straight-through s_n and
                           L_CL through c_n (also through the dense codebook path) train the
                           sentence encoder; lm: only L_LM (c_n = normalize(sg(e_n) + s_n), the
                           codebook still learns from L_CL); contrastive: only L_CL (the decoder
                           reads sg(s_n)); none: neither (the sentence encoder stays as initialized)
    predictor_residual     False (paper): e^_n is the attention's output only; True: plus a
                           projection of its query q_{n-1} + E(p_n)
    predictor_scale        none (the authors' code): the predictor's attention logits are q.k;
                           sqrt_d (this project's first version, the remedies' measurements): q.k / sqrt(D)
    predictor_input        prefix (paper): e^_n reads the prefix and the planned entity; none:
                           e^_n is one learned vector for every unit, the anchor-blind control
                           (what L_CL reaches when the target encoder alone ranks the candidates)
    contrastive_candidates batch (paper): every (unit, entity) of the mini-batch is a candidate;
                           text: only those of the anchor's own text; entity: only the same
                           entity's units from n on in its text (no identity can help; anchors
                           with no later unit of their entity are left out)
    event_target           text (paper): the sentence encoder reads unit n as written, so e_n can
                           carry which placeholder it is read at; anonymous: every placeholder it
                           reads becomes one learned marker, the one e_n is read at another, so
                           c_n says what happens to the entity, not which entity it is

Ablations remove exactly one mechanism each: `use_state_attention` (w/o StateAttn),
`use_state` (w/o s_n: state input, state space, predictor, sentence encoder and
L_CL) and `use_entity` (with `use_state` off, w/o s_n & p_n: entity input and
planner). All three off is plain BART reading sentence tokens.
"""

from __future__ import annotations

from types import UnionType
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

from huggingface_hub.dataclasses import strict
from pydantic import BaseModel, ValidationError
from transformers import BartConfig

from eric.config import PAPER_VALUES, RECIPES, SWITCHES, EricSettings, StateSpaceParams, VariantParams


def _config_type(annotation):
    """The type a config field holds for an option's annotation: a JSON number may read back as
    an int, a Literal is its strings (the options model checks the value)."""
    if annotation is float:
        return float | int
    if get_origin(annotation) is Literal:
        return str
    return annotation


NONE_CLASS = 0  # entity-planner class for "no entity"; class i+1 is placeholder <ei>
PAPER = RECIPES["paper"]
NULLABLE = {"ema_decay"}  # may be null in an older config.json (off), besides those whose default is None


def _setting_type(annotation, nullable: bool):
    """The type a config field holds for a declaration's annotation (one type, or it or None: null
    in params.yaml means "the recipe's"): `_config_type`'s, or None too where a config may hold null."""
    if get_origin(annotation) in (Union, UnionType):
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
    held = _config_type(annotation)
    return held | None if nullable else held


def eric_fields() -> dict[str, tuple[Any, Any]]:
    """EricConfig's ERIC fields, from their one declaration each (eric/config.py): name -> (the type
    config.json holds, the default). EricSettings' (their defaults the paper's: PAPER_VALUES), the
    mechanism switches (SWITCHES, of VariantParams), the state space's (the paper recipe's values)."""
    fields = {name: (_setting_type(f.annotation, False), PAPER_VALUES.get(name, f.default))
              for name, f in EricSettings.model_fields.items()}
    for mechanism, switch in SWITCHES.items():
        f = VariantParams.model_fields[mechanism]
        fields[switch] = (_setting_type(f.annotation, False), f.default)
    for name, f in StateSpaceParams.model_fields.items():
        if name != "recipe":
            fields[name] = (_setting_type(f.annotation, PAPER[name] is None or name in NULLABLE), PAPER[name])
    return fields


def _declare(namespace: dict, fields: dict[str, tuple[Any, Any]]) -> None:
    """Annotate and default `fields` in a class body's namespace (`vars()`): what `name: type = default`
    lines would, before the config class becomes a dataclass."""
    for name, (held, default) in fields.items():
        namespace["__annotations__"][name] = held
        namespace[name] = default


@strict
class EricConfig(BartConfig):
    model_type = "eric"

    # ERIC's fields, declared in eric/config.py (eric_fields), in this order before the token ids
    _declare(vars(), eric_fields())

    sent_token_id: int | None = None
    entity_token_ids: list[int] | None = None

    # a baseline's pydantic model of its variant's `options` (None: it takes none): set by
    # `class MyConfig(EricConfig, options=MyOptions)`, which also makes each option a config field
    options_model: ClassVar[type[BaseModel] | None] = None

    def __init_subclass__(cls, options: type[BaseModel] | None = None, **kwargs):
        """A baseline's options are declared once, on its options model (bounds, defaults, a comment
        each); each becomes a field of its config, typed as config.json holds it, with the same
        default. A field the class body annotates itself keeps the body's default (a saved model's
        config.json from before that option existed must load as what it was)."""
        if options is not None:
            own = dict(cls.__dict__.get("__annotations__", {}))
            for name, field in options.model_fields.items():
                if name not in own:
                    own[name] = _config_type(field.annotation)
                    setattr(cls, name, field.default)
            cls.__annotations__ = own
            cls.options_model = options
        super().__init_subclass__(**kwargs)

    def validate_options(self):
        """Run by `@strict`: a baseline's fields hold what its options model allows."""
        if self.options_model is not None:
            self.options_model(**{name: getattr(self, name) for name in self.options_model.model_fields})

    def validate_eric(self):
        """Run by `@strict` at construction: one clear message per bad value. Each ERIC field holds
        what its declaration allows (bounds, choices: eric/config.py); a config.json may come from anywhere."""
        if self.use_state and not self.use_entity:
            raise ValueError("use_state needs use_entity (the state predictor reads the planned entity)")
        for section in (EricSettings, StateSpaceParams):
            try:
                section.model_validate({name: getattr(self, name) for name in section.model_fields if name != "recipe"})
            except ValidationError as exc:
                error = exc.errors()[0]
                raise ValueError(f"{error['loc'][0]}: {error['msg']}, not {error['input']!r}") from None
        if self.state_dim % self.state_attention_heads:
            raise ValueError("state_dim must be divisible by state_attention_heads")

    def check_token_ids(self) -> None:
        """The ids a model needs (checked when one is built, so a bare EricConfig() stays valid)."""
        if self.needs_sentence_tokens and self.sent_token_id is None:
            raise ValueError("sent_token_id is required when an entity/state mechanism is on")
        if self.use_entity:
            ids = self.entity_token_ids or []
            if len(ids) != self.max_entities:
                raise ValueError(f"entity_token_ids needs max_entities={self.max_entities} ids, got {len(ids)}")
        for name, value in (("sent_token_id", self.sent_token_id), ("entity_token_ids", max(self.entity_token_ids or [0]))):
            if value is not None and not 0 <= value < self.vocab_size:
                raise ValueError(f"{name} {value} is outside the vocabulary of {self.vocab_size}")

    @property
    def lm_trains_events(self) -> bool:
        """L_LM's gradient reaches e_n through the straight-through s_n."""
        return self.event_gradient in ("all", "lm")

    @property
    def contrastive_trains_events(self) -> bool:
        """L_CL's gradient reaches e_n through c_n (and the dense codebook path)."""
        return self.event_gradient in ("all", "contrastive")

    @property
    def needs_sentence_tokens(self) -> bool:
        return self.use_state_attention or self.use_state or self.use_entity

    @property
    def state_buffer_size(self) -> int:
        """Recent event vectors the state space keeps for k-means init and dead-code re-seeding."""
        needed = self.state_init == "kmeans" or self.dead_code_steps > 0
        return max(self.state_init_events, 2 * self.num_states) if needed else 0

    @property
    def num_entity_classes(self) -> int:
        """The planner's classes: <none> plus one per placeholder."""
        return 1 + self.max_entities
