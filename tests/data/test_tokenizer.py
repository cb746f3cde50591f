"""The tokenizer: BART's specials, <sent> and the placeholders as whole tokens, HF format; the stage."""

from __future__ import annotations

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from eric.config import DEFAULT_PARAMS, PROJECT_ROOT
from eric.data.schema import STAGE_ONE, STAGE_TWO
from eric.data.tokenizer import (
    TokenizerError,
    from_pretrained_dir,
    load_tokenizer,
    special_token_ids,
    train_bpe,
)

LINES = [
    "Ash Williams drives to a cabin in the woods with his friends.",
    "<sent> <e0> and <e1> find a tape recorder in the cellar. <sent> The tape releases an evil force.",
    "<sent> <e1> attacks <e0>, who buries her near the cabin. <sent> At dawn <e0> believes the evil has gone.",
    "<e0> Ash Williams <e1> Linda <e0> Ash",
] * 5
TARGET = "<sent> <e0> and <e1> find a tape. <sent> At dawn <e0>'s car is gone!"


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(LINES, vocab_size=400, max_entities=8)


def test_bart_special_tokens_keep_bart_ids(tokenizer):
    assert tokenizer.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>", "<mask>"]) == [0, 1, 2, 3, 4]
    ids = special_token_ids(tokenizer, 8)
    assert (ids.bos, ids.pad, ids.eos, ids.decoder_start) == (0, 1, 2, 2)
    assert len(set(ids.entities)) == 8 and ids.sent not in ids.entities


def test_sentence_token_and_placeholders_are_single_tokens_and_text_round_trips(tokenizer):
    ids = tokenizer(TARGET)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"
    assert tokens.count("<sent>") == 2 and tokens.count("<e0>") == 2 and tokens.count("<e1>") == 1
    assert tokenizer.decode(ids[1:-1]) == TARGET
    # <sent> is special (dropped on request); placeholders are text and stay
    plain = tokenizer.decode(ids, skip_special_tokens=True)
    assert "<sent>" not in plain and "<e0>" in plain and "<s>" not in plain


def test_placeholders_are_not_split_by_the_learned_merges(tokenizer):
    # the BPE never saw "<e" as text: placeholders were stripped from its training lines
    assert not any(t.startswith("<e") and t not in [f"<e{i}>" for i in range(8)] for t in tokenizer.get_vocab())


def test_saved_tokenizer_loads_with_autotokenizer(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded(TARGET)["input_ids"] == tokenizer(TARGET)["input_ids"]
    assert len(load_tokenizer(tmp_path, 8)) == len(tokenizer)


def _plain_pretrained(tmp_path):
    """A tokenizer directory like a downloaded BART one: BART specials, no ERIC tokens."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(["a cabin in the woods"] * 3, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    plain = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                    unk_token="<unk>", mask_token="<mask>")
    plain.save_pretrained(tmp_path)
    return len(plain)


def test_a_local_pretrained_tokenizer_gets_the_eric_tokens_once(tmp_path):
    before = _plain_pretrained(tmp_path / "bart")
    with pytest.raises(TokenizerError, match="lacks <sent>"):
        load_tokenizer(tmp_path / "bart", 8)
    extended = from_pretrained_dir(tmp_path / "bart", max_entities=8)
    assert len(extended) == before + 9
    assert extended.convert_tokens_to_ids("<mask>") == 4
    extended.save_pretrained(tmp_path / "ours")
    again = from_pretrained_dir(tmp_path / "ours", max_entities=8)
    assert len(again) == len(extended)  # idempotent
    assert special_token_ids(again, 8) == special_token_ids(extended, 8)


def test_missing_directories_and_tiny_vocabularies_are_one_line_errors(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer directory"):
        from_pretrained_dir(tmp_path / "nope", 8)
    with pytest.raises(TokenizerError, match="no saved tokenizer"):
        load_tokenizer(tmp_path / "nope")
    with pytest.raises(TokenizerError, match="too small"):
        train_bpe(LINES, vocab_size=200, max_entities=8)


# -- the DVC stage --

@pytest.fixture
def stage(monkeypatch):
    stages = str(PROJECT_ROOT / "stages")
    monkeypatch.syspath_prepend(stages)
    sys.modules.pop("tokenizer", None)
    import tokenizer as stage_module

    yield stage_module
    sys.modules.pop("tokenizer", None)


def _workspace(tmp_path, **tokenizer_params):
    data = tmp_path / "data"
    (data / "stage_one").mkdir(parents=True)
    (data / "stage_two").mkdir()
    units = ["<e0> meets <e1> at night.", "The storm grows."]
    one = {"id": "s0", "title": "T", "source": "Ash arrives in town.", "target": " ".join(f"<sent> {u}" for u in units),
           "units": units, "unit_entities": [["<e0>", "<e1>"], []], "n_entities": 2,
           "mentions": [{"placeholder": "<e0>", "mention": "Ash"}, {"placeholder": "<e1>", "mention": "Linda"}]}
    pq.write_table(pa.Table.from_pylist([dict(one, id=f"s{i}") for i in range(30)], schema=STAGE_ONE),
                   data / "stage_one" / "train.parquet")
    two = {"id": "s0", "source": "x", "target": "<e0> Ash <e1> Linda", "mentions": one["mentions"]}
    pq.write_table(pa.Table.from_pylist([two] * 30, schema=STAGE_TWO), data / "stage_two" / "train.parquet")
    params = yaml.safe_load(DEFAULT_PARAMS.read_text())
    params["preprocess"]["out_dir"] = str(data)
    params["tokenizer"].update(out_dir=str(tmp_path / "tok"), metrics_path=str(tmp_path / "tok.json"),
                               vocab_size=300, **tokenizer_params)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return tmp_path / "params.yaml"


def test_stage_trains_saves_and_measures(stage, tmp_path):
    stats = stage.run.fn(str(_workspace(tmp_path)))
    assert stats["trained"] and stats["vocab_size"] == 300 + 101
    assert json.loads((tmp_path / "tok.json").read_text()) == stats
    tok = load_tokenizer(tmp_path / "tok", 100)
    assert tok.convert_ids_to_tokens(tok("Linda")["input_ids"])[1:-1] != ["<unk>"]
    assert stats["targets_over_max_length"] == 0.0 and stats["target_tokens_mean"] > 5


def test_stage_with_a_missing_pretrained_directory_fails_with_a_user_error(stage, tmp_path):
    """TokenizerError is one of the errors run_stage reports in one line."""
    params = _workspace(tmp_path, pretrained=str(tmp_path / "bart-base"))
    with pytest.raises(TokenizerError, match="no tokenizer directory"):
        stage.run.fn(str(params))


@pytest.mark.parametrize("kind", ["trained", "embedded"])
def test_decoding_drops_barts_specials_and_keeps_the_eric_tokens(tokenizer, kind):
    """The embedded pretrained tokenizer holds the placeholders as special tokens: decoding a
    sample must keep them (skip_special_tokens dropped them, so no unit could be checked)."""
    from eric.config import PROJECT_ROOT
    from eric.data.tokenizer import eric_text_decoder, from_pretrained_dir

    tok = tokenizer if kind == "trained" else from_pretrained_dir(PROJECT_ROOT / "pretrained/bart-tiny-novels", 100)
    for text in ("<sent> <e1> met <e2>.", "<e0> Ash Williams <e1> Linda"):
        ids = [tok.eos_token_id, tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"],
               tok.eos_token_id, tok.pad_token_id]
        assert " ".join(eric_text_decoder(tok)(ids).split()) == text
