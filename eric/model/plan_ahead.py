"""PlanAhead (Kang and Hovy, EMNLP 2020, "Plan ahead: Self-Supervised Text Planning for
Paragraph Completion Task"), a stage-one baseline: BART with `<sent>` units (ERIC's `bart`
variant) plus a planner that predicts the target's keywords from the encoded input, mixed
into every decoding step through a learned gate.

    params.yaml  model.variants.plan_ahead: {kind: plan_ahead, options: {num_keywords: 10, keyword_pos: noun_verb}}

With H the encoder's last hidden states of the source and h_t the decoder's last hidden
state at step t:

    p_plan(w)  = softmax(W_o tanh(W_p mean(H)) + b_o)          once per input
    g_t        = sigmoid(w_g . h_t + b_g)                       per step
    p(w | <t)  = g_t p_LM(w | <t) + (1 - g_t) p_plan(w)

computed in log space, log p = logaddexp(log g_t + log p_LM, log(1 - g_t) + log p_plan),
with log g = logsigmoid(z) and log(1 - g) = logsigmoid(-z), so no probability is ever
rounded to 0 before its log. `logits` of the output are these log-probabilities (a
softmax of them is the mixture), so the samplers (top-p sees the mixture) and the
coherence scores read the mixture. The training loss takes the gold tokens' mixture
directly (`mixture_nll`: BART's logsumexp plus a gather), and with labels the full
`logits` are computed without gradient: a training step costs about BART's.

    loss = L_LM (NLL of the mixture) + plan_weight * L_plan
    L_plan = mean over targets of -1/|K| sum_{w in K} log p_plan(w)

L_plan is a bag-of-words NLL over the target's keyword tokens K (multi-label BCE would
train per-token sigmoids that do not form the distribution the mixture uses).

Keyword targets (eric/model/plan_ahead.py `KeywordTargets`): nouns and verbs by TF-IDF.
The document frequencies come from the training split's targets, counted once when the
training job is prepared (`collator_extras`, called by stages/train_stage_one.py), not per
step; a row's keywords are then picked the first time the collator sees it and cached by
row id. Words are lower-cased runs of letters of 3+ characters that are not spaCy's English
stop words, plus the entity placeholders `<eN>` (they stand for the names that TF-IDF would
pick in the original text); `<sent>` and other special tokens are not words. score = tf *
idf with idf = ln((1 + N) / (1 + df)) + 1 (scikit-learn's smoothed IDF), both counted over
every word. `keyword_pos: noun_verb` (the default; the paper finds noun + verb keywords the
most effective) then keeps, in that order, only the words spaCy's tagger (en_core_web_sm,
tok2vec + tagger + attribute ruler; `letter_pos`) tags NOUN, PROPN or VERB at least once in
the target, and the placeholders; `keyword_pos: any` keeps every word. The top
`num_keywords` are chosen, ties broken by first occurrence. The training targets are tagged
in one batched pass when the job is prepared (about 55 s for the ~2,700 WikiPlots training
targets on one CPU thread), other targets with their batch. K is the set of token ids (of
this project's tokenizer) covering every occurrence of those words in the target, so the
plan puts its mass on exactly the tokens the decoder has to write.

Choices the paper leaves open or that differ from it here:
- the planner reads the mean of the encoder states (masked), through one tanh layer (the
  shape of BART's classification head), and its output matrix is its own (d x V, "additional
  parameters for planning"); `tie_plan_head: true` reuses the LM head's matrix instead, so
  the planner adds only d x d + d + V (+ the gate);
- the gate reads the decoder's last hidden state, as the issue specifies; it starts at
  g = 0.5 (zero bias);
- keywords are ranked by TF-IDF and restricted to nouns and verbs (the paper's abstract: "a
  combination of noun and verb types of keywords is the most effective"); how the original
  scores and tags keywords (its extractor, its tagger, whether proper nouns count) was not
  checked against its code, which was not found;
- the forward without `keyword_ids` (e.g. evaluation's likelihood scores) gives the LM loss
  of the mixture only; sampling is top-p 0.9 like every system.
Parameter overhead at bart-base: `eric.model.variants.parameter_counts` (printed by benchmarks/bench_model.py).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Literal

import torch
from huggingface_hub.dataclasses import strict
from pydantic import BaseModel, ConfigDict, Field
from torch import nn
from torch.nn import functional as F
from transformers import AutoConfig
from transformers.models.bart.modeling_bart import shift_tokens_right

from eric.model import losses
from eric.model.config import EricConfig
from eric.model.modeling_eric import NEW_MODULES, EricForConditionalGeneration, EricOutput

IGNORE = -100
# a placeholder (group 1), any other <...> special token (skipped), or a run of letters (group 2)
WORD = re.compile(r"(<e\d+>)|<[^<>\s]+>|([A-Za-z]+)")
MIN_WORD_LENGTH = 3
KEYWORD_POS = ("noun_verb", "any")  # the keyword candidates: nouns and verbs (the paper's best), or every word
NOUN_VERB = frozenset({"NOUN", "PROPN", "VERB"})  # spaCy's coarse tags kept by noun_verb
PLACEHOLDER_NAME = "Ann"  # what the tagger reads in place of a placeholder <eN>


class PlanAheadOptions(BaseModel):
    """`options` of a `kind: plan_ahead` variant (each also a PlanAheadConfig field)."""

    model_config = ConfigDict(extra="forbid")
    num_keywords: int = Field(10, ge=1)  # keyword words per target
    plan_weight: float = Field(1.0, ge=0)  # weight of L_plan
    tie_plan_head: bool = False  # true: the plan's output matrix is the LM head's
    keyword_pos: Literal["noun_verb", "any"] = "noun_verb"  # keyword candidates: nouns and verbs, or any word


@strict
class PlanAheadConfig(EricConfig, options=PlanAheadOptions):
    model_type = "eric_plan_ahead"


@dataclass
class PlanAheadOutput(EricOutput):
    plan_loss: torch.Tensor | None = None
    plan_logits: torch.Tensor | None = None  # [B, V], before the softmax
    gate_mean: torch.Tensor | None = None  # mean g over the target's tokens (diagnostic)


# -- the mixture and the losses --
def mixture_log_probs(lm_logits: torch.Tensor, plan_logits: torch.Tensor, gate_logits: torch.Tensor) -> torch.Tensor:
    """log(g p_LM + (1 - g) p_plan) in float32: lm_logits [..., V], plan_logits broadcastable to
    them, gate_logits [..., 1] (g = sigmoid). Stable: logaddexp of the two log terms."""
    gate = gate_logits.float()
    lm = F.log_softmax(lm_logits.float(), dim=-1) + F.logsigmoid(gate)
    plan = F.log_softmax(plan_logits.float(), dim=-1) + F.logsigmoid(-gate)
    return torch.logaddexp(lm, plan)


def mixture_nll(lm_logits: torch.Tensor, plan_logits: torch.Tensor, gate_logits: torch.Tensor,
                labels: torch.Tensor) -> torch.Tensor:
    """Mean NLL of the mixture over the labelled tokens, from the gold tokens' log-probabilities
    only: lm_logits [B, T, V], plan_logits [B, V], gate_logits [B, T, 1], labels [B, T] (IGNORE =
    padding). Equals cross-entropy on `mixture_log_probs`, at the cost of BART's own LM loss."""
    gold = labels.clamp(min=0)
    lm = lm_logits.float()
    log_lm = lm.gather(-1, gold[..., None])[..., 0] - torch.logsumexp(lm, dim=-1)
    log_plan = F.log_softmax(plan_logits.float(), dim=-1).gather(1, gold)
    gate = gate_logits[..., 0].float()
    log_p = torch.logaddexp(F.logsigmoid(gate) + log_lm, F.logsigmoid(-gate) + log_plan)
    return -log_p[labels != IGNORE].mean()


