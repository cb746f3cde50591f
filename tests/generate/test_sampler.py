"""Two-stage sampling on tiny random models: seeded, per-unit plans recorded, fallbacks counted."""

from __future__ import annotations

import re

import pytest
import torch

from eric.evaluate.state_analysis import stage_one_units
from eric.generate.errors import SampleError
from eric.generate.inputs import StoryInput, read_inputs
from eric.generate.loading import load_mentions, load_stage_one
from eric.generate.merge import NamePool
from eric.generate.sampler import SamplingOptions, generate_mentions, sample_stage_one, sample_stories
from eric.generate.schema import SAMPLES, fallback_summary, read_metadata, read_samples, write_samples
from tests.generate.tiny import NUM_STATES, save, tiny_stage_one

PLACEHOLDER = re.compile(r"<e\d+>")
OPTIONS = SamplingOptions(batch_size=3, max_length=24, mention_max_length=16, progress=False, seed=5)


@pytest.fixture(scope="module")
def models(tiny_project):
    model, tokenizer = load_stage_one(tiny_project / "models" / "stage_one" / "eric")
    mentions, mention_tokenizer = load_mentions(tiny_project / "models" / "mentions")
    return model, tokenizer, mentions, mention_tokenizer


@pytest.fixture(scope="module")
def inputs(tiny_project):
    return read_inputs(tiny_project / "data" / "stage_one" / "test.parquet")


def test_inputs_carry_references_with_names_restored(inputs):
    assert len(inputs) == 6
    assert all(r.reference and "<e" not in r.reference and r.reference.startswith("<sent>") for r in inputs)


def test_sampling_is_deterministic_given_a_seed(models, inputs):
    model, tokenizer, mentions, mention_tokenizer = models
    first = sample_stories(inputs, model, tokenizer, OPTIONS, mentions, mention_tokenizer, NamePool(["Zed"], 1))
    again = sample_stories(inputs, model, tokenizer, OPTIONS, mentions, mention_tokenizer, NamePool(["Zed"], 1))
    other = sample_stories(inputs, model, tokenizer, SamplingOptions(**{**OPTIONS.__dict__, "seed": 6}),
                           mentions, mention_tokenizer, NamePool(["Zed"], 1))
    assert first == again
    assert [r["stage_one"] for r in first] != [r["stage_one"] for r in other]
    assert [r["id"] for r in first] == [r.id for r in inputs]


@pytest.mark.parametrize("step", ["static", "compiled"])
def test_every_decoding_step_samples_the_same_stories_and_mentions(models, inputs, step):
    """Stage one on ERIC's static step, stage two on transformers' static cache (and compiled forward)."""
    model, tokenizer, mentions, mention_tokenizer = models
    dynamic = sample_stories(inputs, model, tokenizer, OPTIONS, mentions, mention_tokenizer, NamePool(["Zed"], 1))
    options = SamplingOptions(**{**OPTIONS.__dict__, "decode_step": step})
    rows = sample_stories(inputs, model, tokenizer, options, mentions, mention_tokenizer, NamePool(["Zed"], 1))
    assert any(r["mentions_text"] for r in rows)  # stage two ran
    assert rows == dynamic


def test_per_unit_entities_and_states_are_those_the_model_planned(models, inputs):
    model, tokenizer, _, _ = models
    texts = [r.input for r in inputs[:3]]
    samples = sample_stage_one(model, tokenizer, texts, OPTIONS)
    enc = tokenizer(texts, truncation=True, max_length=OPTIONS.max_source_length, padding=True, return_tensors="pt")
    out = model.generate(enc["input_ids"], enc["attention_mask"], max_new_tokens=OPTIONS.max_length, top_p=0.9,
                         generator=torch.Generator().manual_seed(OPTIONS.seed))
    for row, sample in enumerate(samples):
        assert list(zip(sample.unit_entities, sample.unit_states)) == out.units(row)
        assert sample.text.startswith("<sent>")
        assert len(sample.unit_entities) >= 1
        assert len(stage_one_units(sample.text)) >= len(sample.unit_entities)
    states = [s for sample in samples for s in sample.unit_states]
    assert all(-1 <= s < NUM_STATES for s in states) and any(s >= 0 for s in states)
    for sample in samples:  # a state exactly where a real entity was planned
        for entity, state in zip(sample.unit_entities, sample.unit_states):
            assert (state >= 0) == (entity != "<none>")


def test_merge_fills_every_placeholder_and_counts_fallbacks(models, inputs):
    model, tokenizer, mentions, mention_tokenizer = models
    rows = sample_stories(inputs, model, tokenizer, OPTIONS, mentions, mention_tokenizer, NamePool(["Zed"], 1))
    occurrences = sum(len(PLACEHOLDER.findall(r["stage_one"])) for r in rows)
    assert occurrences > 0
    for r in rows:
        assert not PLACEHOLDER.search(r["final_text"])
        assert sum(r[f"fallback_{k}"] for k in ("generated", "reused_last", "random_name")) == \
            len(PLACEHOLDER.findall(r["stage_one"]))
        assert all(m["mention"] and m["placeholder"] in r["mentions_text"] for m in r["mentions"])
        if "<e" not in r["stage_one"]:
            assert r["mentions_text"] == ""  # stage two only runs for stories with placeholders
    summary = fallback_summary(rows)
    assert summary["occurrences"] == occurrences
    assert summary["generated"] + summary["reused_last"] + summary["random_name"] == occurrences


