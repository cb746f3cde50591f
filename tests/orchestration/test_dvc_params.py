"""dvc.yaml declares what each stage reads: every eric module its script imports (so a code
change reruns it) and only the params keys it reads (so a display setting or another variant's
options rerun nothing)."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest
import yaml

from eric.config import PROJECT_ROOT

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


def test_display_settings_and_another_variants_options_change_no_stage():
    params = stage_params()
    assert {"train_stage_one@eric", "train_stage_one@bart", "evaluate@eric"} <= set(params)
    assert readers(params, "train.progress") == set()
    assert readers(params, "model.variants.simctg.options.margin") == set()  # not in `variants`
    bart_only = readers(params, "model.variants.bart.options")
    assert bart_only and all(stage.endswith("@bart") for stage in bart_only), bart_only
    assert {"train_stage_one@eric", "train_stage_one@bart", "train_mentions"} <= readers(params, "train.lr")
    assert readers(params, "model.state_space.recipe") >= {"train_stage_one@eric", "train_stage_one@bart"}