def keyword_loss(plan_logits: torch.Tensor, keyword_ids: torch.Tensor) -> torch.Tensor:
    """L_plan: plan_logits [B, V], keyword_ids [B, K] (IGNORE = padding). Per target the mean
    NLL of its keyword tokens under p_plan, then the mean over targets with keywords."""
    log_probs = F.log_softmax(plan_logits.float(), dim=-1)
    valid = keyword_ids != IGNORE
    nll = -log_probs.gather(1, keyword_ids.clamp(min=0)) * valid
    counts = valid.sum(1)
    kept = counts > 0
    if not kept.any():
        return plan_logits.sum() * 0.0
    return (nll.sum(1)[kept] / counts[kept]).mean()


# -- keyword targets --
def candidate_words(text: str) -> list[tuple[str, int, int]]:
    """(word, start, end) of the candidate keywords of a target, in order."""
    found = []
    for match in WORD.finditer(text):
        if match.group(1):
            found.append((match.group(1), match.start(), match.end()))
        elif match.group(2) and len(match.group(2)) >= MIN_WORD_LENGTH:
            word = match.group(2).lower()
            if word not in stop_words():
                found.append((word, match.start(), match.end()))
    return found


def noun_verb_words(text: str, pos: list[str]) -> frozenset[str]:
    """The candidate words of `text` tagged a noun, proper noun or verb at least once (`pos`:
    `letter_pos` of the text), and its placeholders (they stand for names)."""
    kept = set()
    letters = 0
    for match in WORD.finditer(text):
        if match.group(1):
            kept.add(match.group(1))
        elif match.group(2):
            if pos[letters] in NOUN_VERB:
                kept.add(match.group(2).lower())
            letters += 1
    return frozenset(kept)


