"""Sampling from ERIC: plan the entity and its state at every sentence token.

The decoder starts from `</s> <s> <sent>` (the prefix every training target has).
Whenever the token about to be read is a sentence token, the model

  1. pools the last-layer states of the previous unit (q_{n-1}),
  2. samples the next entity p_n from the planner (temperature `entity_temperature`),
  3. predicts e^_n from the prefix and quantizes it to the nearest state s_n,
  4. reads `<sent>` with E(p_n) + s_n added, as in training.

With `use_cache=True` (default) the decoder runs one token per step on BART's KV
cache plus the state-attention memory, and the planner keeps a running mean and its
own key/value memory; with `use_cache=False` every step re-runs the whole prefix
through the training-time code path (slow; for parity tests). `decode_step` picks how a
cached step runs: `dynamic` (caches that grow), `static` (fixed shapes) or `compiled`
(the static step through torch.compile, one graph): eric/model/static_decoding.py.

`generate` returns the tokens (starting with the decoder start token, like
transformers) and, per unit, the entity class (0 = <none>, i+1 = <ei>, -100 = no
unit) and the state id (-1 = no state).

A `UnitPlan` replaces steps 2-3 from outside, for the bounds of what states can do: the
reference's entity and the state the sentence encoder reads off the reference's unit
(`entity_ids`, `state_ids`, per unit; a unit past them is planned as usual), or a state
drawn uniformly at every unit (`random_states`).

Contrastive search (SimCTG, Su et al., NeurIPS 2022; transformers' `penalty_alpha` + `top_k`):
with `penalty_alpha` set (not None) and `top_k` = k > 1, each step takes the k most likely
tokens v (after the logits processors, no sampling warpers), reads each one step ahead to
get its last-layer state h_v, and picks the argmax of

    (1 - alpha) * p(v | x_<t) - alpha * max_j cos(h_v, h_j)

over the states h_j of the positions read so far (deterministic; entities are planned by
argmax). The lookahead re-runs the decoder on one copy of the cache per candidate and
rolls it back (KV cache, no state attention), or else re-runs the whole prefix for the
k candidates in one batch (slow, exact). A `<sent>` candidate is read ahead without its
unit input (its entity and state are planned only once it is chosen); a model that plans
no entity (the baselines) reads it exactly as it will.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.generation import (
    LogitsProcessorList,
    MinNewTokensLengthLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from transformers.masking_utils import create_bidirectional_mask

from eric.config import DECODE_STEPS
from eric.model.decoder import EricCache
from eric.model.static_decoding import StaticDecodeStep, StaticEricCache
from eric.model.state_attention import fit
from eric.model.units import UnitLayout

NO_UNIT = -100


@dataclass
class EricGenerationOutput:
    sequences: torch.Tensor  # [B, L]
    entity_ids: torch.Tensor | None  # [B, U]
    state_ids: torch.Tensor | None  # [B, U]

    def units(self, row: int) -> list[tuple[str, int]]:
        """(placeholder or "<none>", state id) for each unit of one text."""
        if self.entity_ids is None:
            return []
        pairs = []
        for cls, state in zip(self.entity_ids[row].tolist(), self.state_ids[row].tolist()):
            if cls == NO_UNIT:
                break
            pairs.append(("<none>" if cls == 0 else f"<e{cls - 1}>", state))
        return pairs


@dataclass
class UnitPlan:
    """Units fixed from outside (module doc): [B, U] entity classes (< 0: the planner's) and state
    ids (< 0: the predictor's) of units 0..U-1; `random_states`: every state drawn uniformly."""

    entity_ids: torch.Tensor | None = None
    state_ids: torch.Tensor | None = None
    random_states: bool = False


def _unit_column(values: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor | None:
    """values[b, index[b]] for each row b, -1 where index[b] is past the last column."""
    if values is None:
        return None
    inside = index < values.shape[1]
    picked = values.gather(1, index.clamp(0, values.shape[1] - 1)[:, None])[:, 0]
    return torch.where(inside, picked, -1)


class GrowingBuffer:
    """A [B, n, ...] tensor that grows along dim 1; appends copy only the new part (amortized)."""

    def __init__(self):
        self.data: torch.Tensor | None = None
        self.length = 0

    def append(self, x: torch.Tensor) -> None:
        n = x.shape[1]
        self.data = fit(self.data, self.length + n, x)
        self.data[:, self.length : self.length + n] = x
        self.length += n

    def view(self) -> torch.Tensor | None:
        return None if self.data is None else self.data[:, : self.length]


class PlannerMemory:
    """Generation-time inputs of the planner: the decoder states read so far, the mean of the
    current unit's, and the predictor's keys/values.

    A step only appends its state; the unit means and the predictor's keys/values are
    computed when a unit is planned, over the states appended since the last plan (a
    plan every ~17 tokens, so a token costs no arithmetic here).
    """

    def __init__(self, batch: int, device: torch.device, predictor=None):
        self.unit_start = torch.zeros(batch, dtype=torch.long, device=device)
        self.length = 0  # positions read so far
        self.predictor = predictor
        self.pending: list[torch.Tensor] = []
        self.states = GrowingBuffer()  # [B, T, d] float32: every position read
        self.keys = GrowingBuffer()
        self.values = GrowingBuffer()

    def update(self, hidden: torch.Tensor, starts_unit: torch.Tensor, any_start: bool) -> None:
        """hidden [B, 1, d] of the token just read; a sentence token starts a new unit."""
        if any_start:
            self.unit_start = torch.where(starts_unit, self.length, self.unit_start)
        self.length += 1
        self.pending.append(hidden)

    def context(self, dtype: torch.dtype) -> torch.Tensor:
        """q_{n-1}: each row's mean state over its current unit (positions >= its unit start)."""
        states = self._flush()
        in_unit = torch.arange(self.length, device=states.device)[None, :] >= self.unit_start[:, None]
        total = torch.bmm(in_unit[:, None].to(states.dtype), states)[:, 0]
        return (total / in_unit.sum(1, keepdim=True).clamp(min=1)).to(dtype)

    def key_values(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        self._flush()
        return self.keys.view(), self.values.view()

    def _flush(self) -> torch.Tensor:
        """Move the pending states into the history (and the predictor's keys/values)."""
        if self.pending:
            new = torch.cat(self.pending, dim=1)
            self.pending = []
            self.states.append(new.float())
            if self.predictor is not None:
                k, v = self.predictor.memory(new)
                self.keys.append(k)
                self.values.append(v)
        return self.states.view()


class EricGenerationMixin:
    """`generate()` for EricForConditionalGeneration."""

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        max_new_tokens: int = 512,
        min_new_tokens: int = 0,
        do_sample: bool = True,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        no_repeat_ngram_size: int = 0,
        entity_temperature: float | None = None,
        max_units: int | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
        penalty_alpha: float | None = None,
        decode_step: str = "dynamic",
        plan: UnitPlan | None = None,
    ) -> EricGenerationOutput:
        config = self.config
        if decode_step not in DECODE_STEPS:
            raise ValueError(f"decode_step must be one of {DECODE_STEPS}, not {decode_step!r}")
        if decode_step != "dynamic" and not use_cache:
            raise ValueError(f"decode_step={decode_step!r} reads one token a step on a cache: it needs use_cache=True")
        was_training = self.training
        self.eval()
        batch, device = input_ids.shape[0], input_ids.device
        contrastive = penalty_alpha is not None and top_k > 1
        if contrastive:
            do_sample = False  # deterministic, as in SimCTG; top_k is k, not a warper
        encoder_mask = attention_mask  # 2D, for the contrastive lookahead's full-prefix passes
        encoder_hidden = self.encode(input_ids, attention_mask)
        step_logits = self.step_logits(encoder_hidden, attention_mask)  # once per call (PlanAhead: its plan)
        if attention_mask is not None and use_cache:  # the cross-attention mask of one query, built once
            attention_mask = create_bidirectional_mask(
                config=config,
                inputs_embeds=encoder_hidden[:, :1],
                attention_mask=attention_mask,
                encoder_hidden_states=encoder_hidden,
            )
        prompt = [config.decoder_start_token_id, config.bos_token_id]
        if config.sent_token_id is not None:
            prompt.append(config.sent_token_id)
        buffer = torch.full((batch, max_new_tokens + 1), config.pad_token_id, dtype=torch.long, device=device)
        buffer[:, 0] = prompt[0]
        processors = self._logits_processors(
            do_sample, temperature, top_k, top_p, no_repeat_ngram_size, min_new_tokens, device
        )
        if decode_step == "dynamic":
            step_state = _StepState(self, batch, device, use_cache, keep_units=contrastive)
        else:
            slots = max_new_tokens + contrastive  # contrastive search reads one candidate past the last token
            step_state = _StaticStepState(self, batch, device, contrastive, slots, decode_step == "compiled")
        context = GrowingBuffer() if contrastive else None  # h_j of the positions read so far
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        unit_counts = torch.zeros(batch, dtype=torch.long, device=device)
        records: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (rows, classes, states) per step
        entity_temperature = entity_temperature or config.entity_temperature

        length = 1
        for step in range(max_new_tokens):
            tokens = buffer[:, :length]
            reads_sent = (tokens[:, -1] == config.sent_token_id) & ~finished
            any_sent = bool(reads_sent.any())
            unit_embed = None
            if any_sent:
                unit_counts += reads_sent.long()
                if config.use_entity:
                    unit_embed = self._plan_units(
                        step_state, tokens, reads_sent, unit_counts, do_sample, entity_temperature, generator, records,
                        plan,
                    )
            hidden = step_state.decode(tokens, unit_embed, encoder_hidden, attention_mask, reads_sent, any_sent)
            if context is not None:
                context.append(hidden.float())
            if step + 1 < len(prompt):
                next_tokens = torch.full_like(tokens[:, 0], prompt[step + 1])
            else:
                logits = step_logits(hidden[:, -1]).float()
                if max_units is not None and config.sent_token_id is not None:
                    logits[unit_counts >= max_units, config.sent_token_id] = float("-inf")
                logits = processors(tokens, logits)
                if contrastive:
                    probs = torch.softmax(logits, dim=-1)
                    top_probs, candidates = probs.topk(top_k, dim=-1)  # [B, k]
                    ahead = step_state.lookahead(tokens, candidates, encoder_hidden, attention_mask, encoder_mask)
                    scores = contrastive_scores(top_probs, ahead.float(), context.view(), penalty_alpha)
                    next_tokens = candidates.gather(1, scores.argmax(dim=-1, keepdim=True))[:, 0]
                elif do_sample:
                    probs = torch.softmax(logits, dim=-1)
                    next_tokens = torch.multinomial(probs, 1, generator=generator)[:, 0]
                else:
                    next_tokens = logits.argmax(dim=-1)
            next_tokens = torch.where(finished, config.pad_token_id, next_tokens)
            buffer[:, length] = next_tokens
            length += 1
            finished |= next_tokens == config.eos_token_id
            if bool(finished.all()):
                break
        tokens = buffer[:, :length]

        self.train(was_training)
        entity_ids, state_ids = _stack_records(records, batch, device) if config.use_entity else (None, None)
        return EricGenerationOutput(tokens, entity_ids, state_ids)

    def step_logits(self, encoder_hidden: torch.Tensor, encoder_mask: torch.Tensor | None):
        """hidden [B, d] -> next-token logits for this call's inputs: the LM head. A baseline that mixes
        in something computed once from the encoder output (PlanAhead's plan) overrides it."""
        return self.lm_logits

    def _plan_units(self, step_state, tokens, reads_sent, unit_counts, do_sample, entity_temperature, generator, records,
                    plan: UnitPlan | None = None):
        """Entity and state for the rows about to read a sentence token; returns their input [B, 1, d]."""
        config = self.config
        plan_rows = reads_sent if config.first_unit_state else reads_sent & (unit_counts > 1)
        context, keys, values, visible = step_state.planner_inputs(tokens)
        entity_logits = self.entity_planner(context).float()
        if do_sample:
            probs = torch.softmax(entity_logits / entity_temperature, dim=-1)
            classes = torch.multinomial(probs, 1, generator=generator)[:, 0]
        else:
            classes = entity_logits.argmax(dim=-1)
        unit = unit_counts - 1  # the unit about to start, 0-based
        given = _unit_column(plan.entity_ids, unit) if plan is not None else None
        if given is not None:
            classes = torch.where(given >= 0, given, classes)
        classes = torch.where(plan_rows, classes, 0)
        unit_embed = self.entity_embedding(classes)
        state_ids = torch.full_like(classes, -1)
        if config.use_state:
            predicted = self.state_predictor((context + unit_embed)[:, None], keys, values, visible)[:, 0]
            has_entity = classes > 0
            # nearest + lookup: the quantizer's ids and state values without its training-only
            # dense-gradient and straight-through arithmetic (values equal to float rounding)
            nearest, states = self.state_space.nearest_states(predicted)
            forced = _forced_states(plan, unit, self.state_space.num_states, generator)
            if forced is not None:
                nearest = torch.where(forced >= 0, forced, nearest)
                states = self.state_space.lookup(nearest)
            state_ids = torch.where(has_entity, nearest, -1)
            state_embed = self.state_input(states.to(self.state_input.weight.dtype))
            unit_embed = unit_embed + state_embed * has_entity[:, None].to(state_embed.dtype)
        records.append((reads_sent, classes, state_ids))
        return unit_embed[:, None]

    def _logits_processors(self, do_sample, temperature, top_k, top_p, no_repeat, min_new_tokens, device):
        processors = LogitsProcessorList()
        if no_repeat:
            processors.append(NoRepeatNGramLogitsProcessor(no_repeat))
        if min_new_tokens:
            # the decoder start token is not "new", as in transformers
            processors.append(MinNewTokensLengthLogitsProcessor(1, min_new_tokens, self.config.eos_token_id, device))
        processors.extend(sampling_warpers(do_sample, temperature, top_k, top_p))
        return processors


def _forced_states(plan: UnitPlan | None, unit: torch.Tensor, num_states: int, generator) -> torch.Tensor | None:
    """The state id each row must take at `unit` (-1: its own prediction), or None."""
    if plan is None:
        return None
    if plan.random_states:
        return torch.randint(num_states, unit.shape, generator=generator, device=unit.device)
    return _unit_column(plan.state_ids, unit)


def sampling_warpers(do_sample: bool, temperature: float, top_k: int, top_p: float) -> LogitsProcessorList:
    """Temperature, top-k and top-p, as transformers' sampling applies them (none when greedy)."""
    warpers = LogitsProcessorList()
    if do_sample:
        if temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(temperature))
        if top_k:
            warpers.append(TopKLogitsWarper(top_k))
        if top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p))
    return warpers


