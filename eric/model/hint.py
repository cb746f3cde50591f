"""HINT (Guan et al., ACL 2021, "Long Text Generation by Modeling Sentence-Level and
Discourse-Level Coherence") as a stage-one baseline: plain BART reading `<sent>` unit
markers, plus two auxiliary objectives on sentence representations read from the decoder.

    loss = L_LM + similarity_weight * L_Sen + order_weight * L_Dis(shuffled copy)
                + order_normal_weight * L_Dis(the target as written)

Unit representations. HINT reads the decoder state at a special token closing each
sentence. Our targets are `<s> <sent> u1 <sent> u2 ... <sent> uN </s>` and there is no
closing token, so r_n is the last-layer decoder state at the LABEL position of the token
that closes unit n: the `<sent>` opening unit n+1, or `</s>` for the last unit. Under the
causal mask (decoder inputs are the labels shifted right) that state has read exactly
`<s> <sent> u1 ... un`, the whole of unit n and nothing after it; it is the state that
predicts the boundary (`</s>` never enters the decoder as an input, so the state at it
as an input does not exist for the last unit).

HINT's released code (github.com/thu-coai/HINT, commit e43c241; model/finetune.py `_step`,
model/utils.py `Seq2SeqSbertscoreOrderDisDataset`) is what the defaults below follow; each
rule cites it as file:line.

L_Sen (sentence-level similarity). With u_ij = r_i^T W_s r_j / sqrt(d) + b_s,
    s_ij = -1 + 2 sigmoid(u_ij + u_ji)                        (finetune.py:245-246)
    L_Sen = mean_{i, j} max(|s_ij - t_ij| - margin, 0)        (finetune.py:250-254)
s is symmetric and in [-1, 1], so negative teacher cosines are reachable; the mean runs over
all N x N pairs, the diagonal (t_ii = 1) included (HINT's mask is all ones, :250), and the
loss is 0 within the margin. t_ij is the cosine between SentenceBERT embeddings of units i
and j; here the offline all-MiniLM-L6-v2 (eric/evaluate/mauve_score.py) stands in for
SentenceBERT. The targets are computed once by the DVC stage `hint_targets`
(eric/data/hint_targets.py) and joined to the rows by id (`join_targets`).
Options that keep this project's first choices: similarity_score=bilinear (s_ij =
sigmoid(u_ij) in [0, 1], not symmetric), similarity_diagonal=false (pairs i != j). The
first version's loss max(|s - t|, margin) is the hinge plus the constant margin: the same
gradients, so only the logged value differs and no option keeps it.

L_Dis (discourse-level order discrimination). Each training target also enters the decoder
in a shuffled copy: ceil(shuffle_ratio * N) units (at least 2) chosen at random swap places
under a random non-identity permutation. With o_k the original index of the unit at position
k, every pair of positions with 0 < j - i <= order_max_distance (2) is scored,
    p_ij = sigmoid(r_i^T W_o r_j / sqrt(d) + b_o)                  (finetune.py:212, 215)
    label_ij = 1 if 0 < o_j - o_i <= order_max_distance else 0   (finetune.py:224-225)
(the mask of :216-222 keeps j > i within distance 2), trained with binary cross-entropy,
the mean over a text's pairs, then over the texts (:229). HINT scores "normal" texts too:
the training examples whose type (the first field of the `_order.target` line,
utils.py:297-304) is 0, i.e. the unshuffled original, the only ones with an LM loss
(finetune.py:176); their orders are 0..N-1, so every scored pair has label 1. Their order
loss weighs 0.01 and a shuffled text's weighs 1 (`* (1 - 0.99 * normal_labels)`, :229;
`loss += reorder_loss`, :230). Here every row is both: the original (the LM pass, scored with
order_normal_weight 0.01) and its shuffled copy (order_weight 1). The shuffled copy reuses the
encoder output and costs one more decoder pass (no LM head). The shuffle draws from torch's
global generator in the collator (deterministic given the training seed).
This project's first version is order_weight 0.1, order_normal_weight 0 and adjacent pairs
(order_max_distance 1); its label (o_k < o_{k+1}, whatever the distance) is not kept:
order_max_distance 1 labels a pair 1 only when o_{k+1} = o_k + 1.

Weights: lambda_Sen 0.1 (`sbert_loss = 0.1 * ...`, finetune.py:254), margin 0.1 (:252),
lambda_Dis 1 per shuffled text and 0.01 per normal text (:229-230).

Deviations from HINT:
- no BookCorpus pretraining: the two objectives are added to fine-tuning on the project's
  corpus. HINT's separate first phase on any corpus is two runs (README, HINT): train the
  hint variant on the other corpus (its own params file, same tokenizer), then fine-tune
  with `model.init` pointing at that output; `from_bart` below loads such an eric_hint
  checkpoint and keeps its two heads (a plain BART checkpoint gives fresh heads).
- the similarity teacher is all-MiniLM-L6-v2, not SentenceBERT (bert-base-nli).
- HINT reads the sentence representation at a token closing each sentence (its `<mask>`,
  finetune.py:193) and the discourse one at the token after it (:194); here both heads read
  the same r_n (one `<sent>` marker per unit is what every baseline here shares, and the
  generated text keeps it).
- HINT's heads are nn.Linear with a bias vector (finetune.py:125, 127): u_ij =
  (W h_i + b) . h_j, unscaled; here r_i^T W r_j / sqrt(d) plus a scalar bias (a sigmoid that
  does not saturate at init).
- HINT also applies L_Sen to its shuffled examples (the loss has no type mask, :250-254;
  their targets come from its unreleased data script); here L_Sen reads the original order
  only. How HINT shuffles (how many sentences, how often) is in that unreleased script too:
  shuffle_ratio is this project's.
- HINT samples at temperature 0.7 with top-p 0.9 (eval/gen.py:42, 104); the project samples
  every system alike (params.yaml `sample:`, top-p 0.9, temperature 1.0), and `sample` has no
  per-variant setting, so the original's 0.7 is a sampling run of its own (`eric sample
  --temperature 0.7`), not a model option.
- units are the corpus's sentences (`<sent>`), at most 15 per target.

Without the extra batch inputs (evaluation's plain collator, generation) the model is
BART: forward gives the LM loss only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

import torch
from huggingface_hub.dataclasses import strict
from pydantic import BaseModel, ConfigDict, Field
from torch import nn
from torch.nn import functional as F
from transformers import AutoConfig
from transformers import initialization as init
from transformers.models.bart.modeling_bart import shift_tokens_right

from eric.model.config import EricConfig
from eric.model.modeling_eric import NEW_MODULES, EricForConditionalGeneration, EricOutput

IGNORE = -100
SIMILARITY_COLUMN, UNITS_COLUMN = "hint_similarity", "hint_units"  # joined from the targets stage
INPUTS = ("hint_similarity", "hint_shuffled_labels", "hint_shuffled_orders", "hint_orders")


class HintOptions(BaseModel):
    """`options:` of a `kind: hint` variant (each also a HintConfig field)."""

    model_config = ConfigDict(extra="forbid")
    similarity_weight: float = Field(0.1, ge=0)  # lambda of L_Sen (0: off)
    similarity_margin: float = Field(0.1, ge=0, lt=1)  # Delta in max(|s - t| - Delta, 0)
    similarity_score: Literal["symmetric", "bilinear"] = "symmetric"  # HINT's -1 + 2 sigmoid(u_ij + u_ji) | sigmoid(u_ij)
    similarity_diagonal: bool = True  # L_Sen over all N x N pairs, i = j too (HINT) | i != j only
    order_weight: float = Field(1.0, ge=0)  # lambda of L_Dis on the shuffled copy (0: off, and no copy)
    order_normal_weight: float = Field(0.01, ge=0)  # lambda of L_Dis on the original order (0: off)
    order_max_distance: int = Field(2, ge=1)  # L_Dis pairs 0 < j - i <= this; label 1: 0 < o_j - o_i <= this
    shuffle_ratio: float = Field(0.5, gt=0, le=1)  # share of a target's units shuffled for L_Dis


@strict
class HintConfig(EricConfig, options=HintOptions):
    model_type = "eric_hint"


AutoConfig.register("eric_hint", HintConfig, exist_ok=True)


@dataclass
class HintOutput(EricOutput):
    similarity_loss: torch.Tensor | None = None
    order_loss: torch.Tensor | None = None  # on the shuffled copy
    order_normal_loss: torch.Tensor | None = None  # on the original order


class PairScorer(nn.Module):
    """sigmoid-logit of a pair of representations: a^T W b / sqrt(d) + bias."""

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.bias = nn.Parameter(torch.zeros(1))
        self.scale = 1.0 / math.sqrt(d_model)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a [..., M, d], b [..., K, d] -> logits [..., M, K] (every pair)."""
        return (a @ self.proj(b).transpose(-1, -2)) * self.scale + self.bias