def letter_pos(texts: list[str], batch_size: int = 64) -> list[list[str]]:
    """Per text, spaCy's coarse part of speech (`token.pos_`) of each run of letters that
    `WORD` finds, in order: the tag of the token the run starts in. The tagger reads the text
    without its special tokens and with every placeholder as a name ("Ann"), so that
    `<e0>'s house` is tagged like a name's house; runs of letters never straddle tokens'
    starts here except inside contractions (don't: do + n't), where the first token's tag
    is taken."""
    from eric.data.nlp import load_tagger

    cleaned, runs = [], []
    for text in texts:
        parts, starts, shift = [], [], 0
        last = 0
        for match in WORD.finditer(text):
            parts.append(text[last:match.start()])
            last = match.end()
            if match.group(2):
                starts.append(match.start() + shift)
                parts.append(match.group(2))
            elif match.group(1):
                parts.append(PLACEHOLDER_NAME)
                shift += len(PLACEHOLDER_NAME) - len(match.group(1))
            else:  # <sent> and the like: dropped with the space after it
                if text[last:last + 1].isspace():
                    last += 1
                shift -= last - match.start()
        parts.append(text[last:])
        cleaned.append("".join(parts))
        runs.append(starts)
    tags = []
    for doc, starts in zip(load_tagger().pipe(cleaned, batch_size=batch_size), runs):
        token_starts = [token.idx for token in doc]
        tags.append([doc[bisect_right(token_starts, start) - 1].pos_ for start in starts])
    return tags


def stop_words() -> frozenset[str]:
    global _STOP_WORDS
    if _STOP_WORDS is None:
        from spacy.lang.en.stop_words import STOP_WORDS  # spaCy: already a dependency (preprocess)

        _STOP_WORDS = frozenset(STOP_WORDS)
    return _STOP_WORDS


_STOP_WORDS: frozenset[str] | None = None


