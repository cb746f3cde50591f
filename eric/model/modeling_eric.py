"""ERIC stage one (AAAI 2023) on transformers' BART: one model file, in reading order.

    EricForConditionalGeneration
      model.shared / model.encoder      BART's embeddings and encoder, unchanged
      model.decoder                     BART's decoder + a state attention layer per block
      lm_head, final_logits_bias        BART's LM head
      entity_input                      E(p_n) added at sentence tokens             [use_entity]
      entity_planner                    next entity (<none> + placeholders)        [use_entity]
      state_input                       s_n (D) -> d_model, added at sentence tokens [use_state]
      state_space                       K x D codebook                             [use_state]
      state_predictor                   e^_n from the decoder prefix               [use_state]
      sentence_encoder                  e_n from the gold unit (training only)     [use_state]

Training interface, `model(**batch)` with the collator's batch (eric/data/collate.py):

    input_ids, attention_mask   the source
    labels                      the target `<s> <sent> ... <sent> ... </s>`, -100 = padding
    entity_ids                  [B, N] entity class per unit: 0 = <none>, i+1 = <ei>, -100 = no unit
    entity_positions            [B, N] label position of p_n's occurrence (-1 if none)
    hard_negative_positions     [B, N] another entity of the unit (only with hard_negatives)
    state_ids                   [B, N] optional: inject these states instead of encoding the
                                gold units (analysis, tests); -1 = no state

returns an `EricOutput` with `loss` = lm_loss + lambda1 entity_loss + lambda2
contrastive_loss, each term separately (None when its mechanism is switched off),
`logits`, `entity_logits`, `state_ids` (gold units quantized), `predicted_state_ids`
(e^_n quantized) and `codebook_usage` (share of the K states used in the batch).
`EricOutput.loss_terms()` gives the present terms as floats, for logging (`scalar_terms()` as tensors).
What no gradient needs (the states the batch used, `codebook_usage`, `predicted_state_ids` and the
state-space diagnostics) is done by `finish_output` after the forward: an eager forward calls it
itself, a compiled one leaves it out of its graph and the training loop calls it.

Sampling: `model.generate(input_ids, attention_mask, ...)` (eric/model/generation.py).
Initialization from a BART checkpoint on disk: `EricForConditionalGeneration.from_bart(dir, ...)`.

Where the paper leaves a detail open (docs/paper-notes.md):
- s_n (D = 128) enters through a linear map to d_model, as in the authors' code (the
  paper's plain sum needs D = d_model);
- unit 1 is planned from the prefix `</s> <s>` (q_0 is its mean, the predictor attends
  to it), so every unit n = 1..N carries an entity and a state as in the paper;
  `first_unit_state=False` leaves unit 1 bare, as the code does;
- the state attention has one head of D dimensions (the code); `state_attention_heads`
  splits D into the paper's several heads at the same parameter count;
- L_Ent and L_CL are means over units (the paper writes L_Ent as a sum);
- the codebook learns only through L_CL (c_n uses the codebook vector), the decoder
  reads the straight-through s_n, so L_LM trains the sentence encoder, not the codebook;
- the state space's options (init, dense gradient, own sentence-encoder embeddings, and
  the opt-in remedies: k-means init, dead-code replacement, EMA, entropy penalty) are
  EricConfig fields, documented in docs/state-space.md.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path

import torch
from torch import nn
from transformers import BartConfig, BartForConditionalGeneration, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import ModelOutput
from transformers.models.bart.modeling_bart import BartEncoder, BartScaledWordEmbedding, shift_tokens_right

from eric.model import losses
from eric.model.config import EricConfig
from eric.model.decoder import EricDecoder, padding_mask_4d
from eric.model.generation import EricGenerationMixin
from eric.model.planner import EntityInput, EntityPlanner, StatePredictor
from eric.model.sentence_encoder import SentenceEncoder
from eric.model.state_space import StateSpace, straight_through_state, usage_entropy_penalty
from eric.model.units import UnitLayout


# inputs transformers-style callers may pass that change nothing here (decoder padding is
# at the end, so the causal mask already hides it)
IGNORED_INPUTS = {"return_dict", "use_cache", "output_attentions", "output_hidden_states", "decoder_attention_mask"}
# parameter names that a BART checkpoint lacks (initialized fresh)
NEW_MODULES = ("state_attn", "entity_planner", "state_input", "state_space", "state_predictor", "sentence_encoder")


@dataclass
class EricOutput(ModelOutput):
    loss: torch.Tensor | None = None
    lm_loss: torch.Tensor | None = None
    entity_loss: torch.Tensor | None = None
    contrastive_loss: torch.Tensor | None = None
    state_entropy_loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    entity_logits: torch.Tensor | None = None
    state_ids: torch.Tensor | None = None
    predicted_state_ids: torch.Tensor | None = None
    predicted_events: torch.Tensor | None = None  # [B, N, D] e^_n, the predictor's output
    codebook_usage: torch.Tensor | None = None
    decoder_last_hidden_state: torch.Tensor | None = None
    # state-space diagnostics (docs/state-space.md): ln of L_CL's candidates per anchor (its
    # chance level), and how spread the batch's event vectors e_n are
    contrastive_chance: torch.Tensor | None = None
    # L_CL over entity candidates (the anchor's entity's later units: identity cannot help) and its chance
    contrastive_entity_loss: torch.Tensor | None = None
    contrastive_entity_chance: torch.Tensor | None = None
    event_cosine: torch.Tensor | None = None  # mean pairwise cosine of the e_n
    event_rank: torch.Tensor | None = None  # effective rank of the e_n (exp entropy of singular values)
    # the e_n of L_CL's anchor slots [B*N, D] and which rows are anchors [B*N] (the diagnostics read them)
    events: torch.Tensor | None = None
    event_slots: torch.Tensor | None = None
    # the no-grad work the forward leaves to `finish_output` (None: nothing to do)
    deferred: DeferredWork | None = None

    def scalar_terms(self) -> dict[str, torch.Tensor]:
        """Every scalar field that is set (the loss, its terms, diagnostics; a baseline's output
        subclass adds its own scalar fields and they appear here with no more code), detached,
        where they are (the training loop reads them on the host only when it logs)."""
        return {f.name: v.detach() for f in fields(self)
                if isinstance(v := getattr(self, f.name), torch.Tensor) and v.dim() == 0}

    def loss_terms(self) -> dict[str, float]:
        """`scalar_terms` as floats."""
        return {k: float(v) for k, v in self.scalar_terms().items()}


@dataclass
class UnitInputs:
    """What enters the decoder at each unit's sentence token, and the gold e_n / s_n."""

    planned: torch.Tensor  # [B, N] bool: a planner target
    has_entity: torch.Tensor  # [B, N] bool: planned with a real entity
    entity_embeds: torch.Tensor  # [B, N, d] E(p_n) (zero without entity)
    injection: torch.Tensor  # [B, N, d] E(p_n) + state_input(s_n)
    events: torch.Tensor | None = None  # [B, N, D] e_n
    states: torch.Tensor | None = None  # [B, N, D] s_n with gradient to the codebook
    state_ids: torch.Tensor | None = None  # [B, N] (-1 = none)
    negatives: torch.Tensor | None = None  # [B, N, D] joint representations of hard negatives
    negatives_found: torch.Tensor | None = None  # [B, N] bool: a hard negative exists there
    cosines: torch.Tensor | None = None  # [B, N, K] cosines of the units' e_n to every state
    usage: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # to record in the state space (training)