def test_without_a_mention_model_every_placeholder_takes_a_training_name(models, inputs):
    model, tokenizer, _, _ = models
    rows = sample_stories(inputs, model, tokenizer, OPTIONS, pool=NamePool(["Zed Quill"], 0))
    for r in rows:
        n = len(PLACEHOLDER.findall(r["stage_one"]))
        assert r["fallback_random_name"] == n and r["fallback_generated"] == 0
        assert r["final_text"].count("Zed Quill") >= n and r["mentions"] == []


def test_stage_two_skips_stories_without_placeholders(models):
    _, _, mentions, tokenizer = models
    out = generate_mentions(mentions, tokenizer, ["An input.", "Another."], ["<sent> No one here.", "<sent> <e0> runs."],
                            OPTIONS)
    assert out[0] == ""
    assert out == generate_mentions(mentions, tokenizer, ["An input.", "Another."],
                                    ["<sent> No one here.", "<sent> <e0> runs."], OPTIONS)


def test_code_setting_leaves_the_first_unit_unplanned(tiny_project, inputs):
    _, tokenizer = load_stage_one(tiny_project / "models" / "stage_one" / "eric")
    model = tiny_stage_one(tokenizer, "eric", first_unit_state=False)
    samples = sample_stage_one(model, tokenizer, [r.input for r in inputs[:2]], OPTIONS)
    assert all(s.unit_entities[0] is None and s.unit_states[0] == -1 for s in samples)


def test_variants_without_a_planner_record_no_units(tiny_project, inputs):
    model, tokenizer = load_stage_one(tiny_project / "models" / "stage_one" / "bart")
    rows = sample_stories(inputs[:2], model, tokenizer, OPTIONS)
    assert all(r["unit_entities"] == [] and r["unit_states"] == [] for r in rows)
    assert all(r["stage_one"].startswith("<sent>") for r in rows)


def test_samples_round_trip_through_parquet_with_metadata(models, inputs, tmp_path):
    model, tokenizer, mentions, mention_tokenizer = models
    rows = sample_stories(inputs[:2], model, tokenizer, OPTIONS, mentions, mention_tokenizer)
    path = write_samples(rows, tmp_path / "s.parquet", {"options": OPTIONS.as_dict()})
    assert read_samples(path) == rows
    assert read_metadata(path)["options"]["seed"] == 5
    import pyarrow.parquet as pq

    assert pq.read_schema(path).remove_metadata().equals(SAMPLES)


def test_missing_or_broken_model_folders_fail_in_one_line(tmp_path, tiny_project):
    with pytest.raises(SampleError, match="no stage-one model here"):
        load_stage_one(tmp_path / "nothing")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    (broken / "tokenizer_config.json").write_text("{}")
    with pytest.raises(SampleError) as info:
        load_stage_one(broken)
    assert "\n" not in str(info.value)
    with pytest.raises(SampleError, match="no such input file"):
        read_inputs(tmp_path / "missing.parquet")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(SampleError, match="no inputs"):
        read_inputs(tmp_path / "empty.txt")


