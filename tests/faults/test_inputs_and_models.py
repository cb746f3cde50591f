"""Faults in what a user gives: stories that share an id, damaged or incomplete model folders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from eric.data.pipeline import run_preprocess
from eric.generate.errors import SampleError
from eric.generate.loading import load_mentions, load_stage_one

SENTENCES = ["{name} opens the {thing} at dawn.", "The {thing} hides a letter from {name}'s sister.",
             "{name} reads it twice before noon.", "A storm breaks over the {thing} that evening.",
             "{name} walks to the harbour alone.", "By night the {thing} is empty again."]  # fmt: skip
NAMES = ["Ada", "Boris", "Clara", "Dmitri", "Elsa", "Farid", "Greta", "Hugo", "Iris", "Jonas"]
THINGS = ["box", "barn", "chest", "crate", "shed", "trunk", "vault", "cellar", "attic", "locker"]


def test_distinct_stories_that_share_an_id_are_all_kept_with_derived_ids(write_jsonl, params_for, tmp_path):
    """Ten different articles exported under one id gave one example; each is its own story."""
    lines = [{"id": "article", "text": " ".join(s.format(name=n, thing=t) for s in SENTENCES)}
             for n, t in zip(NAMES, THINGS)]  # fmt: skip
    lines.append(dict(lines[3]))  # the same article twice: that one is a duplicate
    stats = run_preprocess(params_for(write_jsonl(lines), "jsonl", min_target_units=3), progress=False)
    assert stats.examples == 10 and stats.skipped == {"duplicate": 1} and stats.stories_in == 11
    assert stats.id_collisions == 9
    import pyarrow.parquet as pq

    ids = sorted(i for split in ("train", "val", "test")
                 for i in pq.read_table(tmp_path / "out" / "stage_one" / f"{split}.parquet").column("id").to_pylist())
    assert ids == sorted(["article", *(f"article~{k}" for k in range(2, 11))])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from tests.generate.conftest import save, synthetic_rows, tiny_mentions, tiny_stage_one, tiny_tokenizer

    root = tmp_path_factory.mktemp("models")
    tokenizer = tiny_tokenizer(synthetic_rows(24, seed=1))
    save(tiny_stage_one(tokenizer, "eric"), tokenizer, root / "eric")
    save(tiny_mentions(tokenizer), tokenizer, root / "mentions")
    return root


def _copy(saved, tmp_path, name):
    return shutil.copytree(saved / name, tmp_path / name)


CORRUPTIONS = {
    "truncated": lambda data: data[: len(data) // 2],
    "empty": lambda data: b"",
    "garbage header": lambda data: b"\xff" * 16 + data[16:],
    "huge header length": lambda data: (2**40).to_bytes(8, "little") + data[8:],
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
@pytest.mark.parametrize("name,load", [("eric", load_stage_one), ("mentions", load_mentions)])
def test_damaged_weights_are_one_line_naming_the_file_and_what_to_do(saved, tmp_path, corruption, name, load):
    folder = _copy(saved, tmp_path, name)
    weights = folder / "model.safetensors"
    weights.write_bytes(CORRUPTIONS[corruption](weights.read_bytes()))
    with pytest.raises(SampleError, match=rf"{weights} is damaged \(.+\); restore it \(`dvc checkout`\) or run `dvc repro train_") as info:
        load(folder)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("missing,message", [
    ("model.safetensors", "no model.safetensors beside config.json"),
    ("tokenizer.json", "the tokenizer beside the stage-one model lacks tokenizer.json"),
    ("config.json", "no stage-one model here"),
])  # fmt: skip
def test_an_incomplete_model_folder_is_one_line(saved, tmp_path, missing, message):
    folder = _copy(saved, tmp_path, "eric")
    (folder / missing).unlink()
    with pytest.raises(SampleError, match=message):
        load_stage_one(folder)


def test_an_intact_folder_still_loads(saved):
    model, tokenizer = load_stage_one(saved / "eric")
    assert not model.training and tokenizer.convert_tokens_to_ids("<sent>") != tokenizer.unk_token_id


@pytest.mark.parametrize("name,load,message", [
    ("eric", load_mentions, r"config.json: a 'eric' model, not a mention model; give the folder `dvc repro train_mentions` wrote"),
    ("mentions", load_stage_one, r"config.json: a 'bart' model, not a stage-one model; give the folder `dvc repro train_stage_one`"),
    ("eric", lambda folder: load_stage_one(folder, variant="bart"),
     r"config.json: the model of variant 'eric', not 'bart'; give bart's folder \(`dvc repro train_stage_one@bart`\)"),
])
def test_a_model_of_another_kind_or_variant_is_one_line(saved, name, load, message):
    with pytest.raises(SampleError, match=message) as info:
        load(saved / name)
    assert "\n" not in str(info.value)


def test_an_older_params_file_with_propagate_mentions_names_its_replacement():
    from eric.config import ParamsError, load_params

    with pytest.raises(ParamsError, match=r"propagate_mentions is now mentions: paper \(false\), exact \(true\)"):
        load_params(None, {"preprocess.propagate_mentions": True})


def test_a_story_whose_names_the_tagger_misses_or_mislabels_still_anonymizes(write_jsonl, params_for, tmp_path):
    """Names in odd places (possessive only, shared surnames, a title, in brackets): every
    mode writes a story, and `resolve` leaves no more of the story's names than `paper`."""
    text = ("Tom Quigley and Anna Quigley run a mill. Quigley's mill floods. Mrs. Quigley (Ann Lee) "
            "calls Tom. Anna Quigley sells the mill. Tom Quigley's dog barks. Quigley waits. The end came.")
    left, corpus = {}, write_jsonl([{"id": "q", "text": text}])
    for mode in ("paper", "exact", "resolve"):
        params = params_for(corpus, "jsonl", split_ratio=[1, 0, 0], min_target_units=3, mentions=mode)
        stats = run_preprocess(params, progress=False, overwrite=True)
        assert stats.examples == 1
        left[mode] = stats.splits["train"].names_left
    assert left["resolve"] <= left["exact"] <= left["paper"]


