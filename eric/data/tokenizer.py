"""The stage-one/stage-two tokenizer: BART's specials plus `<sent>` and `<e0>`..`<eK-1>`.

Two ways to get one, both saved in Hugging Face format (loads with AutoTokenizer):

- `from_pretrained_dir(path)`: a local pretrained tokenizer (e.g. a downloaded
  facebook/bart-base), with the ERIC tokens added;
- `train_bpe(texts, vocab_size)`: a byte-level BPE trained on the training split,
  with BART's special tokens at BART's ids (<s>=0, <pad>=1, </s>=2, <unk>=3,
  <mask>=4) and the ERIC tokens added after the learned vocabulary.

`<sent>` is a special token (dropped by `skip_special_tokens=True`); placeholders
are ordinary added tokens, so decoded stage-one text keeps them. Neither strips
whitespace, so decoding gives back the exact text (a space before a placeholder is
its own token).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from eric.data.schema import SENT_TOKEN, placeholder_tokens

BART_SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


class TokenizerError(ValueError):
    """A tokenizer cannot be built or loaded from what is on disk (one-line message)."""

_ERIC_TOKEN = re.compile(r"<sent>|<e\d+>")


@dataclass(frozen=True)
class SpecialTokenIds:
    """The ids the model config needs."""

    bos: int
    eos: int
    pad: int
    sent: int
    entities: list[int]

    @property
    def decoder_start(self) -> int:
        return self.eos  # BART starts decoding from </s>


def add_eric_tokens(tokenizer: PreTrainedTokenizerBase, max_entities: int) -> PreTrainedTokenizerBase:
    """Add <sent> (special) and the placeholders (ordinary) if missing; idempotent."""
    tokenizer.add_special_tokens(
        {"additional_special_tokens": [AddedToken(SENT_TOKEN, normalized=False, special=True)]},
        replace_extra_special_tokens=False,
    )
    tokenizer.add_tokens([AddedToken(t, normalized=False, special=False) for t in placeholder_tokens(max_entities)])
    return tokenizer


def special_token_ids(tokenizer: PreTrainedTokenizerBase, max_entities: int) -> SpecialTokenIds:
    unk = tokenizer.unk_token_id
    sent = tokenizer.convert_tokens_to_ids(SENT_TOKEN)
    entities = tokenizer.convert_tokens_to_ids(placeholder_tokens(max_entities))
    if sent in (None, unk) or any(i in (None, unk) for i in entities):
        raise TokenizerError(f"tokenizer lacks {SENT_TOKEN} or <e0>..<e{max_entities - 1}>: build it with eric.data.tokenizer")
    return SpecialTokenIds(tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, sent, entities)


def eric_text_decoder(tokenizer: PreTrainedTokenizerBase) -> Callable[[list[int]], str]:
    """Token ids -> text without BART's specials (<s>, </s>, <pad>, ...) but with <sent> and the
    placeholders, whatever kind of added token they are: a pretrained tokenizer may hold the
    placeholders as special tokens (pretrained/bart-tiny-novels), which `skip_special_tokens`
    would drop. The ids to drop are found once, not per decoded row."""
    kept = {i for token, i in tokenizer.get_added_vocab().items() if _ERIC_TOKEN.fullmatch(token)}
    dropped = set(tokenizer.all_special_ids) - kept
    return lambda ids: tokenizer.decode([i for i in ids if i not in dropped], skip_special_tokens=False,
                                        clean_up_tokenization_spaces=False)


def from_pretrained_dir(path: str | Path, max_entities: int) -> PreTrainedTokenizerBase:
    path = Path(path)
    if not path.is_dir():
        raise TokenizerError(f"{path}: no tokenizer directory (download one, e.g. facebook/bart-base, to disk)")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return add_eric_tokens(tokenizer, max_entities)


def strip_eric_tokens(text: str) -> str:
    """Training text for BPE: placeholders and <sent> are whole tokens, not material for merges."""
    return _ERIC_TOKEN.sub(" ", text)


def train_bpe(
    texts: Iterable[str], vocab_size: int, max_entities: int, min_frequency: int = 2
) -> PreTrainedTokenizerFast:
    """A byte-level BPE (GPT-2/BART style) trained on `texts`; vocab_size counts BART's specials."""
    if vocab_size <= len(BART_SPECIAL_TOKENS) + 256:
        raise TokenizerError(f"vocab_size {vocab_size} is too small for a byte-level BPE (needs > 261)")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=BART_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator((strip_eric_tokens(t) for t in texts), trainer)
    bos, eos = bpe.token_to_id("<s>"), bpe.token_to_id("</s>")
    bpe.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
    )
    return add_eric_tokens(tokenizer, max_entities)


def build_tokenizer(
    texts: Iterable[str] | None,
    *,
    pretrained: str | Path | None = None,
    vocab_size: int = 8000,
    max_entities: int = 100,
    min_frequency: int = 2,
) -> PreTrainedTokenizerBase:
    """From a local pretrained tokenizer if given, else a BPE trained on `texts`."""
    if pretrained:
        return from_pretrained_dir(pretrained, max_entities)
    if texts is None:
        raise TokenizerError("training a BPE needs texts")
    return train_bpe(texts, vocab_size, max_entities, min_frequency)


def load_tokenizer(path: str | Path, max_entities: int = 100) -> PreTrainedTokenizerBase:
    """A tokenizer saved by the `tokenizer` stage (checks that the ERIC tokens are there)."""
    path = Path(path)
    if not (path / "tokenizer_config.json").is_file():
        raise TokenizerError(f"{path}: no saved tokenizer (run the `tokenizer` stage first)")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    special_token_ids(tokenizer, max_entities)
    return tokenizer


def training_texts(processed_dir: str | Path) -> Iterator[str]:
    """The BPE's training material: stage-one sources and targets, stage-two mention
    sequences (the names), training split only."""
    processed_dir = Path(processed_dir)
    stage_one = processed_dir / "stage_one" / "train.parquet"
    if not stage_one.is_file():
        raise TokenizerError(f"{stage_one}: no training split (run the preprocess stage first)")
    sources = [(stage_one, ["source", "target"]), (processed_dir / "stage_two" / "train.parquet", ["target"])]
    for path, columns in sources:
        if not path.is_file():
            continue
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024, columns=columns):
            for column in batch.columns:
                yield from (text for text in column.to_pylist() if text)
