"""stages/_flow.py: stages as Prefect flows, callable without Prefect, bad input in one line.

Runs of the flows themselves against a Prefect server are in tests/e2e."""

from __future__ import annotations

import logging

import _flow
import pytest
import yaml
from _flow import StageTask, quiet_user_errors, run_stage, stage_flow, stage_task
from prefect import Flow
from prefect.context import TaskRunContext
from prefect.states import Failed

from tests.conftest import STORY_A, STORY_B


class BadKnob(ValueError):
    pass


@stage_task(retries=2)
def double(x: int) -> int:
    assert TaskRunContext.get() is None  # outside a flow: a plain call
    return 2 * x


def test_a_stage_task_outside_a_flow_is_a_plain_call():
    assert isinstance(double, StageTask)
    assert double.retries == 2
    assert double(21) == 42


def test_stage_flow_names_the_flow_and_keeps_the_function():
    @stage_flow("toy")
    def run(params_path: str = "params.yaml") -> dict:
        return {"path": params_path, "doubled": double(2)}

    assert isinstance(run, Flow) and run.name == "stage-toy"
    assert run.fn("p.yaml") == {"path": "p.yaml", "doubled": 4}


def test_a_stage_flow_run_is_named_as_dvc_names_the_stage(monkeypatch):
    from prefect.runtime import flow_run

    @stage_flow("evaluate")
    def run(variant: str, params_path: str = "params.yaml") -> dict:
        return {}

    monkeypatch.setattr(flow_run, "parameters", {"variant": "eric", "params_path": "p.yaml"}, raising=False)
    assert run.flow_run_name() == "evaluate@eric"
    monkeypatch.setattr(flow_run, "parameters", {"params_path": "p.yaml"}, raising=False)
    assert run.flow_run_name() == "evaluate"
    assert _flow.run_name("report", {}) == "report" and _flow.run_name("sample", {"variant": "bart"}) == "sample@bart"


def test_user_errors_are_not_retried_and_lose_their_traceback():
    quiet_user_errors(BadKnob)
    assert not _flow._retry_unless_user_error(double, None, Failed(data=BadKnob("x")))
    assert _flow._retry_unless_user_error(double, None, Failed(data=OSError("disk")))

    logger = logging.getLogger("prefect.task_runs")
    for exc, keeps_traceback in ((BadKnob("bad knob"), False), (RuntimeError("bug"), True)):
        record = logger.makeRecord(logger.name, logging.ERROR, __file__, 1, "failed", (), (type(exc), exc, None))
        assert all(f.filter(record) for f in logger.filters)
        assert (record.exc_info is not None) == keeps_traceback


def test_run_stage_turns_a_user_error_into_one_line_exit():
    def stage(params_path="params.yaml"):
        raise BadKnob(f"{params_path}: seed: not an integer")

    stage.fn, stage.name = stage, "stage-toy"
    with pytest.raises(SystemExit) as info:
        run_stage(stage, BadKnob, argv=["p.yaml"])
    assert info.value.code == "stage-toy: p.yaml: seed: not an integer"

    def buggy(params_path="params.yaml"):
        raise KeyError("a bug keeps its traceback")

    buggy.fn, buggy.name = buggy, "stage-buggy"
    with pytest.raises(KeyError):
        run_stage(buggy, BadKnob, argv=[])


def test_only_rank_zero_of_a_distributed_launch_is_a_flow_run(monkeypatch):
    calls = []

    class Stage:
        name = "stage-toy"

        def __call__(self, *args):
            calls.append(("flow", args))

        @staticmethod
        def fn(params_path="params.yaml"):
            calls.append(("plain", (params_path,)))

    monkeypatch.setenv("RANK", "3")
    run_stage(Stage(), argv=["--local_rank=3", "p.yaml"])
    monkeypatch.setenv("RANK", "0")
    run_stage(Stage(), argv=["p.yaml", "--local_rank=0"])
    assert calls == [("plain", ("p.yaml",)), ("flow", ("p.yaml",))]


def test_the_command_line_follows_the_stage_signature():
    seen = []

    def train(variant: str, params_path: str = "params.yaml"):
        seen.append((variant, params_path))

    train.fn, train.name = train, "stage-train_stage_one"
    run_stage(train, argv=["eric"])
    run_stage(train, argv=["bart", "p.yaml", "--local_rank=1"])
    assert seen == [("eric", "params.yaml"), ("bart", "p.yaml")]
    for argv in ([], ["a", "b", "c"]):
        with pytest.raises(SystemExit) as info:
            run_stage(train, argv=argv)
        assert info.value.code == "usage: python stages/train_stage_one.py <variant> [params_path]"


def test_preprocess_runs_without_prefect_through_run_fn(tmp_path, write_wikiplots):
    import preprocess

    corpus = write_wikiplots([STORY_A, STORY_B])
    params = tmp_path / "params.yaml"
    overrides = {"corpus": {"path": str(corpus), "kind": "wikiplots"}, "preprocess": {"out_dir": str(tmp_path / "out")}}
    params.write_text(yaml.safe_dump(overrides))
    assert isinstance(preprocess.run, Flow) and preprocess.run.name == "stage-preprocess"
    stats = preprocess.run.fn(str(params))
    assert stats["stories_in"] == 2 and stats["examples_out"] == 2
    assert (tmp_path / "out" / "stats.json").is_file()