@pytest.mark.parametrize("encoding", ["binary", "cp1252", "utf-16"])
def test_a_params_file_that_is_not_utf8_text_is_one_line_or_read(encoding, tmp_path):
    """Each was a UnicodeDecodeError traceback; UTF-16 with its byte-order mark is YAML and is read."""
    from typer.testing import CliRunner

    from eric.cli import app
    from eric.config import PROJECT_ROOT

    text = "# un caf\u00e9 serr\u00e9\n" + (PROJECT_ROOT / "params.yaml").read_text()
    data = {"binary": bytes(range(256)) * 4, "cp1252": text.encode("cp1252"), "utf-16": text.encode("utf-16")}
    params = tmp_path / "params.yaml"
    params.write_bytes(data[encoding])
    texts = tmp_path / "texts.txt"
    texts.write_text("Ash drives to a cabin.\n")
    result = CliRunner().invoke(app, ["evaluate", str(texts), "--no-mauve", "--params", str(params)])
    if encoding == "utf-16":
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 2 and result.exception.__class__ is SystemExit
        assert f"{params}: not UTF-8 text (" in result.output and "save it as UTF-8" in result.output


def test_a_corpus_through_a_pipe_loses_no_byte_and_a_silent_one_does_not_hang(write_jsonl, tmp_path, monkeypatch):
    """`--corpus <(cat file)` read 3 of 10 stories (the first 4 KB went to the format sniff) and a
    named pipe nobody wrote to hung forever; /dev/zero grew without bound."""
    import json
    import os
    import tempfile
    import threading

    import eric.data.readers as readers
    from eric.data.errors import CorpusError, SkipCounter

    lines = [{"id": f"s{i}", "text": f"Story {i}. " + "Ash walks to the mill and back. " * 20} for i in range(10)]
    regular = write_jsonl(lines, "plain.jsonl")
    assert regular.stat().st_size > 4096
    fifo = tmp_path / "corpus.jsonl"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(regular.read_bytes()))
    writer.start()
    piped = list(readers.read_corpus("jsonl", fifo, SkipCounter()))
    writer.join()
    assert piped == list(readers.read_corpus("jsonl", regular, SkipCounter())) and len(piped) == 10
    assert not list(Path(tempfile.gettempdir()).glob("eric-corpus-*"))  # the copy is gone once read
    monkeypatch.setattr(readers, "PIPE_WAIT_S", 0.3)
    with pytest.raises(CorpusError, match=r"nothing arrived for 0 s \(a named pipe nobody writes to\?\)"):
        list(readers.read_corpus("jsonl", fifo, SkipCounter()))
    monkeypatch.setattr(readers, "MAX_STREAM_BYTES", 1 << 20)
    with pytest.raises(CorpusError, match=r"/dev/zero: a stream of more than 1 MiB; give the corpus as a file"):
        list(readers.read_corpus("jsonl", Path("/dev/zero"), SkipCounter()))


def _float_tensor_offset(weights: Path) -> int:
    """Where the first float32 tensor's bytes start inside a safetensors file."""
    import json

    data = weights.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    start = min(entry["data_offsets"][0] for name, entry in header.items()
                if name != "__metadata__" and entry["dtype"] == "F32")
    return 8 + size + start


def test_weights_changed_inside_an_intact_header_are_named_before_sampling(saved, tmp_path):
    """Flipped weight bytes loaded fine and reached sampling as NaN ('probability tensor contains
    either inf, nan'): the manifest a saved model carries names them; without one, NaN is named."""
    import struct

    from eric.train.checkpoint import MANIFEST, save_pretrained_atomic
    from eric.train.runtime import Rank

    model, tokenizer = load_stage_one(saved / "eric")
    folder = save_pretrained_atomic(model, tmp_path / "eric", Rank(0, 1, 0), tokenizer)
    assert (folder / MANIFEST).is_file()
    assert load_stage_one(folder)[0].config.model_type == model.config.model_type  # as written: loads
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    at = _float_tensor_offset(weights)
    data[at:at + 8] = bytes(b ^ 0x40 for b in data[at:at + 8])  # changed values, header intact
    weights.write_bytes(bytes(data))
    with pytest.raises(SampleError, match=r"model.safetensors differs from what was written \(damaged since it "
                                          r"was saved\); restore it \(`dvc checkout`\)") as info:
        load_stage_one(folder)
    assert "\n" not in str(info.value)
    (folder / MANIFEST).unlink()  # a folder saved without one: a NaN is still named
    data[at:at + 4] = struct.pack("<f", float("nan"))
    weights.write_bytes(bytes(data))
    with pytest.raises(SampleError, match=r"model.safetensors holds NaN or infinite weights \(1 tensor\(s\), first "):
        load_stage_one(folder)
