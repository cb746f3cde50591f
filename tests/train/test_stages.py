"""The two training stages end to end on a small synthetic corpus (smoke settings):
outputs in HF format, metrics, curves, MLflow runs; bad inputs fail in one line."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from eric.config import DEFAULT_PARAMS, ParamsError, load_params
from eric.data.schema import STAGE_ONE, STAGE_TWO
from eric.train.errors import TrainError

NAMES = ["Ash Williams", "Linda", "Mary Jones", "Tom Carter", "the Daily Planet", "Scotty"]
VERBS = ["meets", "follows", "warns", "leaves", "helps", "fights"]


def story(i: int, rng: random.Random) -> tuple[dict, dict]:
    cast = rng.sample(NAMES, 3)
    units, entities, mentions = [], [], []
    for _ in range(rng.randint(5, 8)):
        a, b = rng.sample(range(3), 2)
        units.append(f"<e{a}> {rng.choice(VERBS)} <e{b}> at night.")
        entities.append([f"<e{a}>", f"<e{b}>"])
        mentions += [{"placeholder": f"<e{a}>", "mention": cast[a]},
                     {"placeholder": f"<e{b}>", "mention": cast[b]}]
    source = f"{cast[0]} arrives in a small town."
    target = " ".join(f"<sent> {u}" for u in units)
    one = {"id": f"s{i}", "title": f"Story {i}", "source": source, "target": target, "units": units,
           "unit_entities": entities, "n_entities": 3, "mentions": mentions}
    two = {"id": f"s{i}", "source": f"{source} </s> {target}",
           "target": " ".join(f"{m['placeholder']} {m['mention']}" for m in mentions),
           "mentions": mentions}
    return one, two


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Parquet splits, a BPE tokenizer and a smoke params file, all under a tmp dir."""
    from eric.data.tokenizer import build_tokenizer

    root = tmp_path_factory.mktemp("stages")
    rng = random.Random(0)
    for split, n in (("train", 24), ("val", 6)):
        ones, twos = zip(*(story(i, rng) for i in range(n)))
        for stage, rows, schema in (("stage_one", ones, STAGE_ONE), ("stage_two", twos, STAGE_TWO)):
            (root / "data" / stage).mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(list(rows), schema=schema),
                           root / "data" / stage / f"{split}.parquet")
        if split == "train":
            texts = [t for r in ones for t in (r["source"], r["target"])]
            build_tokenizer(texts, vocab_size=300, max_entities=100).save_pretrained(root / "tok")
    params = yaml.safe_load(DEFAULT_PARAMS.read_text())
    params["preprocess"]["out_dir"] = str(root / "data")
    params["tokenizer"]["out_dir"] = str(root / "tok")
    params["model"].update(max_target_length=96, num_states=32)
    params["train"].update(
        max_steps=4, micro_batch_size=2, log_every=1, checkpoint_every=2, progress=False,
        checkpoint_dir=str(root / "ckpt"), out_dir=str(root / "models/stage_one"),
        metrics_dir=str(root / "metrics"), plots_dir=str(root / "plots"))
    params["mentions"].update(out_dir=str(root / "models/mentions"), max_source_length=128,
                              max_steps=4)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        yield root


def read_csv(path: Path) -> list[dict]:
    with open(path) as handle:
        return list(csv.DictReader(handle))


def mlflow_run(root: Path, run_id: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}").get_run(run_id)


def test_train_stage_one_eric(workspace):
    import train_stage_one

    from eric.model import EricForConditionalGeneration

    metrics = train_stage_one.run.fn("eric", str(workspace / "params.yaml"))
    assert metrics["steps"] == 4 and metrics["states_used"] >= 1
    assert json.loads((workspace / "metrics" / "eric.json").read_text()) == metrics
    model = EricForConditionalGeneration.from_pretrained(workspace / "models/stage_one/eric")
    assert model.config.use_state and (workspace / "models/stage_one/eric/tokenizer.json").is_file()
    curve = read_csv(workspace / "plots" / "eric.csv")
    assert [r["step"] for r in curve] == ["1", "2", "3", "4"]
    assert {"lm_loss", "entity_loss", "contrastive_loss", "lr", "tokens_per_s", "states_used"} <= set(curve[0])
    assert [r["step"] for r in read_csv(workspace / "plots" / "eric_val.csv")] == ["0", "4"]
    assert not (workspace / "ckpt" / "train_stage_one" / "eric").exists()  # cleared when done
    run = mlflow_run(workspace, metrics["mlflow_run_id"])
    assert run.data.tags["variant"] == "eric" and run.data.tags["stage"] == "train_stage_one"
    assert run.data.tags["model_dir"].endswith("models/stage_one/eric")
    assert run.data.params["model.switches.state"] == "True"
    assert {"train_entity_loss", "train_contrastive_loss", "states_used", "val_loss"} <= set(run.data.metrics)


