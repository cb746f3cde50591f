"""HINT (Guan et al., ACL 2021, "Long Text Generation by Modeling Sentence-Level and
Discourse-Level Coherence") as a stage-one baseline: plain BART reading `<sent>` unit
markers, plus two auxiliary objectives on sentence representations read from the decoder.

    loss = L_LM + similarity_weight * L_Sen + order_weight * L_Dis

Unit representations. HINT reads the decoder state at a special token closing each
sentence. Our targets are `<s> <sent> u1 <sent> u2 ... <sent> uN </s>` and there is no
closing token, so r_n is the last-layer decoder state at the LABEL position of the token
that closes unit n: the `<sent>` opening unit n+1, or `</s>` for the last unit. Under the
causal mask (decoder inputs are the labels shifted right) that state has read exactly
`<s> <sent> u1 ... un`, the whole of unit n and nothing after it; it is the state that
predicts the boundary (`</s>` never enters the decoder as an input, so the state at it
as an input does not exist for the last unit).

L_Sen (sentence-level similarity). For every ordered pair i != j of units of a target,
    s_ij = sigmoid(r_i^T W_s r_j / sqrt(d) + b_s)
    L_Sen = mean_{i != j} max(|s_ij - t_ij|, margin)
with t_ij the cosine between SentenceBERT embeddings of units i and j; here the offline
all-MiniLM-L6-v2 (eric/evaluate/mauve_score.py) stands in for SentenceBERT. The targets
are computed once by the DVC stage `hint_targets` (eric/data/hint_targets.py) and joined
to the rows by id (`join_targets`). The margin (0.1) keeps the model from fitting the
teacher's noise below it, as in HINT (the loss therefore never goes below the margin).
Choices: the bilinear scorer with a bias and the 1/sqrt(d) scale (a sigmoid that does not
saturate at init), ordered pairs (W_s need not be symmetric, and r_j with j > i has read
unit i, so both directions are trained), the mean over pairs of the batch (HINT: 1/n^2).

L_Dis (discourse-level order discrimination). Each training target also enters the
decoder in a shuffled copy: ceil(shuffle_ratio * N) units (at least 2) chosen at random
swap places under a random non-identity permutation (HINT shuffles part of the sentences).
For every adjacent pair (k, k+1) of the shuffled text,
    p_k = sigmoid(r_k^T W_o r_{k+1} / sqrt(d) + b_o)
is trained with binary cross-entropy towards 1 when unit k came before unit k+1 in the
original text, else 0 (mean over the pairs of the batch). The shuffled copy reuses the
encoder output and costs one more decoder pass (no LM head): the LM loss is computed on
the original order only. The shuffle draws from torch's global generator in the collator
(deterministic given the training seed).

Weights: lambda_Sen = lambda_Dis = 0.1 and margin 0.1, as we recall HINT's settings (the
paper is not in this sandbox: unverified).

Deviations from HINT:
- no BookCorpus pretraining: the two objectives are added to fine-tuning on the project's
  corpus. HINT's separate first phase on any corpus is two runs (README, HINT): train the
  hint variant on the other corpus (its own params file, same tokenizer), then fine-tune
  with `model.init` pointing at that output; `from_bart` below loads such an eric_hint
  checkpoint and keeps its two heads (a plain BART checkpoint gives fresh heads).
- the similarity teacher is all-MiniLM-L6-v2, not SentenceBERT (bert-base-nli).
- HINT reads the sentence and discourse representations at special tokens of their own
  (inserted at the end of each sentence); here both heads read the same r_n (one `<sent>`
  marker per unit is what every baseline here shares, and the generated text keeps it).
- units are the corpus's sentences (`<sent>`), at most 15 per target.

Without the extra batch inputs (evaluation's plain collator, generation) the model is
BART: forward gives the LM loss only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path

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
INPUTS = ("hint_similarity", "hint_shuffled_labels", "hint_order_labels")


class HintOptions(BaseModel):
    """`options:` of a `kind: hint` variant."""

    model_config = ConfigDict(extra="forbid")
    similarity_weight: float = Field(0.1, ge=0)  # lambda of L_Sen (0: off)
    order_weight: float = Field(0.1, ge=0)  # lambda of L_Dis (0: off)
    similarity_margin: float = Field(0.1, ge=0, lt=1)  # Delta in max(|s - t|, Delta)
    shuffle_ratio: float = Field(0.5, gt=0, le=1)  # share of a target's units shuffled for L_Dis


@strict
class HintConfig(EricConfig):
    model_type = "eric_hint"

    similarity_weight: float | int = 0.1
    order_weight: float | int = 0.1
    similarity_margin: float | int = 0.1
    shuffle_ratio: float | int = 0.5

    def validate_hint(self):
        HintOptions(similarity_weight=self.similarity_weight, order_weight=self.order_weight,
                    similarity_margin=self.similarity_margin, shuffle_ratio=self.shuffle_ratio)


AutoConfig.register("eric_hint", HintConfig, exist_ok=True)


@dataclass
class HintOutput(EricOutput):
    similarity_loss: torch.Tensor | None = None
    order_loss: torch.Tensor | None = None


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

def similarity_loss(scores: torch.Tensor, targets: torch.Tensor, exists: torch.Tensor, margin: float) -> torch.Tensor:
    """L_Sen: mean over ordered pairs i != j of existing units with a target (>= -1) of
    max(|sigmoid(score) - t|, margin). scores, targets [B, N, N]; exists [B, N]."""
    n = scores.shape[-1]
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=scores.device)
    pairs = exists[:, :, None] & exists[:, None, :] & off_diagonal & (targets >= -1)
    if not bool(pairs.any()):
        return scores.sum() * 0.0
    error = (torch.sigmoid(scores.float()[pairs]) - targets[pairs].float()).abs()
    return error.clamp(min=margin).mean()


def order_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """L_Dis: binary cross-entropy of adjacent-pair logits [B, N-1] against labels (1 = in
    the original order, 0 = not, -100 = no pair), mean over pairs."""
    valid = labels != IGNORE
    if not bool(valid.any()):
        return logits.sum() * 0.0
    return F.binary_cross_entropy_with_logits(logits.float()[valid], labels[valid].float())


# -- batch inputs (called by the training collator) --------------------------------------

def unit_spans(row: list[int], sent_id: int, eos_id: int) -> list[tuple[int, int]]:
    """[start, end) of each unit (from its `<sent>`) in one unpadded label row."""
    starts = [i for i, t in enumerate(row) if t == sent_id]
    end = row.index(eos_id) if eos_id in row else len(row)
    return list(zip(starts, [*starts[1:], end]))


def shuffle_units(labels: torch.Tensor, sent_id: int, eos_id: int, ratio: float,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(shuffled labels [B, T], order labels [B, N-1]): per row, ceil(ratio * N) units (at least
    2) exchange places under a non-identity permutation; pair k is 1 when the unit at k came
    before the unit at k+1 originally. Rows with fewer than 2 units stay as they are, no pairs."""
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
        orders.append([int(a < c) for a, c in zip(order, order[1:])])
    width = max([len(o) for o in orders] + [1])
    pairs = torch.full((labels.shape[0], width), IGNORE, dtype=torch.long)
    for b, o in enumerate(orders):
        pairs[b, :len(o)] = torch.tensor(o, dtype=torch.long)
    return shuffled, pairs


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
    options_model = HintOptions

    @classmethod
    def batch_extras(cls, config, tokenizer, rows: list[dict], batch: dict) -> dict:
        extras = {}
        labels = batch["labels"]
        if config.order_weight > 0:
            shuffled, pairs = shuffle_units(labels, config.sent_token_id, config.eos_token_id, config.shuffle_ratio)
            extras.update(hint_shuffled_labels=shuffled, hint_order_labels=pairs)
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
                hint_similarity=None, hint_shuffled_labels=None, hint_order_labels=None, **kwargs) -> HintOutput:
        if encoder_hidden_states is None and input_ids is not None:
            encoder_hidden_states = self.encode(input_ids, attention_mask)
        base = super().forward(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                               encoder_hidden_states=encoder_hidden_states, **kwargs)
        out = HintOutput(**{f.name: getattr(base, f.name) for f in fields(base)})
        if labels is None:
            return out
        c = self.config
        if hint_similarity is not None and c.similarity_weight > 0:
            positions, exists = closing_positions(labels, c.sent_token_id, c.eos_token_id)
            reps = unit_representations(out.decoder_last_hidden_state, positions)
            n = min(reps.shape[1], hint_similarity.shape[1])
            scores = self.hint_similarity_head(reps[:, :n], reps[:, :n])
            out.similarity_loss = similarity_loss(scores, hint_similarity[:, :n, :n], exists[:, :n],
                                                  c.similarity_margin)
            out.loss = out.loss + c.similarity_weight * out.similarity_loss
        if hint_shuffled_labels is not None and c.order_weight > 0:
            out.order_loss = self._order_loss(hint_shuffled_labels, hint_order_labels, encoder_hidden_states,
                                              attention_mask)
            out.loss = out.loss + c.order_weight * out.order_loss
        return out

    def _order_loss(self, shuffled, pairs, encoder_hidden, encoder_mask) -> torch.Tensor:
        """L_Dis on the shuffled copy: one more decoder pass over the same encoder output."""
        c = self.config
        decoder_input_ids = shift_tokens_right(shuffled, c.pad_token_id, c.decoder_start_token_id)
        hidden = self.decode(decoder_input_ids, None, encoder_hidden, encoder_mask)
        positions, _ = closing_positions(shuffled, c.sent_token_id, c.eos_token_id)
        reps = unit_representations(hidden, positions)
        logits = (reps[:, :-1] * self.hint_order_head.proj(reps[:, 1:])).sum(-1)
        logits = logits * self.hint_order_head.scale + self.hint_order_head.bias
        k = min(logits.shape[1], pairs.shape[1])
        return order_loss(logits[:, :k], pairs[:, :k])

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