def test_plain_text_inputs_have_no_reference(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("First input.\n\nSecond input.\n")
    assert read_inputs(path) == [StoryInput("0", "First input."), StoryInput("2", "Second input.")]


class _MustNotRun:
    """A mention model that fails the test if a one-stage story asks it for names."""

    device = "cpu"

    def generate(self, *args, **kwargs):
        raise AssertionError("a one-stage model's stories went to the mention model")


def test_a_one_stage_model_writes_the_story_itself_and_skips_stage_two(tiny_project, inputs):
    model, tokenizer = load_stage_one(tiny_project / "models" / "stage_one" / "bart", variant="bart")
    assert model.config.two_stage is False  # BART is one-stage by default, as in the paper
    rows = sample_stories(inputs[:3], model, tokenizer, OPTIONS, _MustNotRun(), tokenizer, NamePool(["Zed"], 0))
    assert all(r["mentions_text"] == "" and r["mentions"] == [] for r in rows)
    assert all(r["final_text"] for r in rows)


# -- sample.decoding: shared | original --


def test_original_decoding_changes_simctg_and_hint_and_leaves_eric_unchanged():
    from eric.generate.sampler import stage_one_decoding
    from tests.model.conftest import tiny_model
    from tests.model.test_hint import tiny_hint
    from tests.model.test_simctg import tiny_simctg

    original = SamplingOptions(decoding="original")
    shared = stage_one_decoding(tiny_model(), SamplingOptions())
    assert shared == {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 0.9, "penalty_alpha": None}
    assert stage_one_decoding(tiny_model(), original) == shared  # ERIC: the paper's top-p 0.9 either way
    for model in (tiny_simctg(), tiny_hint()):
        assert stage_one_decoding(model, SamplingOptions()) == shared  # the default: every system alike
    assert stage_one_decoding(tiny_simctg(), original) == {
        "do_sample": False, "temperature": 1.0, "top_k": 5, "top_p": 1.0, "penalty_alpha": 0.6}
    assert stage_one_decoding(tiny_hint(), original) == {**shared, "temperature": 0.7}
    with pytest.raises(ValueError):
        stage_one_decoding(tiny_model(), SamplingOptions(decoding="beam"))  # refused by SampleParams itself


def test_original_decoding_samples_eric_as_shared_and_simctg_by_contrastive_search(tiny_project, inputs, models):
    from eric.data.tokenizer import eric_text_decoder
    from eric.generate.sampler import _stage_one_sample
    from eric.model.simctg import SimCTGConfig, SimCTGForConditionalGeneration

    model, tokenizer = models[:2]
    texts = [r.input for r in inputs[:3]]
    original = SamplingOptions(**{**OPTIONS.as_dict(), "decoding": "original"}, progress=False)
    assert sample_stage_one(model, tokenizer, texts, original) == sample_stage_one(model, tokenizer, texts, OPTIONS)

    bart, _ = load_stage_one(tiny_project / "models" / "stage_one" / "bart", variant="bart")
    fields = {k: v for k, v in bart.config.to_dict().items() if k in SimCTGConfig.__dataclass_fields__}
    simctg = SimCTGForConditionalGeneration(SimCTGConfig(**fields)).eval()
    simctg.load_state_dict(bart.state_dict())
    contrastive = sample_stage_one(simctg, tokenizer, texts, original)
    again = sample_stage_one(simctg, tokenizer, texts, SamplingOptions(**{**original.as_dict(), "seed": 6},
                                                                        progress=False))
    assert contrastive == again  # contrastive search is deterministic: the seed does not matter
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    direct = simctg.generate(enc["input_ids"], enc["attention_mask"], max_new_tokens=OPTIONS.max_length,
                             penalty_alpha=0.6, top_k=5)
    decode = eric_text_decoder(tokenizer)
    assert contrastive == [_stage_one_sample(direct, row, decode, simctg.config) for row in range(len(texts))]


def test_reference_states_plan_each_unit_from_the_reference(models, inputs):
    """states: reference gives unit n the entity the training collator draws from the reference's
    unit n and the state the sentence encoder reads off it (the upper bound of what states do)."""
    from eric.data.collate import StageOneCollator

    model, tokenizer, _, _ = models
    rows = [r.row for r in inputs[:3]]
    options = SamplingOptions(**{**OPTIONS.__dict__, "states": "reference", "max_length": 40})
    samples = sample_stage_one(model, tokenizer, [r.input for r in inputs[:3]], options, rows)
    collator = StageOneCollator(tokenizer, options.max_source_length, options.max_length, model.config.max_entities,
                                entity_choice=options.entity_choice, seed=options.seed)
    batch = collator(rows)
    gold, _ = model.reference_states(batch["labels"], batch["entity_ids"], batch["entity_positions"])
    compared = 0
    for b, sample in enumerate(samples):
        for n, (entity, state) in enumerate(zip(sample.unit_entities, sample.unit_states)):
            if entity is None or n >= batch["entity_ids"].shape[1] or batch["entity_ids"][b, n] < 0:
                continue  # not planned, or past the reference's units: the model's own plan
            cls = int(batch["entity_ids"][b, n])
            assert entity == ("<none>" if cls == 0 else f"<e{cls - 1}>")
            if gold[b, n] >= 0:
                assert state == int(gold[b, n])
                compared += 1
    assert compared >= 2
    own = sample_stage_one(model, tokenizer, [r.input for r in inputs[:3]], SamplingOptions(**{**options.__dict__,
                                                                                               "states": "predicted"}))
    assert [s.unit_states for s in own] != [s.unit_states for s in samples]


def test_the_bounds_need_references_and_a_model_with_states(models, inputs, tiny_project):
    model, tokenizer, _, _ = models
    reference = SamplingOptions(**{**OPTIONS.__dict__, "states": "reference"})
    with pytest.raises(SampleError, match="stage-one split with targets"):
        sample_stage_one(model, tokenizer, ["An input alone."], reference)
    random = SamplingOptions(**{**OPTIONS.__dict__, "states": "random"})
    drawn = sample_stage_one(model, tokenizer, [r.input for r in inputs[:3]], random)
    assert drawn == sample_stage_one(model, tokenizer, [r.input for r in inputs[:3]], random)  # seeded
    bart, bart_tokenizer = load_stage_one(tiny_project / "models" / "stage_one" / "bart")
    with pytest.raises(SampleError, match="needs a model with entity states"):
        sample_stage_one(bart, bart_tokenizer, ["An input."], random)
