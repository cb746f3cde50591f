"""Two-stage sampling: stage one writes the story with placeholders (planning an entity
and its state at every sentence token), stage two writes the mentions, the merge puts
them in. A one-stage model (config `two_stage: false`: BART and the baselines as in the
paper) writes real names itself: its stage-one text is the story, no mention model runs.

    options = SamplingOptions.from_params(params)
    rows = sample_stories(inputs, stage_one, tokenizer, options, mentions, mention_tokenizer, pool)
    write_samples(rows, "outputs/samples/eric.parquet", metadata={...})

Stage one runs the model's own `generate` (KV cache, top-p/top-k/temperature, entity
temperature, no-repeat n-grams), batched, from one seeded generator: the same seed,
inputs and batch size give the same stories. Stage two is transformers' `generate`
on the mention model, seeded inside a forked RNG so the caller's RNG is untouched.
A story without placeholders skips stage two. Without a mention model every
placeholder falls back to a training name (counted as `random_name`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tqdm.auto import tqdm
from transformers.generation import CompileConfig

from eric.config import MentionsParams, ModelParams, Params, PreprocessParams, SampleParams
from eric.data.tokenizer import eric_text_decoder
from eric.generate.errors import SampleError
from eric.generate.inputs import StoryInput
from eric.generate.loading import is_two_stage
from eric.generate.merge import PLACEHOLDER, NamePool, merge_mentions, parse_mentions


class SamplingOptions(SampleParams):
    """What sampling reads: params.yaml's `sample` section (declared there, once) plus what other
    sections declare for it, resolved by `from_params`: the input and mention lengths the models
    were trained with, the stage-two separator, and the seed."""

    max_source_length: int = ModelParams.model_fields["max_source_length"].default  # model.max_source_length
    mention_max_source_length: int = MentionsParams.model_fields["max_source_length"].default  # mentions.max_source_length
    separator: str = PreprocessParams.model_fields["stage_two_separator"].default  # between input and stage-one text
    entity_choice: str = ModelParams.model_fields["entity_choice"].default  # model.entity_choice (states: reference)
    seed: int = 42  # the sample seed, else the top-level one
    progress: bool = True

    @classmethod
    def from_params(cls, params: Params, progress: bool = True) -> SamplingOptions:
        s = params.sample
        return cls(**s.model_dump(exclude={"seed"}), max_source_length=params.model.max_source_length,
                   mention_max_source_length=params.mentions.max_source_length,
                   separator=params.preprocess.stage_two_separator, entity_choice=params.model.entity_choice,
                   seed=params.seed if s.seed is None else s.seed, progress=progress)

    def as_dict(self) -> dict:
        """The options a samples file records (not where the stage reads or writes)."""
        return self.model_dump(exclude={"progress", "split", "num_inputs", "out_dir"})


def stage_one_decoding(model, options: SamplingOptions) -> dict:
    """The stage-one `generate` keywords for `model`: the shared settings, or with `decoding: original`
    the architecture's own (its class's `original_decoding`) over them. Recorded in the samples' metadata."""
    settings = {"do_sample": True, "temperature": options.temperature, "top_k": options.top_k,
                "top_p": options.top_p, "penalty_alpha": None}
    if options.decoding == "original":  # else "shared" (SampleParams allows no other value)
        settings.update(getattr(type(model), "original_decoding", {}))
    if settings["penalty_alpha"] is not None:  # contrastive search: deterministic, top_k is its k
        settings["do_sample"] = False
    return settings


@dataclass
class StageOneSample:
    text: str  # "<sent> unit <sent> unit" with placeholders
    unit_entities: list[str | None]  # "<e3>" | "<none>" per unit; None: not planned (unit 1 in the code's setting)
    unit_states: list[int]  # state id per unit, -1 = none
    tokens: int  # tokens generated (up to and including </s>)


def _batches(items: list, size: int, progress: bool, desc: str):
    starts = range(0, len(items), size)
    for start in tqdm(starts, desc=desc, disable=not progress, unit="batch"):
        yield items[start : start + size]


def sample_stage_one(model, tokenizer, inputs: list[str], options: SamplingOptions,
                     references: list[dict | None] | None = None) -> list[StageOneSample]:
    """Stage-one stories for `inputs`, with the planned entity and state of every unit;
    `references`: their stage-one rows, which `states: reference` plans from."""
    device = model.device
    generator = torch.Generator(device=device).manual_seed(options.seed)
    samples: list[StageOneSample] = []
    decoding, decode = stage_one_decoding(model, options), eric_text_decoder(tokenizer)
    references = references if references is not None else [None] * len(inputs)
    for batch in _batches(list(zip(inputs, references)), options.batch_size, options.progress, "stage one"):
        texts = [text for text, _ in batch]
        enc = tokenizer(texts, truncation=True, max_length=options.max_source_length, padding=True,
                        return_tensors="pt").to(device)
        out = model.generate(
            enc["input_ids"], enc["attention_mask"], max_new_tokens=options.max_length, **decoding,
            no_repeat_ngram_size=options.no_repeat_ngram_size, entity_temperature=options.entity_temperature,
            max_units=options.max_units, generator=generator, decode_step=options.decode_step,
            **_plan(model, tokenizer, [row for _, row in batch], options),
        )
        samples.extend(_stage_one_sample(out, row, decode, model.config) for row in range(len(batch)))
    return samples