# -- unit representations ----------------------------------------------------------------

def closing_positions(labels: torch.Tensor, sent_id: int, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions [B, N], exists [B, N]): per unit, the label position of the token closing it
    (the next unit's `<sent>`, or `</s>`); the decoder state there has read the whole unit."""
    is_sent = labels == sent_id
    closing = (is_sent & (is_sent.cumsum(1) > 1)) | (labels == eos_id)
    counts = closing.sum(1)
    n = max(int(counts.max()) if counts.numel() else 0, 1)
    positions = torch.zeros(labels.shape[0], n, dtype=torch.long, device=labels.device)
    exists = torch.zeros(labels.shape[0], n, dtype=torch.bool, device=labels.device)
    rows, cols = closing.nonzero(as_tuple=True)
    index = (closing.cumsum(1) - 1)[rows, cols]
    positions[rows, index], exists[rows, index] = cols, True
    return positions, exists


def unit_representations(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """r_n [B, N, d] gathered at `positions` [B, N]."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)[:, None]
    return hidden[rows, positions]


# -- the two losses ----------------------------------------------------------------------

def similarity_scores(logits: torch.Tensor, kind: str = "symmetric") -> torch.Tensor:
    """s_ij from the pair logits u [B, N, N]: symmetric (HINT): -1 + 2 sigmoid(u_ij + u_ji) in
    [-1, 1]; bilinear (this project's first choice): sigmoid(u_ij) in [0, 1], not symmetric."""
    logits = logits.float()
    if kind == "symmetric":
        return 2 * torch.sigmoid(logits + logits.transpose(-1, -2)) - 1
    if kind == "bilinear":
        return torch.sigmoid(logits)
    raise ValueError(f"similarity_score: {kind!r} is not symmetric or bilinear")


def similarity_loss(scores: torch.Tensor, targets: torch.Tensor, exists: torch.Tensor, margin: float,
                    diagonal: bool = True) -> torch.Tensor:
    """L_Sen: mean over the pairs (i, j) of existing units with a target (>= -1) of
    max(|s_ij - t_ij| - margin, 0); the pairs (i, i) count when `diagonal`.
    scores (already s, not logits), targets [B, N, N]; exists [B, N]."""
    pairs = exists[:, :, None] & exists[:, None, :] & (targets >= -1)
    if not diagonal:
        pairs &= ~torch.eye(scores.shape[-1], dtype=torch.bool, device=scores.device)
    if not bool(pairs.any()):
        return scores.sum() * 0.0
    error = (scores.float()[pairs] - targets[pairs].float()).abs()
    return (error - margin).clamp(min=0).mean()


def order_pairs(orders: torch.Tensor, max_distance: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(pairs [B, N, N], labels [B, N, N]) for L_Dis. orders [B, N]: the original index of the
    unit at each position (IGNORE: no unit). Pair (i, j) is scored when 0 < j - i <= max_distance
    (positions in the text as given); its label is 1 when 0 < o_j - o_i <= max_distance (the
    unit at j followed the unit at i, at most max_distance units later, in the original)."""
    n = orders.shape[1]
    position = torch.arange(n, device=orders.device)
    gap = position[None, :] - position[:, None]
    exists = orders != IGNORE
    pairs = exists[:, :, None] & exists[:, None, :] & ((gap > 0) & (gap <= max_distance))[None]
    later = orders[:, None, :] - orders[:, :, None]
    return pairs, (later > 0) & (later <= max_distance)


def order_loss(logits: torch.Tensor, orders: torch.Tensor, max_distance: int = 2) -> torch.Tensor:
    """L_Dis: binary cross-entropy of the pair logits [B, N, N] against `order_pairs`' labels,
    the mean over each text's pairs, then over the texts that have a pair."""
    n = min(logits.shape[1], orders.shape[1])
    pairs, labels = order_pairs(orders[:, :n], max_distance)
    counts = pairs.sum((1, 2))
    if not bool((counts > 0).any()):
        return logits.sum() * 0.0
    bce = F.binary_cross_entropy_with_logits(logits[:, :n, :n].float(), labels.float(), reduction="none")
    per_text = (bce * pairs).sum((1, 2)) / counts.clamp(min=1)
    return per_text[counts > 0].mean()


# -- batch inputs (called by the training collator) --------------------------------------

def unit_spans(row: list[int], sent_id: int, eos_id: int) -> list[tuple[int, int]]:
    """[start, end) of each unit (from its `<sent>`) in one unpadded label row."""
    starts = [i for i, t in enumerate(row) if t == sent_id]
    end = row.index(eos_id) if eos_id in row else len(row)
    return list(zip(starts, [*starts[1:], end]))


def shuffle_units(labels: torch.Tensor, sent_id: int, eos_id: int, ratio: float,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(shuffled labels [B, T], orders [B, N]): per row, ceil(ratio * N) units (at least 2)
    exchange places under a non-identity permutation; orders[b, k] is the original index of
    the unit now at position k (IGNORE past the row's units). Rows with fewer than 2 units
    stay as they are."""
    shuffled = labels.clone()
    orders = []
    for b, row in enumerate(labels.tolist()):
        spans = unit_spans(row, sent_id, eos_id)
        order = shuffled_order(len(spans), ratio, generator)
        if len(order) >= 2:
            pieces = [row[s:e] for s, e in spans]
            start = spans[0][0]
            body = [t for n in order for t in pieces[n]]
            shuffled[b, start:start + len(body)] = torch.tensor(body, dtype=labels.dtype)
        orders.append(order)
    width = max([len(o) for o in orders] + [1])
    out = torch.full((labels.shape[0], width), IGNORE, dtype=torch.long)
    for b, o in enumerate(orders):
        out[b, :len(o)] = torch.tensor(o, dtype=torch.long)
    return shuffled, out


def shuffled_order(n: int, ratio: float, generator: torch.Generator | None = None) -> list[int]:
    """The original index of the unit shown at each position (a non-identity permutation of n >= 2)."""
    if n < 2:
        return list(range(n))
    m = min(n, max(2, math.ceil(ratio * n)))
    chosen = torch.randperm(n, generator=generator)[:m].sort().values.tolist()
    moved = torch.randperm(m, generator=generator).tolist()
    if moved == sorted(moved):  # identity: rotate instead, so the text is really shuffled
        moved = moved[1:] + moved[:1]
    order = list(range(n))
    for slot, k in zip(chosen, moved):
        order[slot] = chosen[k]
    return order


def written_orders(exists: torch.Tensor) -> torch.Tensor:
    """[B, N] orders of the target as written (0, 1, ..., IGNORE past the row's units)."""
    index = torch.arange(exists.shape[1]).expand_as(exists)
    return torch.where(exists, index, torch.full_like(index, IGNORE))


def similarity_targets(rows: list[dict], exists: torch.Tensor) -> torch.Tensor:
    """[B, N, N] cached cosines cropped to the units the collator kept (-100 elsewhere)."""
    batch, n = exists.shape
    out = torch.full((batch, n, n), float(IGNORE))
    for b, row in enumerate(rows):
        kept, size = int(exists[b].sum()), int(row[UNITS_COLUMN])
        if kept > size:
            raise ValueError(f"row {row.get('id')!r}: {kept} units but hint targets for {size}")
        matrix = torch.tensor(row[SIMILARITY_COLUMN], dtype=torch.float).view(size, size)
        out[b, :kept, :kept] = matrix[:kept, :kept]
    return out


class HintForConditionalGeneration(EricForConditionalGeneration):
    config_class = HintConfig
    new_modules = (*NEW_MODULES, "hint_")
    # HINT samples at temperature 0.7 with top-p 0.9 (thu-coai/HINT eval/gen.py:42, 104)
    original_decoding = {"temperature": 0.7, "top_p": 0.9}

    @classmethod
    def batch_extras(cls, config, tokenizer, rows: list[dict], batch: dict) -> dict:
        extras = {}
        labels = batch["labels"]
        if config.order_weight > 0:
            shuffled, orders = shuffle_units(labels, config.sent_token_id, config.eos_token_id, config.shuffle_ratio)
            extras.update(hint_shuffled_labels=shuffled, hint_shuffled_orders=orders)
        if config.order_normal_weight > 0:
            _, exists = closing_positions(labels, config.sent_token_id, config.eos_token_id)
            extras["hint_orders"] = written_orders(exists)
        if config.similarity_weight > 0 and rows and all(SIMILARITY_COLUMN in r for r in rows):
            _, exists = closing_positions(labels, config.sent_token_id, config.eos_token_id)
            extras["hint_similarity"] = similarity_targets(rows, exists)
        return extras

    @classmethod
    def join_targets(cls, rows: list[dict], targets_root: Path, variant: str, split: str) -> list[dict]:
        from eric.data.hint_targets import join

        return join(rows, Path(targets_root) / "hint" / variant / f"{split}.parquet")

    def __init__(self, config: HintConfig):
        super().__init__(config)
        self.hint_similarity_head = PairScorer(config.d_model)
        self.hint_order_head = PairScorer(config.d_model)
        self.post_init()

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, PairScorer):
            init.zeros_(module.bias)

    def forward(self, input_ids=None, attention_mask=None, labels=None, encoder_hidden_states=None,
                hint_similarity=None, hint_shuffled_labels=None, hint_shuffled_orders=None, hint_orders=None,
                **kwargs) -> HintOutput:
        if encoder_hidden_states is None and input_ids is not None:
            encoder_hidden_states = self.encode(input_ids, attention_mask)
        base = super().forward(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                               encoder_hidden_states=encoder_hidden_states, **kwargs)
        out = HintOutput(**{f.name: getattr(base, f.name) for f in fields(base)})
        if out.loss is None or all(x is None for x in (hint_similarity, hint_shuffled_labels, hint_orders)):
            return out  # the auxiliary losses train only with the collator's extras and the LM loss
        c = self.config
        positions, exists = closing_positions(labels, c.sent_token_id, c.eos_token_id)
        reps = unit_representations(out.decoder_last_hidden_state, positions)
        if hint_similarity is not None and c.similarity_weight > 0:
            n = min(reps.shape[1], hint_similarity.shape[1])
            scores = similarity_scores(self.hint_similarity_head(reps[:, :n], reps[:, :n]), c.similarity_score)
            out.similarity_loss = similarity_loss(scores, hint_similarity[:, :n, :n], exists[:, :n],
                                                  c.similarity_margin, c.similarity_diagonal)
            out.loss = out.loss + c.similarity_weight * out.similarity_loss
        if hint_shuffled_labels is not None and c.order_weight > 0:
            out.order_loss = self._order_loss(hint_shuffled_labels, hint_shuffled_orders, encoder_hidden_states,
                                              attention_mask)
            out.loss = out.loss + c.order_weight * out.order_loss
        if hint_orders is not None and c.order_normal_weight > 0:  # the text as written: every pair in order
            out.order_normal_loss = order_loss(self.hint_order_head(reps, reps), hint_orders, c.order_max_distance)
            out.loss = out.loss + c.order_normal_weight * out.order_normal_loss
        return out

    def _order_loss(self, shuffled, orders, encoder_hidden, encoder_mask) -> torch.Tensor:
        """L_Dis on the shuffled copy: one more decoder pass over the same encoder output."""
        c = self.config
        decoder_input_ids = shift_tokens_right(shuffled, c.pad_token_id, c.decoder_start_token_id)
        hidden = self.decode(decoder_input_ids, None, encoder_hidden, encoder_mask)
        positions, _ = closing_positions(shuffled, c.sent_token_id, c.eos_token_id)
        reps = unit_representations(hidden, positions)
        return order_loss(self.hint_order_head(reps, reps), orders, c.order_max_distance)

    @classmethod
    def from_bart(cls, bart_dir, vocab_size=None, **options) -> "HintForConditionalGeneration":
        """As ERIC's; from an eric_hint checkpoint (HINT's first phase, run on another corpus)
        the two heads are kept too, else they start fresh."""
        model = super().from_bart(bart_dir, vocab_size=vocab_size, **options)
        heads = saved_heads(Path(bart_dir))
        if heads:
            model.load_state_dict(heads, strict=False)
        return model


def saved_heads(model_dir: Path) -> dict[str, torch.Tensor]:
    """The hint heads' weights of an eric_hint checkpoint folder ({} for any other checkpoint)."""
    config = model_dir / "config.json"
    if not config.is_file() or json.loads(config.read_text()).get("model_type") != HintConfig.model_type:
        return {}
    from safetensors.torch import load_file

    weights = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        weights.update({k: v for k, v in load_file(path).items() if k.startswith("hint_")})
    return weights


ARCHITECTURE = HintForConditionalGeneration  # what a `kind` naming this module builds (eric/model/registry.py)
