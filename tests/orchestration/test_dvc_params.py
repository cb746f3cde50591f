"""dvc.yaml declares what each stage reads: every eric module its script imports (so a code
change reruns it) and exactly the params.yaml settings it reads (so a display setting, a
report-only one or another variant's options rerun nothing, and no setting that changes an
output is missing).

The settings a stage reads are recorded as it runs (tests/orchestration/params_reads.py) on tiny
projects in tmp folders whose configurations take the branches that read settings (DRIVES); the
test compares them with the stage's `params` in dvc.yaml, as DVC resolves them."""

from __future__ import annotations

import ast
import csv
import importlib
import json
from pathlib import Path

import grimp
import numpy as np
import pytest
import yaml

from eric.config import DEFAULT_PARAMS, PROJECT_ROOT, anchored_paths, load_params, set_dotted
from tests.orchestration.params_reads import ParamsReads, leaves
from tests.pins import one_thread

STAGES = yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())["stages"]
# modules no stage lists on purpose: settings reach stages as params (params.yaml is a dep),
# and tracking / environment defaults change where figures are logged, not what is computed
NOT_DEPS = {"eric.config", "eric.env", "eric.tracking"}


def _eric_imports(script: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(script.read_text())):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        found |= {n for n in names if n.split(".")[0] == "eric"}
    return found


def _covered(module: str, deps: list[str]) -> bool:
    path = module.replace(".", "/")
    return any(path + ".py" == d or (path + "/").startswith(d.rstrip("/") + "/") or path == d for d in deps)


@pytest.mark.parametrize("stage", [s for s in STAGES if STAGES[s].get("do", STAGES[s])["cmd"].split()[1].startswith("stages/")])
def test_every_eric_module_a_stage_imports_is_a_dependency(stage):
    graph = grimp.build_graph("eric")
    body = STAGES[stage].get("do", STAGES[stage])
    direct = {m for m in _eric_imports(PROJECT_ROOT / body["cmd"].split()[1]) if m in graph.modules}
    closure = direct | {u for m in direct for u in graph.find_upstream_modules(m)}
    deps = [d if isinstance(d, str) else next(iter(d)) for d in body["deps"]]
    missing = sorted(m for m in closure - NOT_DEPS if not _covered(m, deps) and not m.endswith("__init__"))
    missing = [m for m in missing if m not in {"eric"}]
    assert not missing, f"{stage} imports modules dvc.yaml does not list: {missing}"