@dataclass
class DeferredWork:
    """What a training forward with states leaves to `finish_output`: work no gradient needs
    (recording which states the batch used, the state-space diagnostics), so that a compiled
    forward does not compile it; an eager forward runs it before it returns."""

    usage: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # (e_n [M, D], state ids [M], counted [M])
    has_entity: torch.Tensor | None = None  # [B, N] the units that get a predicted state id
    # L_CL's slots: which have a state [B, N], their entities [B, N], the valid candidates [B*N (+ B*N)],
    # the candidates per anchor [B*N, B*N (+ B*N)] (None: all), and the positives c_n [B, N, D], detached
    target: torch.Tensor | None = None
    entity_ids: torch.Tensor | None = None
    candidates: torch.Tensor | None = None
    allowed: torch.Tensor | None = None
    positives: torch.Tensor | None = None
    done: bool = False  # finish_output did it (a ModelOutput keeps a field once set, so it stays)


class EricPreTrainedModel(PreTrainedModel):
    config: EricConfig
    config_class = EricConfig
    base_model_prefix = "model"
    _supports_sdpa = True
    _keys_to_ignore_on_load_unexpected = [r"encoder\.version", r"decoder\.version", r"decoder\.embed_tokens"]

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, StateSpace):
            std = self.config.codebook_init_std
            init.normal_(module.codebook, mean=0.0, std=self.config.init_std if std is None else std)
            for buffer in (module.usage_counts, *module.bookkeeping()):  # non-persistent: rebuilt on load
                init.zeros_(buffer)
        elif isinstance(module, EntityInput):  # a non-persistent buffer: rebuilt on every load
            init.copy_(module.token_ids, EntityInput.table(self.config.entity_token_ids))
        elif isinstance(module, SentenceEncoder) and module.markers is not None:  # likewise
            init.copy_(module.entity_tokens, SentenceEncoder.entity_table(self.config))
        elif isinstance(module, EricForConditionalGeneration):
            init.zeros_(module.final_logits_bias)