def test_train_stage_one_bart_has_no_entity_terms(workspace):
    import train_stage_one

    metrics = train_stage_one.run.fn("bart", str(workspace / "params.yaml"))
    assert metrics["states_used"] is None
    curve = read_csv(workspace / "plots" / "bart.csv")
    assert "entity_loss" not in curve[0] and "lm_loss" in curve[0]


def test_bart_trains_on_real_names_in_one_stage_and_eric_on_placeholders(workspace):
    """The paper's BART writes names itself; ERIC writes placeholders for its mention model."""
    import train_stage_one

    params = load_params(workspace / "params.yaml")
    bart, eric = (train_stage_one.prepare.fn(params, v) for v in ("bart", "eric"))
    assert not bart.model.config.two_stage and eric.model.config.two_stage
    placeholders = set(bart.tokenizer.convert_tokens_to_ids([f"<e{i}>" for i in range(3)]))
    for job, expect in ((bart, False), (eric, True)):
        labels = job.collate_fn(list(job.train_set[:4]))["labels"]
        assert bool(placeholders & set(labels.flatten().tolist())) is expect
    row = bart.train_set[0]
    assert "<e" not in row["target"] and any(name in row["target"] for name in NAMES)
    assert row["target"].count("<sent>") == len(row["unit_entities"]) and not any(row["unit_entities"])


def test_train_mentions(workspace):
    import train_mentions
    from transformers import AutoTokenizer, BartForConditionalGeneration

    metrics = train_mentions.run.fn(str(workspace / "params.yaml"))
    assert metrics["variant"] == "mentions" and metrics["steps"] == 4
    out = workspace / "models/mentions"
    model = BartForConditionalGeneration.from_pretrained(out)
    assert model.config.vocab_size == len(AutoTokenizer.from_pretrained(out))
    assert (workspace / "metrics" / "mentions.json").is_file()


def test_mentions_collator_masks_padding_and_frames_targets(workspace):
    from eric.data.tokenizer import load_tokenizer
    from eric.train.mentions import MentionsCollator

    tok = load_tokenizer(workspace / "tok")
    rows = pq.read_table(workspace / "data/stage_two/train.parquet").slice(0, 2).to_pylist()
    batch = MentionsCollator(tok, max_source_length=16, max_target_length=8)(rows)
    assert batch["input_ids"].shape[1] <= 16 and batch["labels"].shape[1] <= 8
    assert batch["labels"][0, 0] == tok.bos_token_id
    assert (batch["attention_mask"] == (batch["input_ids"] != tok.pad_token_id)).all()


def test_bad_inputs_are_one_line_errors(workspace, tmp_path):
    import train_stage_one

    params = str(workspace / "params.yaml")
    with pytest.raises(ParamsError, match="unknown variant 'nope'"):
        train_stage_one.read_params(params, "nope")
    broken = yaml.safe_load((workspace / "params.yaml").read_text())
    broken["tokenizer"]["out_dir"] = str(tmp_path / "missing")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(broken))
    with pytest.raises(TrainError, match="no saved tokenizer"):
        train_stage_one.prepare(load_params(tmp_path / "p.yaml"), "eric")
    with pytest.raises(ParamsError, match="not defined in model.variants"):
        load_params(params, {"variants": ["eric", "gpt"]})


def test_the_paper_recipe_which_decays_no_weight_trains(workspace, tmp_path):
    """recipe: paper (also `auto` from a checkpoint) puts every weight in the no-decay group; the
    empty decay group once made the LR scheduler fail at the first step."""
    import train_stage_one

    params = yaml.safe_load((workspace / "params.yaml").read_text())
    params["model"]["state_space"]["recipe"] = "paper"
    params["train"].update(max_steps=2, mlflow=False, checkpoint_dir=str(tmp_path / "ckpt"),
                           out_dir=str(tmp_path / "models"), metrics_dir=str(tmp_path / "metrics"),
                           plots_dir=str(tmp_path / "plots"))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    metrics = train_stage_one.run.fn("eric", str(path))
    assert metrics["steps"] == 2 and metrics["state_space_recipe"] == "paper"