class KeywordTargets:
    """Keyword token ids per target: TF-IDF over `candidate_words`, IDF from the training targets.

        keywords = KeywordTargets.fit(tokenizer, train_targets, num_keywords=10)
        keywords.words(target)       # the chosen words, best first
        keywords.token_ids(target)   # the ids of the tokens covering their occurrences

    TF and IDF count every candidate word whatever its part of speech; `keyword_pos="noun_verb"`
    (the default) then chooses, in TF-IDF order, only words tagged a noun or verb somewhere in
    the target (`noun_verb_words`). The training targets are tagged once, in `fit`, in one
    batched pass; any other target with the other new rows of its batch.
    """

    def __init__(self, tokenizer, idf: dict[str, float], default_idf: float, num_keywords: int,
                 keyword_pos: str = "noun_verb"):
        if keyword_pos not in KEYWORD_POS:
            raise ValueError(f"keyword_pos must be one of {KEYWORD_POS}, not {keyword_pos!r}")
        self.tokenizer = tokenizer
        self.idf = idf
        self.default_idf = default_idf  # a word no training target has
        self.num_keywords = num_keywords
        self.keyword_pos = keyword_pos
        self.allowed: dict[str, frozenset[str]] = {}  # noun_verb: per target text, until its row is cached
        self.cache: dict[str, list[int]] = {}

    @classmethod
    def fit(cls, tokenizer, targets: list[str], num_keywords: int, keyword_pos: str = "noun_verb") -> "KeywordTargets":
        if not targets:
            raise ValueError("PlanAhead keywords need training targets to count document frequencies")
        df = Counter(w for text in targets for w in {w for w, _, _ in candidate_words(text)})
        n = len(targets)
        idf = {w: math.log((1 + n) / (1 + d)) + 1 for w, d in df.items()}
        keywords = cls(tokenizer, idf, math.log(1 + n) + 1, num_keywords, keyword_pos)
        keywords.tag(targets)
        return keywords

    def tag(self, texts: list[str]) -> None:
        """noun_verb: `allowed` words of the texts not tagged yet, in one batched tagger pass."""
        if self.keyword_pos != "noun_verb":
            return
        new = list(dict.fromkeys(t for t in texts if t not in self.allowed))
        for text, pos in zip(new, letter_pos(new) if new else []):
            self.allowed[text] = noun_verb_words(text, pos)

    def words(self, text: str) -> list[str]:
        found = candidate_words(text)
        tf = Counter(w for w, _, _ in found)
        first = {}
        for i, (w, _, _) in enumerate(found):
            first.setdefault(w, i)
        if self.keyword_pos == "noun_verb":
            self.tag([text])
            tf = Counter({w: c for w, c in tf.items() if w in self.allowed[text]})
        ranked = sorted(tf, key=lambda w: (-tf[w] * self.idf.get(w, self.default_idf), first[w]))
        return ranked[: self.num_keywords]

    def token_ids(self, text: str) -> list[int]:
        chosen = set(self.words(text))
        spans = [(s, e) for w, s, e in candidate_words(text) if w in chosen]
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = []
        for token, (start, end) in zip(encoded["input_ids"], encoded["offset_mapping"]):
            if token not in ids and any(start < e and end > s for s, e in spans):
                ids.append(token)
        return ids

    def for_rows(self, rows: list[dict]) -> torch.Tensor:
        """[B, K] keyword token ids of the rows' targets, IGNORE-padded; cached by row id (noun_verb:
        the batch's rows not cached yet are tagged together)."""
        self.tag([row["target"] for row in rows if row.get("id") is None or row["id"] not in self.cache])
        lists = []
        for row in rows:
            key = row.get("id")
            if key is None or key not in self.cache:
                ids = self.token_ids(row["target"])
                if key is None:
                    lists.append(ids)
                    continue
                self.cache[key] = ids
                self.allowed.pop(row["target"], None)  # the row's ids are cached: its tags are done with
            lists.append(self.cache[key])
        out = torch.full((len(rows), max(1, max(map(len, lists), default=0))), IGNORE, dtype=torch.long)
        for i, ids in enumerate(lists):
            out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return out


class KeywordExtras:
    """The collator's `extras`: adds `keyword_ids` to a batch (picklable, unlike a lambda)."""

    def __init__(self, keywords: KeywordTargets):
        self.keywords = keywords

    def __call__(self, rows: list[dict], batch: dict) -> dict:
        return {"keyword_ids": self.keywords.for_rows(rows)}