class EricModel(EricPreTrainedModel):
    _tied_weights_keys = {"encoder.embed_tokens.weight": "shared.weight"}

    def __init__(self, config: EricConfig):
        super().__init__(config)
        scale = config.d_model**0.5 if config.scale_embedding else 1.0
        self.shared = BartScaledWordEmbedding(config.vocab_size, config.d_model, config.pad_token_id, scale)
        self.encoder = BartEncoder(config)
        self.decoder = EricDecoder(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.shared

    def set_input_embeddings(self, value):
        self.shared = value
        self.encoder.embed_tokens = value


class EricForConditionalGeneration(EricGenerationMixin, EricPreTrainedModel):
    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}
    _keys_to_ignore_on_load_missing = [r"final_logits_bias"]
    # what a baseline subclass overrides (eric/model/registry.py)
    new_modules: tuple[str, ...] = NEW_MODULES
    extra_columns: tuple[str, ...] = ()
    # the original system's stage-one decoding (`generate` keywords) that `sample.decoding: original`
    # puts over the shared settings; {}: the shared ones (ERIC's paper: top-p 0.9)
    original_decoding: dict = {}
    @classmethod
    def config_options(cls, options: dict) -> dict:
        """The config fields set by a variant's `options` (validated by its config's `options_model`)."""
        model = cls.config_class.options_model
        if model is None:
            if options:
                raise ValueError(f"{cls.__name__} takes no options, got {sorted(options)}")
            return {}
        return model(**options).model_dump()

    @classmethod
    def collator_extras(cls, config, tokenizer, train_rows: list[dict]):
        """The collator's `extras(rows, batch)` for a training job: `batch_extras`, bound. A baseline
        that needs statistics of the training split, counted once (PlanAhead's IDF), overrides it."""
        return partial(cls.batch_extras, config, tokenizer)

    @classmethod
    def batch_extras(cls, config, tokenizer, rows: list[dict], batch: dict) -> dict:
        """Extra batch tensors a baseline's objective needs (the collator calls it)."""
        return {}

    @classmethod
    def join_targets(cls, rows: list[dict], targets_root: Path, variant: str, split: str) -> list[dict]:
        """Training rows with a baseline's cached per-row targets joined (its own DVC stage writes
        them under `train.targets_dir`); ERIC joins nothing."""
        return rows

    def __init__(self, config: EricConfig):
        config.check_token_ids()
        super().__init__(config)
        self.model = EricModel(config)
        self.final_logits_bias = nn.Buffer(torch.zeros(1, config.vocab_size))
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.use_entity:
            self.entity_input = EntityInput(config.entity_token_ids)
            self.entity_planner = EntityPlanner(config.d_model, config.num_entity_classes)
        if config.use_state:
            self.state_input = nn.Linear(config.state_dim, config.d_model, bias=False)
            self.state_space = StateSpace(
                config.num_states, config.state_dim, gradient=config.codebook_gradient,
                ema_decay=config.ema_decay or None, recent_events=config.state_buffer_size,
            )
            self.state_predictor = StatePredictor(
                config.d_model, config.state_dim, config.state_attention_heads, residual=config.predictor_residual,
                scaled=config.predictor_scale == "sqrt_d", blind=config.predictor_input == "none",
            )
            self.sentence_encoder = SentenceEncoder(config)
        self.post_init()
        self.copy_embeddings_to_sentence_encoder()

    # -- embeddings (what resize_token_embeddings and weight tying need) --
    def get_input_embeddings(self):
        return self.model.shared

    def set_input_embeddings(self, value):
        self.model.set_input_embeddings(value)

    def no_weight_decay(self) -> list[str]:
        """Parameters AdamW must not decay: none of them without `decay_weights` (the authors'
        optimizer, the paper recipe); else the codebook and the token embeddings, unless
        `decay_codebook_and_embeddings`."""
        if not self.config.decay_weights:
            return [name for name, _ in self.named_parameters()]
        if self.config.decay_codebook_and_embeddings:
            return []
        keys = ("state_space.codebook", "shared.weight", "embed_tokens.weight", "lm_head.weight")
        return [name for name, _ in self.named_parameters() if any(k in name for k in keys)]

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def resize_token_embeddings(self, new_num_tokens: int, pad_to_multiple_of=None, mean_resizing=True):
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        old = self.final_logits_bias
        bias = old.new_zeros(1, embeddings.weight.shape[0])
        keep = min(old.shape[1], bias.shape[1])
        bias[:, :keep] = old[:, :keep]
        self.final_logits_bias = nn.Buffer(bias)
        own = self.sentence_encoder.embed_tokens if self.config.use_state else None
        if own is not None and own.weight.shape[0] != embeddings.weight.shape[0]:
            grown = type(own)(embeddings.weight.shape[0], own.weight.shape[1], own.padding_idx, own.embed_scale)
            with torch.no_grad():
                grown.weight.copy_(embeddings.weight)  # new rows as the model's; old rows kept below
                grown.weight[:keep] = own.weight[:keep]
            self.sentence_encoder.embed_tokens = grown
        return embeddings

    # -- building blocks shared by training and generation --
    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = padding_mask_4d(attention_mask, self.config)
        return self.model.encoder(input_ids=input_ids, attention_mask=mask).last_hidden_state

    def entity_embedding(self, classes: torch.Tensor) -> torch.Tensor:
        """E(p) for entity classes (0 = <none> gives zero)."""
        return self.entity_input(classes, self.model.shared)

    def decode(self, decoder_input_ids, unit_embeds, encoder_hidden, encoder_mask=None, cache=None, state_keys=None):
        """Decoder pass; `unit_embeds` [B, T, d] is added to the token embeddings (zeros off sentence tokens);
        `state_keys`: the state attention's key slots when the caller knows them (the unit layout)."""
        embeds, is_sent = self.decoder_inputs(decoder_input_ids, unit_embeds, cache.length if cache is not None else 0)
        return self.model.decoder(embeds, is_sent, encoder_hidden, encoder_mask, cache=cache, state_keys=state_keys)

    def decoder_inputs(self, decoder_input_ids, unit_embeds, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """(input embeddings [B, T, d], sentence-token mask [B, T]) of tokens read from position `start`:
        the token embedding plus the entity input; a baseline that adds more (DiscoDVT's codes) overrides it."""
        embeds = self.model.shared(decoder_input_ids)
        if unit_embeds is not None:
            embeds = embeds + unit_embeds.to(embeds.dtype)
        return embeds, decoder_input_ids == self.config.sent_token_id  # all False without a sentence token id

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden) + self.final_logits_bias.to(hidden.dtype)

    # the switch `without_lm_head` sets: a plain attribute, not a config field (never saved)
    lm_head_off = False

    @contextmanager
    def without_lm_head(self):
        """Forwards that read the decoder states and the states, not the next-token distribution
        (coherence scoring, the probes): the LM head, the largest matrix of a small model, is
        skipped, and with it the LM loss and the total (`loss`: None); `logits` is empty
        ([..., 0]) and `row_logits` gives a few positions' logits afterwards."""
        previous, self.lm_head_off = self.lm_head_off, True
        try:
            yield
        finally:
            self.lm_head_off = previous

    def row_logits(self, out: EricOutput, row: int, positions) -> torch.Tensor:
        """Next-token logits at `positions` of one row of a forward output whose LM head was skipped
        (coherence scoring); a baseline whose distribution is more than the LM head overrides it."""
        return self.lm_logits(out.decoder_last_hidden_state[row, positions])

    def planner_inputs(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden.detach() if self.config.detach_planner_inputs else hidden

    # -- training forward --
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        entity_ids: torch.Tensor | None = None,
        entity_positions: torch.Tensor | None = None,
        hard_negative_positions: torch.Tensor | None = None,
        state_ids: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        **kwargs,
    ) -> EricOutput:
        config = self.config
        if unknown := set(kwargs) - IGNORED_INPUTS:
            raise TypeError(f"unexpected model inputs {sorted(unknown)}")
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("pass labels or decoder_input_ids")
            decoder_input_ids = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)
        if encoder_hidden_states is None:
            encoder_hidden_states = self.encode(input_ids, attention_mask)

        layout = units = None
        if config.needs_sentence_tokens:
            num_units = entity_ids.shape[1] if entity_ids is not None else None
            layout = UnitLayout.from_ids(decoder_input_ids, config.sent_token_id, config.pad_token_id, num_units)
        if config.use_entity:
            if entity_ids is None:
                raise ValueError("this variant plans entities: pass entity_ids (see eric/data/collate.py)")
            units = self._unit_inputs(layout, entity_ids, labels, entity_positions, hard_negative_positions, state_ids)

        unit_embeds = layout.scatter_to_positions(units.injection) if units is not None else None
        state_keys = layout.state_keys() if layout is not None else None
        hidden = self.decode(decoder_input_ids, unit_embeds, encoder_hidden_states, attention_mask, state_keys=state_keys)
        logits = hidden[..., :0] if self.lm_head_off else self.lm_logits(hidden)

        out = EricOutput(logits=logits, decoder_last_hidden_state=hidden)
        if labels is not None and not self.lm_head_off:
            out.lm_loss = losses.language_model_loss(logits, labels)
        if units is not None:
            self._unit_objectives(out, layout, units, entity_ids, self.planner_inputs(hidden))
        if out.lm_loss is not None:
            out.loss = out.lm_loss
            if out.entity_loss is not None:
                out.loss = out.loss + config.lambda_entity * out.entity_loss
            if out.contrastive_loss is not None:
                out.loss = out.loss + config.lambda_contrastive * out.contrastive_loss
            if out.state_entropy_loss is not None:
                out.loss = out.loss + config.entropy_weight * out.state_entropy_loss
        if not torch.compiler.is_compiling():  # compiled: the caller finishes it (eric/train/loop.py)
            self.finish_output(out)
        return out

    def planned_units(self, entity_ids: torch.Tensor, unit_exists: torch.Tensor | None = None):
        """(planned, has_entity) [B, N]: the units whose entity the planner predicts (unit 1
        only with first_unit_state), and those of them with an entity, hence a state."""
        planned = entity_ids >= 0
        if unit_exists is not None:
            planned = planned & unit_exists
        if not self.config.first_unit_state:
            planned[:, 0] = False
        return planned, planned & (entity_ids > 0)

    def unit_events(self, labels: torch.Tensor, units: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """e_n [B, K, D] from the sentence encoder at label `positions` [B, K] (-1 = none) of
        the units in `units` [B, N]."""
        needed = torch.nn.functional.pad(units, (1, 0))  # column n = unit n
        embeddings = self.sentence_encoder.embed_tokens or self.model.shared
        return self.sentence_encoder(labels, embeddings, needed, positions, focal=units.shape[1])

    @torch.no_grad()
    def reference_states(self, labels: torch.Tensor, entity_ids: torch.Tensor, entity_positions: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """(state ids [B, N] (-1 = none), e_n [B, N, D]) of a collated batch's gold target: the units
        the model gives a state in training, each e_n from the sentence encoder quantized to its
        nearest state. Only the sentence encoder runs: the same ids as `forward(...).state_ids`."""
        with_state = self.planned_units(entity_ids)[1] & (entity_positions >= 0)
        events = self.unit_events(labels, with_state, torch.where(with_state, entity_positions, -1))
        return torch.where(with_state, self.state_space.nearest(events), -1), events

    def _unit_inputs(self, layout, entity_ids, labels, entity_positions, hard_negative_positions, state_ids):
        config = self.config
        planned, has_entity = self.planned_units(entity_ids, layout.unit_exists)
        entity_embeds = self.entity_embedding(torch.where(has_entity, entity_ids, 0))
        units = UnitInputs(planned, has_entity, entity_embeds, entity_embeds)
        if not config.use_state:
            return units

        if state_ids is not None:  # given states: inject them, nothing to learn from
            with_state = has_entity & (state_ids >= 0)
            vectors = self.state_space.lookup(state_ids.clamp(min=0))
            units.state_ids = torch.where(with_state, state_ids, -1)
        elif labels is not None and entity_positions is not None:
            with_state, vectors = self._gold_states(units, labels, entity_positions, hard_negative_positions)
        else:
            raise ValueError("this variant injects states: pass labels + entity_positions, or state_ids")
        state_embeds = self.state_input(vectors.to(self.state_input.weight.dtype))
        units.injection = entity_embeds + state_embeds * with_state[..., None].to(state_embeds.dtype)
        return units

    def _gold_states(self, units, labels, entity_positions, hard_negative_positions):
        """e_n from the sentence encoder, quantized: the straight-through s_n enters the decoder."""
        positions = torch.where(units.has_entity, entity_positions, -1)
        use_negatives = self.config.hard_negatives and hard_negative_positions is not None
        if use_negatives:
            negative_positions = torch.where(units.has_entity, hard_negative_positions, -1)
            positions = torch.cat([positions, negative_positions], dim=1)
        events = self.unit_events(labels, units.has_entity, positions)
        n = units.has_entity.shape[1]
        with_state = units.has_entity & (entity_positions >= 0)
        counted = torch.cat([with_state, torch.zeros_like(positions[:, n:], dtype=torch.bool)], dim=1)
        # what L_CL sees of e_n (c_n and the dense codebook path): with gradient only if it trains e_n
        for_contrast = events if self.config.contrastive_trains_events else events.detach()
        quantized = self.state_space(for_contrast, counted=False)  # counted after the forward (finish_output)
        # what the decoder reads: the state's value, L_LM's gradient copied to e_n only if it trains e_n
        straight_through = straight_through_state(events, quantized.states, self.config.lm_trains_events)

        units.events, units.states = for_contrast[:, :n], quantized.states[:, :n]
        units.state_ids = torch.where(with_state, quantized.indices[:, :n], -1)
        units.cosines = quantized.cosines[:, :n]
        if self.training:
            units.usage = (for_contrast.detach().flatten(0, 1), quantized.indices.flatten(), counted.flatten())
        if use_negatives:
            units.negatives_found = negative_positions >= 0
            units.negatives = losses.joint_representation(for_contrast[:, n:], quantized.states[:, n:])
        return with_state, straight_through[:, :n]

    def _unit_objectives(self, out: EricOutput, layout: UnitLayout, units: UnitInputs, entity_ids, hidden):
        context = layout.previous_unit_means(hidden)
        out.entity_logits = self.entity_planner(context)
        out.entity_loss = losses.entity_loss(out.entity_logits, entity_ids.clamp(min=0), units.planned)
        if not self.config.use_state:
            return
        out.state_ids = units.state_ids
        out.deferred = work = DeferredWork(usage=units.usage, has_entity=units.has_entity)
        keys, values = self.state_predictor.memory(hidden)
        predicted = self.state_predictor(context + units.entity_embeds, keys, values, layout.keys_before_units())
        out.predicted_events = predicted
        if units.events is None:
            return
        # every tensor keeps its [B, N] slots, masked where there is no state: no shape depends on the data
        target = units.state_ids >= 0
        anchors = target.flatten()  # the anchor slots with a state; the candidates add the hard negatives
        negatives, candidates = units.negatives, anchors
        if negatives is not None:
            negatives, candidates = negatives.flatten(0, 1), torch.cat([anchors, units.negatives_found.flatten()])
        positives = losses.joint_representation(units.events, units.states)
        allowed, scored = self._candidates(target, units, entity_ids)
        out.contrastive_loss = losses.info_nce(
            predicted.flatten(0, 1), positives.flatten(0, 1), self.config.tau, negatives, allowed,
            valid=scored, candidates_valid=candidates,
        )
        if self.config.entropy_weight > 0:
            penalty = usage_entropy_penalty(units.cosines, self.config.tau, target)
            out.state_entropy_loss = torch.where(target.any(), penalty, torch.zeros_like(penalty))
        out.events, out.event_slots = units.events.flatten(0, 1).detach(), scored
        work.target, work.entity_ids, work.candidates, work.allowed = target, entity_ids, candidates, allowed
        work.positives = positives.detach()

    def _candidates(self, target: torch.Tensor, units: UnitInputs, entity_ids: torch.Tensor):
        """(allowed [M, M (+ H)] or None for all, the anchors L_CL scores [M]): L_CL's candidates
        per anchor slot: the whole batch (paper), its own text only (`text`: which story it is
        cannot help), or its own entity's units from n on (`later`, `entity`: which entity it is
        cannot help either; an anchor whose entity has no later unit has nothing to tell apart)."""
        anchors = target.flatten()
        mode = self.config.contrastive_candidates
        if mode == "batch":
            return None, anchors
        if mode == "text":
            rows = torch.arange(target.shape[0], device=target.device)[:, None].expand_as(target).flatten()
            candidate_rows = rows if units.negatives is None else torch.cat([rows, rows])
            return losses.same_text_candidates(rows, candidate_rows), anchors
        later = losses.same_entity_later(entity_ids, target)
        scored = anchors & (later.sum(1) >= 2)
        if units.negatives is not None:  # a hard negative is another entity: never a candidate here
            later = torch.nn.functional.pad(later, (0, later.shape[0]))
        return later, scored

    @torch.no_grad()
    def finish_output(self, out: EricOutput, logged: bool = False) -> None:
        """Run the no-grad work a forward left in `out.deferred` (once): count the states the batch
        used and add the state-space diagnostics. `logged`: also the effective rank of the e_n
        (an SVD, a host sync on CUDA: only for the rows the loop logs). A compiled forward leaves
        this work out of its graph and the training loop calls this after it; an eager forward
        calls it itself."""
        work = out.deferred
        if work is not None and not work.done:
            work.done = True
            self._run_deferred(out, work)
        if logged and out.events is not None and out.event_rank is None:
            out.event_rank = losses.effective_rank(out.events, out.event_slots)

    def _run_deferred(self, out: EricOutput, work: DeferredWork) -> None:
        if work.usage is not None:
            self.state_space.record(*work.usage)
        if work.has_entity is not None:
            out.predicted_state_ids = torch.where(work.has_entity, self.state_space.nearest(out.predicted_events), -1)
        if work.candidates is not None:
            self._state_diagnostics(out, work.candidates, work.allowed)
            later = losses.same_entity_later(work.entity_ids, work.target)  # logged whatever L_CL trains on
            self._entity_candidates(out, out.predicted_events, work.positives, later)

    @torch.no_grad()
    def _entity_candidates(self, out: EricOutput, predicted, positives, later: torch.Tensor) -> None:
        """L_CL over entity candidates and its chance, logged whatever L_CL trains on: the anchor's
        positive against its entity's later units in its text, all carrying the same placeholder,
        so a critic that only matches identity scores chance (ln candidates); NaN (skipped by
        the loop's means) when no anchor has a later unit of its entity."""
        counts = later.sum(1)
        scored = counts >= 2
        loss = losses.info_nce(predicted.flatten(0, 1), positives.flatten(0, 1), self.config.tau, None, later,
                               valid=scored)
        chance = losses.masked_mean(counts.clamp(min=1).float().log(), scored)
        nan = torch.full_like(loss, float("nan"))
        out.contrastive_entity_loss = torch.where(scored.any(), loss, nan)
        out.contrastive_entity_chance = torch.where(scored.any(), chance.to(loss.dtype), nan)

    @torch.no_grad()
    def _state_diagnostics(self, out: EricOutput, candidates: torch.Tensor, allowed=None) -> None:
        """The usage and spread of the batch's states and L_CL's chance. out.event_slots [B*N] /
        candidates [B*N (+ B*N)]: the valid slots of L_CL's anchors and candidates."""
        anchors = out.event_slots
        ids = out.state_ids.clamp(min=0).flatten()
        used = torch.zeros(self.config.num_states, device=ids.device).index_add_(0, ids, anchors.float())
        out.codebook_usage = (used > 0).float().mean()
        if allowed is not None:  # mean over anchors of ln(their candidates)
            per_anchor = (allowed & candidates[None, :]).sum(1).clamp(min=1).float().log()
            out.contrastive_chance = losses.masked_mean(per_anchor, anchors)
        else:
            out.contrastive_chance = candidates.sum().clamp(min=1).float().log()
        out.event_cosine = losses.event_cosine(out.events, anchors)

    # -- initialization from a plain BART checkpoint --
    @classmethod
    def from_bart(cls, bart_dir: str | Path, vocab_size: int | None = None, **eric_options) -> EricForConditionalGeneration:
        """BART weights from a local checkpoint directory (e.g. a downloaded facebook/bart-base);
        the vocabulary grows to `vocab_size` (the tokenizer's, with <sent> and the placeholders);
        the new modules are initialized; the sentence encoder starts as a copy of the encoder."""
        bart_dir = Path(bart_dir)
        if not (bart_dir / "config.json").is_file():
            raise FileNotFoundError(f"{bart_dir}: no BART checkpoint here (expected config.json + weights)")
        bart = BartForConditionalGeneration.from_pretrained(bart_dir, local_files_only=True)
        if vocab_size is not None and vocab_size != bart.config.vocab_size:
            bart.resize_token_embeddings(vocab_size)  # keeps BART's rows; resizes final_logits_bias too
        names = {f.name for f in fields(BartConfig)}
        base = {k: v for k, v in bart.config.to_dict().items() if k in names and k not in eric_options}
        model = cls(cls.config_class(**base, **eric_options))
        missing, unexpected = model.load_state_dict(bart.state_dict(), strict=False)
        unexpected = [k for k in unexpected if not k.startswith("model.decoder.embed_tokens")]  # tied to shared
        missing = [k for k in missing if not any(part in k for part in cls.new_modules)]
        if missing or unexpected:
            raise ValueError(f"{bart_dir}: not a BART checkpoint of this shape (missing {missing[:3]}, "
                             f"unexpected {unexpected[:3]})")
        model.copy_encoder_to_sentence_encoder()
        model.copy_embeddings_to_sentence_encoder()
        return model

    def copy_embeddings_to_sentence_encoder(self) -> None:
        """The sentence encoder's own token embeddings start as a copy of the model's."""
        if self.config.use_state and self.sentence_encoder.embed_tokens is not None:
            with torch.no_grad():
                self.sentence_encoder.embed_tokens.weight.copy_(self.model.shared.weight)

    def copy_encoder_to_sentence_encoder(self) -> None:
        if not self.config.use_state:
            return
        weights = {k: v for k, v in self.model.encoder.state_dict().items() if not k.startswith("embed_tokens")}
        missing, unexpected = self.sentence_encoder.load_state_dict(weights, strict=False)
        own = {"event_proj.weight", "event_proj.bias", "embed_tokens.weight"}
        own |= {k for k in self.sentence_encoder.state_dict() if k.startswith("event_norm.")}
        assert not unexpected and set(missing) <= own, (missing, unexpected)


ARCHITECTURE = EricForConditionalGeneration  # what a `kind` naming this module builds (eric/model/registry.py)
