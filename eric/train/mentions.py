"""Stage two: the mention generator, a plain BART seq2seq on stage-two examples.

source = input + separator + stage-one text (placeholders included),
target = "<e0> Ash Williams <e1> Linda <e0> Ash" (eric/data/schema.py STAGE_TWO).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import BartConfig, BartForConditionalGeneration, PreTrainedTokenizerBase

from eric.config import MentionsParams, resolve_path
from eric.train.errors import TrainError

IGNORE = -100


class MentionsCollator:
    """Stage-two rows -> input_ids, attention_mask, labels (`<s> ... </s>`, -100 = padding)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_source_length: int = 512,
                 max_target_length: int = 128):
        self.tokenizer = tokenizer
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length

    def encode(self, row: dict) -> tuple[list[int], list[int]]:
        source = self.tokenizer(row["source"], truncation=True,
                                max_length=self.max_source_length)["input_ids"]
        target = self.tokenizer(row["target"], add_special_tokens=False)["input_ids"]
        body = target[: self.max_target_length - 2]
        return source, [self.tokenizer.bos_token_id, *body, self.tokenizer.eos_token_id]

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        sources, labels = zip(*(self.encode(row) for row in rows))
        input_ids = _pad(sources, self.tokenizer.pad_token_id)
        return {"input_ids": input_ids,
                "attention_mask": (input_ids != self.tokenizer.pad_token_id).long(),
                "labels": _pad(labels, IGNORE)}

    def lengths(self, rows: list[dict]) -> list[int]:
        """Token counts (source + target) for length grouping, in one batched call."""
        sources = self.tokenizer([r["source"] for r in rows], add_special_tokens=False)["input_ids"]
        targets = self.tokenizer([r["target"] for r in rows], add_special_tokens=False)["input_ids"]
        return [min(len(s) + 2, self.max_source_length) + min(len(t) + 2, self.max_target_length)
                for s, t in zip(sources, targets)]


def _pad(rows, value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def build_mentions_model(params: MentionsParams, tokenizer: PreTrainedTokenizerBase,
                         max_positions: int = 1024) -> BartForConditionalGeneration:
    """A fresh BART at the size preset, or a local BART checkpoint (`init`) with its
    embeddings resized to the tokenizer (the ERIC tokens are new rows)."""
    ids = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
               eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.eos_token_id,
               forced_eos_token_id=tokenizer.eos_token_id)
    if params.init:
        init = Path(resolve_path(params.init))
        if not (init / "config.json").is_file():
            raise TrainError(f"mentions.init {init}: no BART checkpoint there (config.json + weights)")
        model = BartForConditionalGeneration.from_pretrained(init, local_files_only=True,
                                                             dropout=params.dropout, **ids)
        model.resize_token_embeddings(len(tokenizer))
        return model
    from eric.model.variants import SIZE_PRESETS

    config = BartConfig(vocab_size=len(tokenizer), max_position_embeddings=max_positions,
                        dropout=params.dropout, **SIZE_PRESETS[params.size], **ids)
    return BartForConditionalGeneration(config)