# -- the model --
class PlanHead(nn.Module):
    """p_plan's logits from the encoder states: mean -> tanh(dense) -> vocabulary."""

    def __init__(self, d_model: int, vocab_size: int, tied: bool):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.out = None if tied else nn.Linear(d_model, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, encoder_hidden, encoder_mask, output_weight: torch.Tensor) -> torch.Tensor:
        if encoder_mask is None:
            pooled = encoder_hidden.mean(1)
        else:
            mask = encoder_mask[..., None].to(encoder_hidden.dtype)
            pooled = (encoder_hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
        hidden = torch.tanh(self.dense(pooled))
        weight = output_weight if self.out is None else self.out.weight
        return F.linear(hidden, weight) + self.bias


class PlanAheadForConditionalGeneration(EricForConditionalGeneration):
    config_class = PlanAheadConfig
    new_modules = (*NEW_MODULES, "plan_head", "plan_gate")

    def __init__(self, config: PlanAheadConfig):
        super().__init__(config)
        self.plan_head = PlanHead(config.d_model, config.vocab_size, config.tie_plan_head)
        self.plan_gate = nn.Linear(config.d_model, 1)
        self.post_init()

    @classmethod
    def collator_extras(cls, config, tokenizer, train_rows: list[dict]) -> KeywordExtras:
        """Document frequencies from the training targets, once per training job."""
        keywords = KeywordTargets.fit(tokenizer, [r["target"] for r in train_rows], config.num_keywords,
                                      config.keyword_pos)
        return KeywordExtras(keywords)

    @classmethod
    def batch_extras(cls, config, tokenizer, rows, batch):
        raise ValueError("PlanAhead's keyword targets need the training split's IDF: use collator_extras")

    def resize_token_embeddings(self, new_num_tokens: int, pad_to_multiple_of=None, mean_resizing=True):
        if hasattr(self, "plan_head") and new_num_tokens != self.plan_head.bias.shape[0]:
            raise ValueError("resize PlanAhead's vocabulary before the plan head exists (from_bart does)")
        return super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)

    def plan_logits(self, encoder_hidden: torch.Tensor, encoder_mask: torch.Tensor | None) -> torch.Tensor:
        return self.plan_head(encoder_hidden, encoder_mask, self.lm_head.weight)

    def mixture(self, hidden: torch.Tensor, plan_logits: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of the mixture for decoder states `hidden` [..., d] of one or more
        inputs whose plan logits broadcast against them."""
        return mixture_log_probs(self.lm_logits(hidden), plan_logits, self.plan_gate(hidden))

    # generation (eric/model/generation.py) and coherence scoring (eric/evaluate/coherence.py)
    def step_logits(self, encoder_hidden, encoder_mask):
        return partial(self.mixture, plan_logits=self.plan_logits(encoder_hidden, encoder_mask))

    def row_logits(self, out: PlanAheadOutput, row: int, positions) -> torch.Tensor:
        return self.mixture(out.decoder_last_hidden_state[row, positions], out.plan_logits[row])

    def forward(self, input_ids=None, attention_mask=None, labels=None, decoder_input_ids=None,
                encoder_hidden_states=None, keyword_ids=None, **kwargs) -> PlanAheadOutput:
        config = self.config
        if encoder_hidden_states is None:
            encoder_hidden_states = self.encode(input_ids, attention_mask)
        if decoder_input_ids is None and labels is not None:
            decoder_input_ids = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask,
                              decoder_input_ids=decoder_input_ids, encoder_hidden_states=encoder_hidden_states,
                              **kwargs)
        out = PlanAheadOutput(**out, plan_logits=self.plan_logits(encoder_hidden_states, attention_mask))
        if self.lm_head_off:  # coherence scoring, the probes: row_logits reads the mixture later
            return out
        hidden = out.decoder_last_hidden_state
        gate_logits = self.plan_gate(hidden)
        if labels is None:
            out.logits = mixture_log_probs(out.logits, out.plan_logits[:, None], gate_logits)
            return out
        out.lm_loss = out.loss = mixture_nll(out.logits, out.plan_logits, gate_logits, labels)
        with torch.no_grad():  # the loss needs only the gold tokens' mixture: no backward over [B, T, V]
            out.logits = mixture_log_probs(out.logits, out.plan_logits[:, None], gate_logits)
        if (labels != IGNORE).any():
            out.gate_mean = torch.sigmoid(gate_logits[..., 0].detach())[labels != IGNORE].mean()
        if keyword_ids is not None:
            out.plan_loss = keyword_loss(out.plan_logits, keyword_ids)
            out.loss = out.loss + config.plan_weight * out.plan_loss
        return out


AutoConfig.register(PlanAheadConfig.model_type, PlanAheadConfig, exist_ok=True)


ARCHITECTURE = PlanAheadForConditionalGeneration  # what a `kind` naming this module builds (eric/model/registry.py)