def _plan(model, tokenizer, rows: list[dict | None], options: SamplingOptions) -> dict:
    """`generate`'s plan keyword for `sample.states` (eric/model/generation.py UnitPlan): none for
    `predicted`; a uniform state at every unit for `random`; for `reference`, each unit's entity
    as the training collator draws it from the reference and the state the sentence encoder
    reads off the reference's unit (what the states can do at best)."""
    if options.states == "predicted":
        return {}
    if not getattr(model.config, "use_state", False):
        raise SampleError(f"sample.states: {options.states} needs a model with entity states; this one has none")
    from eric.model.generation import UnitPlan

    if options.states == "random":
        return {"plan": UnitPlan(random_states=True)}
    if any(row is None for row in rows):
        raise SampleError("sample.states: reference needs a stage-one split with targets (the reference's units)")
    from eric.data.collate import StageOneCollator

    collator = StageOneCollator(tokenizer, options.max_source_length, options.max_length, model.config.max_entities,
                                entity_choice=options.entity_choice, seed=options.seed)
    batch = {k: v.to(model.device) for k, v in collator(rows).items() if isinstance(v, torch.Tensor)}
    states, _ = model.reference_states(batch["labels"], batch["entity_ids"], batch["entity_positions"])
    return {"plan": UnitPlan(entity_ids=batch["entity_ids"].clamp(min=-1), state_ids=states)}


def _stage_one_sample(out, row: int, decode, config) -> StageOneSample:
    ids = out.sequences[row, 1:].tolist()  # drop the decoder start token
    if config.eos_token_id in ids:
        cut = ids.index(config.eos_token_id)
        tokens, ids = cut + 1, ids[:cut]
    else:
        tokens = sum(1 for i in ids if i != config.pad_token_id)
    tokens -= 2  # the prompt: <s> <sent>
    text = decode(ids)
    entities, states = [], []
    for n, (entity, state) in enumerate(out.units(row)):
        planned = n > 0 or config.first_unit_state
        entities.append(entity if planned else None)
        states.append(state if planned else -1)
    return StageOneSample(" ".join(text.split()), entities, states, max(tokens, 0))


def generate_mentions(model, tokenizer, inputs: list[str], stories: list[str], options: SamplingOptions) -> list[str]:
    """Stage two: "<e0> Ash Williams <e1> Linda ..." for each story ("" when it has no placeholder)."""
    wanted = [i for i, story in enumerate(stories) if PLACEHOLDER.search(story)]
    sources = [f"{inputs[i]}{options.separator}{stories[i]}" for i in wanted]
    outputs = [""] * len(stories)
    decoded: list[str] = []
    devices = [model.device] if model.device.type == "cuda" else []
    step_options = transformers_step_options(options.decode_step, model)
    decode = eric_text_decoder(tokenizer)
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        torch.manual_seed(options.seed)
        for batch in _batches(sources, options.batch_size, options.progress, "stage two"):
            enc = tokenizer(batch, truncation=True, max_length=options.mention_max_source_length, padding=True,
                            return_tensors="pt").to(model.device)
            generated = model.generate(
                **enc, do_sample=True, top_p=options.mention_top_p, top_k=options.mention_top_k,
                max_new_tokens=options.mention_max_length, num_beams=1, **step_options,
            )
            decoded.extend(decode(row) for row in generated.tolist())
    for i, text in zip(wanted, decoded):
        outputs[i] = " ".join(text.split())
    return outputs


def transformers_step_options(decode_step: str, model) -> dict:
    """transformers' `generate` keywords for stage two's decoding step (the mention model is a plain
    BART): its static cache, and for `compiled` its compiled forward (fullgraph; CUDA graphs on CUDA)."""
    if decode_step == "dynamic":
        return {}
    if decode_step == "static":
        return {"cache_implementation": "static"}
    cuda = model.device.type == "cuda"
    config = CompileConfig(fullgraph=True, mode="reduce-overhead" if cuda else "default")
    config._compile_all_devices = not cuda  # transformers compiles only on accelerators unless told (its own flag)
    return {"cache_implementation": "static", "compile_config": config}


def sample_stories(
    inputs: list[StoryInput],
    model,
    tokenizer,
    options: SamplingOptions,
    mention_model=None,
    mention_tokenizer=None,
    pool: NamePool | None = None,
) -> list[dict]:
    """Both stages and the merge; one row per input (the SAMPLES schema in eric/generate/schema.py)."""
    texts = [row.input for row in inputs]
    stage_one = sample_stage_one(model, tokenizer, texts, options, [row.row for row in inputs])
    stories = [s.text for s in stage_one]
    if mention_model is not None and is_two_stage(model):
        mention_texts = generate_mentions(mention_model, mention_tokenizer or tokenizer, texts, stories, options)
    else:
        mention_texts = [""] * len(stories)
    pool = pool or NamePool([], seed=options.seed)
    return [_row(story_input, sample, mentions, pool) for story_input, sample, mentions
            in zip(inputs, stage_one, mention_texts)]


def _row(story_input: StoryInput, sample: StageOneSample, mention_text: str, pool: NamePool) -> dict:
    mentions = parse_mentions(mention_text)
    merged = merge_mentions(sample.text, mentions, pool)
    return {
        "id": story_input.id,
        "input": story_input.input,
        "stage_one": sample.text,
        "mentions_text": mention_text,
        "mentions": [{"placeholder": tag, "mention": text} for tag, text in mentions],
        "final_text": merged.text,
        "reference": story_input.reference,
        "unit_entities": sample.unit_entities,
        "unit_states": sample.unit_states,
        "stage_one_tokens": sample.tokens,
        "fallback_generated": merged.fallbacks.get("generated", 0),
        "fallback_reused_last": merged.fallbacks.get("reused_last", 0),
        "fallback_random_name": merged.fallbacks.get("random_name", 0),
    }