def contrastive_scores(
    probs: torch.Tensor, candidate_hidden: torch.Tensor, context_hidden: torch.Tensor, alpha: float
) -> torch.Tensor:
    """SimCTG's score of each candidate: probs [B, k], candidate_hidden [B, k, d], context_hidden [B, T, d]
    -> (1 - alpha) * p - alpha * max_j cos(h_v, h_j), [B, k] (as yxuansu/SimCTG story_generation/utlis.py:109-123)."""
    candidates = torch.nn.functional.normalize(candidate_hidden, dim=-1)
    context = torch.nn.functional.normalize(context_hidden, dim=-1)
    degeneration = torch.bmm(candidates, context.transpose(1, 2)).amax(dim=-1)  # [B, k]
    return (1.0 - alpha) * probs - alpha * degeneration


def _stack_records(records, batch: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-step plans -> [B, U] entity classes (-100 = no unit) and state ids (-1 = none)."""
    if not records:
        empty = torch.zeros(batch, 0, dtype=torch.long, device=device)
        return empty, empty.clone()
    rows, classes, states = (torch.stack(x) for x in zip(*records))  # [K, B] each
    column = rows.long().cumsum(0) - 1
    width = int(rows.sum(0).max())
    step, row = rows.nonzero(as_tuple=True)
    entity_ids = torch.full((batch, width), NO_UNIT, dtype=torch.long, device=device)
    state_ids = torch.full((batch, width), -1, dtype=torch.long, device=device)
    entity_ids[row, column[step, row]] = classes[step, row]
    state_ids[row, column[step, row]] = states[step, row]
    return entity_ids, state_ids


class _StepState:
    """One decoding step, with the KV cache or by re-running the whole prefix."""

    def __init__(self, model, batch: int, device: torch.device, use_cache: bool, keep_units: bool = False,
                 cache=None):
        """`cache`: the cache to read on (a StaticEricCache), else a new dynamic one when `use_cache`."""
        self.model = model
        self.use_cache = use_cache
        self.keep_units = keep_units  # cached path too: every position's entity input (contrastive lookahead)
        self.predictor = getattr(model, "state_predictor", None)
        self.cache = cache if cache is not None else EricCache.empty(model.config) if use_cache else None
        plans = use_cache and model.config.use_entity  # a model that plans no entity needs no planner memory
        self.memory = PlannerMemory(batch, device, self.predictor) if plans else None
        self.unit_embeds: torch.Tensor | None = None  # no-cache path: every position's entity input
        self.hidden: torch.Tensor | None = None  # no-cache path: last full pass

    def decode(self, tokens, unit_embed, encoder_hidden, encoder_mask, reads_sent, any_sent) -> torch.Tensor:
        model = self.model
        if self.use_cache:
            hidden = self._cached_step(tokens[:, -1:], unit_embed, encoder_hidden, encoder_mask, any_sent)
            if self.memory is not None:
                self.memory.update(hidden, reads_sent, any_sent)
            if self.keep_units:
                self._keep_unit(unit_embed, encoder_hidden, tokens.shape[0])
            return hidden
        self._keep_unit(unit_embed, encoder_hidden, tokens.shape[0])
        self.hidden = model.decode(tokens, self.unit_embeds, encoder_hidden, encoder_mask)
        return self.hidden[:, -1:]

    def _cached_step(self, token, unit_embed, encoder_hidden, encoder_mask, any_sent) -> torch.Tensor:
        """One token [B, 1] read on the cache; `any_sent`: some row reads a sentence token."""
        self.cache.reads_sent = any_sent
        return self.model.decode(token, unit_embed, encoder_hidden, encoder_mask, self.cache)

    def _read_ahead(self, token, encoder_hidden, encoder_mask) -> torch.Tensor:
        """The last-layer state [B, 1, d] of one token read on the cache, then forgotten."""
        cache, length = self.cache, self.cache.length
        cache.reads_sent = None
        hidden = self.model.decode(token, None, encoder_hidden, encoder_mask, cache)
        cache.attention.crop(-1)  # drop the candidate's position
        cache.length = length
        return hidden

    def _keep_unit(self, unit_embed, encoder_hidden, batch: int) -> None:
        if unit_embed is None:
            unit_embed = encoder_hidden.new_zeros(batch, 1, self.model.config.d_model)
        self.unit_embeds = unit_embed if self.unit_embeds is None else torch.cat([self.unit_embeds, unit_embed], 1)

    def lookahead(self, tokens, candidates, encoder_hidden, step_mask, encoder_mask) -> torch.Tensor:
        """Last-layer state [B, k, d] of each candidate [B, k] read after `tokens` (the contrastive search's h_v).

        With the KV cache and no state attention: one step per candidate on the cache, rolled back
        after each. Otherwise the whole prefix plus each candidate, the k candidates in one batch."""
        model = self.model
        if self.use_cache and not model.config.use_state_attention:
            ahead = [self._read_ahead(candidates[:, c : c + 1], encoder_hidden, step_mask)
                     for c in range(candidates.shape[1])]
            return torch.cat(ahead, dim=1)
        batch, k = candidates.shape
        expand = lambda x: x.repeat_interleave(k, dim=0)  # noqa: E731  row b's candidates are rows b*k .. b*k+k-1
        ahead = torch.cat([expand(tokens), candidates.reshape(-1, 1)], dim=1)
        units = torch.cat([self.unit_embeds, self.unit_embeds.new_zeros(batch, 1, self.unit_embeds.shape[-1])], 1)
        mask = None if encoder_mask is None else expand(encoder_mask)
        hidden = model.decode(ahead, expand(units), expand(encoder_hidden), mask)
        return hidden[:, -1].reshape(batch, k, -1)

    def planner_inputs(self, tokens):
        """q_{n-1} [B, d] and the predictor's keys/values/visibility for the unit about to start."""
        model = self.model
        if self.use_cache:
            keys, values = self.memory.key_values()
            return self.memory.context(model.dtype), keys, values, None  # None: every position read so far is visible
        # training-time code path: layout of the whole prefix, last unit of each row
        config = model.config
        hidden = torch.cat([self.hidden, self.hidden.new_zeros(self.hidden[:, :1].shape)], dim=1)
        layout = UnitLayout.from_ids(tokens, config.sent_token_id, config.pad_token_id)
        rows = torch.arange(tokens.shape[0], device=tokens.device)
        last = (layout.unit_exists.sum(1) - 1).clamp(min=0)
        context = layout.previous_unit_means(hidden)[rows, last]
        visible = layout.keys_before_units()[rows, last][:, None]
        keys = values = None
        if self.predictor is not None:
            keys, values = self.predictor.memory(hidden)
        return context, keys, values, visible


class _StaticStepState(_StepState):
    """The cached step on fixed shapes (eric/model/static_decoding.py), eager or compiled."""

    def __init__(self, model, batch: int, device, keep_units: bool, max_length: int, compiled: bool):
        cache = StaticEricCache.empty(model, batch, max_length, device, model.dtype)
        super().__init__(model, batch, device, use_cache=True, keep_units=keep_units, cache=cache)
        self.step = StaticDecodeStep(model, compiled)

    def _cached_step(self, token, unit_embed, encoder_hidden, encoder_mask, any_sent) -> torch.Tensor:
        if any_sent:
            self.cache.expect_key()
        return self.step(self.cache, token, unit_embed, encoder_hidden, encoder_mask)

    def _read_ahead(self, token, encoder_hidden, encoder_mask) -> torch.Tensor:
        hidden = self.step(self.cache, token, None, encoder_hidden, encoder_mask)
        self.cache.rollback()
        return hidden