def stage_params() -> dict[str, list[str] | None]:
    """stage -> the params.yaml keys DVC resolved for it (None: the whole file), as `dvc status`
    compares them."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(PROJECT_ROOT)) as repo:
        return {stage.addressing: next((list(d.params) or None for d in stage.deps if isinstance(d, ParamsDependency)), [])
                for stage in repo.index.stages}


def readers(params: dict, dotted: str) -> set[str]:
    """The stages whose status changes when `dotted` changes."""
    return {stage for stage, keys in params.items()
            if keys is None or any(dotted == k or dotted.startswith(k + ".") for k in keys)}


# Settings stages read that change none of their DVC outputs: how a run is watched, or where and
# how often its resumable state goes (outside the outputs). No stage but `review` (which records
# the repro in MLflow) lists them; test_watching_settings_leave_what_training_writes_alone
# checks the training ones.
WATCHING = {
    "train.progress": "the progress bars",
    "train.mlflow": "whether MLflow records the run",
    "train.eval_every": "extra validations: rows of the validation curve beside the DVC plots (and MLflow)",
    "train.checkpoint_every": "how often resumable state is saved",
    "train.keep_checkpoints": "how many resumable states are kept",
    "train.checkpoint_dir": "where resumable state goes (and a run's snapshots until it ends)",
    "train.snapshot_every": "snapshots kept for learning curves",
    "evaluate.feature_cache": "a cache of MAUVE features: the same features, read faster",
}
# ... except where they make a declared output: train_stage_one's snapshots and both trainings'
# validation curves (rows at train.eval_every), which EntityWorld's learning curve (evaluate.world.
# curve_inputs) reads; DVC's run cache restores a stage's outputs by the settings it lists
INPUTS = {"train_stage_one": {"train.snapshot_every", "train.eval_every"}, "train_mentions": {"train.eval_every"}}
# settings read only on a branch too slow to drive (torch.compile: a minute and more here): gate ->
# (setting, the file that reads it when the gate is set)
UNDRIVEN = {"train.compile": ("train.compile_backend", "eric/train/loop.py")}
NOT_COMPARED = {"review": "no DVC output: it records the repro in MLflow, from the whole params file"}

SMOKE = PROJECT_ROOT / "flows" / "profiles" / "smoke.yaml"


def _paths(root: Path) -> dict:
    """Every path setting of params.yaml (a relative one), into `root`."""
    return anchored_paths(load_params(DEFAULT_PARAMS), root)


# params.yaml with the smoke profile, smaller still: one optimizer step of a mini model, one input
TINY = {"corpus.path": PROJECT_ROOT / "corpora/wikiplots-mini/plots.zip", "preprocess.max_stories": 24,
        "tokenizer.vocab_size": 300, "model.size": "mini", "mentions.size": "mini", "train.max_steps": 1,
        "mentions.max_steps": 1, "train.mlflow": False, "sample.num_inputs": 1}
# name -> (the project whose data it reads, or None: its own; overrides of TINY)
PROJECTS = {
    "plain": (None, {}),
    # a JSON-lines corpus cut into EDUs: preprocess's raw-text and EDU settings
    "edu": (None, {"corpus.kind": "jsonl", "corpus.path": PROJECT_ROOT / "tests/fixtures/wikibio-25.jsonl.gz",
                   "preprocess.unit": "edu", "preprocess.max_stories": 8}),
    # by epochs, validating every step: the loop's settings behind `max_steps or ...`
    "epochs": ("plain", {"train.max_steps": None, "train.epochs": 1, "train.max_train_examples": 4,
                         "mentions.max_steps": None, "train.eval_every": 1}),
    # EntityWorld: the world and evaluate.world, the learning curve over snapshots
    "world": (None, {"corpus.kind": "world", "corpus.name": "entityworld", "corpus.world.stories": 40,
                     "variants": ["eric"], "train.snapshot_every": 1, "evaluate.world.mix_stories": 20,
                     "evaluate.world.probe_train_texts": 8, "evaluate.world.probe_test_texts": 2,
                     "evaluate.world.curve_inputs": 1}),
}
# (project, stage, the variants it runs for): in order, each stage after those it reads from
DRIVES = [
    ("plain", "preprocess", [None]), ("plain", "tokenizer", [None]),
    ("plain", "hint_targets", ["eric", "bart", "hint"]), ("plain", "train_stage_one", ["eric", "bart"]),
    ("plain", "train_mentions", [None]), ("plain", "sample", ["eric", "bart"]),
    ("plain", "evaluate", ["eric", "bart"]), ("plain", "report", [None]),
    ("edu", "preprocess", [None]),
    ("epochs", "train_stage_one", ["eric"]), ("epochs", "train_mentions", [None]),
    ("world", "preprocess", [None]), ("world", "tokenizer", [None]), ("world", "hint_targets", ["eric"]),
    ("world", "train_stage_one", ["eric"]), ("world", "train_mentions", [None]), ("world", "sample", ["eric"]),
    ("world", "evaluate", ["eric"]), ("world", "report", [None]),
]


def _write_project(base: Path, name: str) -> Path:
    params = yaml.safe_load(DEFAULT_PARAMS.read_text())
    for key, value in yaml.safe_load(SMOKE.read_text()).items():
        set_dotted(params, key, value)
    data_from, overrides = PROJECTS[name]
    root = base / name
    settings = {**_paths(root), **TINY, **overrides}
    if data_from is not None:  # its upstream outputs are another project's
        upstream = _paths(base / data_from)
        settings.update({k: upstream[k] for k in ("preprocess.out_dir", "tokenizer.out_dir", "train.targets_dir")})
    for key, value in settings.items():
        set_dotted(params, key, str(value) if isinstance(value, Path) else value)
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root / "params.yaml"


class Teacher:
    """HINT's similarity teacher, without MiniLM: a text's vector from its length."""

    def __call__(self, texts):
        return np.array([[1.0, len(t) % 7, len(t) % 3] for t in texts])


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict[str, Path]:
    """project -> its params file (PROJECTS), in a tmp folder."""
    base = tmp_path_factory.mktemp("reads")
    return {name: _write_project(base, name) for name in PROJECTS}


@pytest.fixture(scope="module")
def recorded(projects) -> dict[str, set[str]]:
    """stage -> the settings it read over every drive (a variant's own entry as `${item}`)."""
    import hint_targets

    found: dict[str, set[str]] = {}
    with one_thread(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(hint_targets, "teacher", Teacher)
        for project, stage, items in DRIVES:
            run = importlib.import_module(stage).run.fn
            for item in items:
                with ParamsReads() as reads:
                    run(str(projects[project])) if item is None else run(item, str(projects[project]))
                own = f"model.variants.{item}"
                found.setdefault(stage, set()).update(
                    "model.variants.${item}" + key[len(own):] if item and (key + ".").startswith(own + ".") else key
                    for key in reads.keys)
    for keys in found.values():
        keys.update(setting for gate, (setting, _) in UNDRIVEN.items() if gate in keys)
    return found


def test_the_recorder_sees_reads_through_aliases_dumps_methods_and_views():
    with ParamsReads() as reads:
        params = load_params(DEFAULT_PARAMS)
        m = params.model
        assert m.max_source_length and params.model.variants["bart"].form  # `form` reads two_stage
        params.sample.model_dump(include={"top_p", "seed"})
        settings = params.train.loop(lr=1.0)  # the mention writer's own lr: not train.lr
        assert settings.lr == 1.0 and settings.warmup_steps is not None
        assert settings.model_copy(update={"max_steps": 3}).max_steps == 3  # updated: not the file's
    expected = {"model.max_source_length", "model.variants.bart.two_stage", "sample.top_p", "sample.seed",
                "train.warmup_steps"}
    assert reads.keys == expected
    assert load_params(DEFAULT_PARAMS).train.lr and reads.keys == expected  # nothing is recorded after


def test_the_undriven_branches_still_read_their_settings():
    for setting, path in UNDRIVEN.values():
        assert f".{setting.rsplit('.', 1)[1]}" in (PROJECT_ROOT / path).read_text(), (setting, path)


def _nodes() -> set[str]:
    """Every key of params.yaml, sections and settings."""
    tree = yaml.safe_load(DEFAULT_PARAMS.read_text())
    found = set()
    for leaf in leaves(tree):
        parts = leaf.split(".")
        found.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    return found


def _tracked(key: str, nodes: set[str]) -> str | None:
    """The params.yaml key DVC tracks a read setting by: itself, or for a variant's setting left
    out of its entry (`kind`, `two_stage`: a default), the entry; None for any other setting
    params.yaml does not hold (a default in eric/config.py, a code dependency)."""
    if key in nodes:
        return key
    parts = key.split(".")
    if parts[:2] == ["model", "variants"] and ".".join(parts[:3]) in nodes:
        return ".".join(parts[:3])
    return None


def _settings(keys) -> set[str]:
    """The params.yaml settings (leaves) under `keys`."""
    all_leaves = set(leaves(yaml.safe_load(DEFAULT_PARAMS.read_text())))
    return {leaf for key in keys for leaf in all_leaves if leaf == key or leaf.startswith(key + ".")}


def _collapsed(settings: set[str]) -> list[str]:
    """The fewest params.yaml keys that cover exactly `settings`: a section whose every setting is in."""
    keys = set(settings)
    for node in sorted(_nodes(), key=lambda k: -k.count(".")):  # deepest first
        under = _settings([node])
        if node not in under and under and under <= keys:
            keys = (keys - under) | {node}
    return sorted(k for k in keys if not any(k.startswith(o + ".") for o in keys))


def _template(stage: str) -> str:
    return stage.split("@")[0]


@pytest.fixture(scope="module")
def declared() -> dict[str, list[str] | None]:
    return stage_params()


@pytest.mark.parametrize("stage", [s for s in STAGES if s not in NOT_COMPARED])
def test_each_stage_depends_on_exactly_the_settings_it_reads(stage, recorded, declared):
    assert stage in recorded, f"no entry of DRIVES runs {stage}"
    nodes = _nodes()
    instances = [instance for instance in declared if _template(instance) == stage]
    assert instances, f"DVC resolved no {stage} stage"
    for instance in instances:
        keys = declared[instance]
        item = instance.partition("@")[2]
        ignored = set(WATCHING) - INPUTS.get(stage, set())
        reads = {_tracked(k.replace("${item}", item), nodes) for k in recorded[stage] if k not in ignored} - {None}
        assert keys is not None, f"{instance} depends on the whole params file"
        listed, read = _settings(keys), _settings(reads)
        assert listed == read, (
            f"{instance}: dvc.yaml does not list settings it reads: {sorted(read - listed)}; "
            f"it lists settings never read on the driven projects: {sorted(listed - read)} (drop them, or drive "
            f"a configuration that takes the branch reading them: DRIVES); what it reads: {_collapsed(read)}")


def test_watching_and_report_only_settings_change_no_stage_but_the_report(recorded, declared):
    """Editing a setting only the report reads, or one that only changes how a run is watched,
    reruns at most the report (and `review`, which writes no DVC output)."""
    report_only = recorded["report"] - set().union(*(keys for stage, keys in recorded.items() if stage != "report"))
    assert {"evaluate.case_studies", "evaluate.report_dir", "evaluate.headline_dir"} <= report_only
    assert readers(declared, "evaluate.case_studies") == {"report"}
    for key in report_only:
        assert readers(declared, key) <= {"report", *NOT_COMPARED}, key
    for key in WATCHING:
        inputs = {s for s in declared if key in INPUTS.get(_template(s), ())}
        assert readers(declared, key) <= {*NOT_COMPARED, *inputs}, key


def test_display_settings_and_another_variants_options_change_no_stage():
    params = stage_params()
    assert {"train_stage_one@eric", "train_stage_one@bart", "evaluate@eric"} <= set(params)
    assert readers(params, "train.progress") == set()
    assert readers(params, "model.variants.simctg.options.margin") == set()  # not in `variants`
    bart_only = readers(params, "model.variants.bart.options")
    assert bart_only and all(stage.endswith("@bart") for stage in bart_only), bart_only
    assert {"train_stage_one@eric", "train_stage_one@bart", "train_mentions"} <= readers(params, "train.lr")
    assert readers(params, "model.state_space.recipe") >= {"train_stage_one@eric", "train_stage_one@bart"}


TIMED = {"train_seconds", "tokens_per_s"}  # wall-clock figures (the report's train time)


def _training(params_file: Path, **settings) -> dict:
    """train_stage_one@eric on the plain project's data with `settings` (and its own outputs)."""
    import train_stage_one

    params = yaml.safe_load(params_file.read_text())
    root = params_file.parent / "watching" / "-".join(f"{k}{v}" for k, v in sorted(settings.items()))
    for key, value in {**settings, "max_steps": 3, "out_dir": root / "models", "metrics_dir": root / "metrics",
                       "plots_dir": root / "plots", "checkpoint_dir": root / "checkpoints",
                       "snapshots_dir": root / "snapshots"}.items():
        params["train"][key] = str(value) if isinstance(value, Path) else value
    (root / "params.yaml").parent.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    with one_thread():
        train_stage_one.run.fn("eric", str(root / "params.yaml"))
    metrics = json.loads((root / "metrics" / "eric.json").read_text())
    with open(root / "plots" / "eric.csv") as handle:
        curve = [{k: v for k, v in row.items() if k not in TIMED} for row in csv.DictReader(handle)]
    with open(root / "plots" / "eric_val.csv") as handle:
        validations = len(list(csv.DictReader(handle)))
    return {"weights": (root / "models" / "eric" / "model.safetensors").read_bytes(),
            "snapshots": sorted(p.name for p in (root / "snapshots" / "eric").iterdir()),
            "left_beside_checkpoints": (root / "checkpoints" / "snapshots").exists() and
            any((root / "checkpoints" / "snapshots").rglob("step-*")),
            "metrics": {k: v for k, v in metrics.items() if k not in TIMED | {"model_dir"}},
            "curve": curve, "validations": validations}


def test_watching_settings_leave_what_training_writes_alone(projects, recorded):
    """The training settings in WATCHING change neither the weights nor the metrics and curve
    that train_stage_one declares as outputs (timings aside): they are no dependency of it."""
    often = _training(projects["plain"], eval_every=1, checkpoint_every=1, keep_checkpoints=1, snapshot_every=1,
                      progress=True)
    seldom = _training(projects["plain"], eval_every=None, checkpoint_every=100, keep_checkpoints=2,
                       snapshot_every=None, progress=False)
    assert {"train.eval_every", "train.checkpoint_every", "train.keep_checkpoints", "train.snapshot_every",
            "train.progress"} <= set(WATCHING)
    assert often["validations"] > seldom["validations"]  # the settings took effect where they act
    # the snapshots are train_stage_one's output (so the run cache restores them): every step, and
    # none without snapshot_every (an empty folder, as DVC wants a declared output); none left behind
    assert often["snapshots"] == ["step-000001", "step-000002", "step-000003"] and seldom["snapshots"] == []
    assert not often["left_beside_checkpoints"]
    assert often["weights"] == seldom["weights"]
    assert often["metrics"] == seldom["metrics"] and often["curve"] == seldom["curve"]


def test_every_stage_but_the_report_is_kept_in_dvcs_run_cache():
    """DVC saves (and so restores) a stage's run only when it has a command, dependencies and
    outputs, none persistent, and every output it does not cache is a metric or a plot
    (dvc/stage/cache.py `_can_hash`, dvc/stage/__init__.py `Stage.run`): a `cache: false` file
    declared under `outs` would make the stage run again at every new execution."""
    from dvc.repo import Repo

    with Repo(str(PROJECT_ROOT)) as repo:
        stages = list(repo.index.stages)
    kept = {s.addressing for s in stages if s.cmd and s.deps and s.outs and not any(o.persist for o in s.outs)
            and all(o.use_cache or o.is_metric or o.is_plot for o in s.outs)}
    assert {_template(s.addressing) for s in stages if s.addressing not in kept} == {"report", "review"}
    assert {"preprocess", "train_stage_one@eric", "train_mentions", "evaluate@eric"} <= kept
