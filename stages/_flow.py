"""Every DVC stage is a Prefect flow; its main steps are tasks.

A stage file follows this pattern (DVC's `cmd` stays `python stages/<name>.py`):

    from _flow import run_stage, stage_flow, stage_task

    @stage_task(retries=2)                 # a step; retry only what can fail transiently
    def fetch(...): ...

    @stage_flow("train_stage_one")         # `run(params_path)` stays callable
    def run(params_path: str = "params.yaml") -> dict: ...

    if __name__ == "__main__":
        run_stage(run, ParamsError, TrainError)   # argv -> run's parameters; these errors: one line

Where the flow reports:
- PREFECT_API_URL set (a server from infra/services.sh, or a worker's flow run):
  to that server; the pipeline flow hands its own server down to every stage.
- unset: Prefect's ephemeral mode, a temporary server on 127.0.0.1 whose SQLite
  state persists in <project>/.prefect (git-ignored), so its migrations run once.
  A stage killed outright (SIGKILL, or SIGTERM, which skips Prefect's atexit stop)
  takes that server with it: a watchdog per server stops it
  (eric/env.py stop_ephemeral_server_with_process; the pipeline and study flows too).
`run.fn(...)` runs the stage without Prefect at all (tasks then call straight
through): what unit tests use.
Under the pipeline flow, ERIC_PREFECT_PARENT_TASK_RUN_ID names its `run_dvc` task run:
the stage's flow run is created as a child of it (Prefect's own subflow link, as
`run_deployment(as_subflow=True)` makes), so the stages show under the pipeline run.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# This checkout's `eric`, whatever PYTHONPATH or an editable install points at: its
# params-relative paths then stay inside this checkout (a pipeline execution runs the
# stages in a checkout of its own, flows/dvc_steps.py).
if str(PROJECT_ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(PROJECT_ROOT))

from eric.env import apply_prefect_defaults, exit_interrupted, stop_ephemeral_server_with_process  # noqa: E402

apply_prefect_defaults(PROJECT_ROOT)  # before Prefect is imported: it reads its settings once

from prefect import Flow, Task, flow  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.context import FlowRunContext, TaskRunContext  # noqa: E402

# Errors that mean "bad input" (ParamsError, CorpusError, ...): logged in one line,
# never retried. Each stage names its own through run_stage / quiet_user_errors.
USER_ERRORS: tuple[type[BaseException], ...] = ()


class StageTask(Task):
    """A Prefect task that, outside any flow run, is a plain function call."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if FlowRunContext.get() is None and TaskRunContext.get() is None:
            return self.fn(*args, **kwargs)
        return super().__call__(*args, **kwargs)


def _retry_unless_user_error(task: Task, task_run: Any, state: Any) -> bool:
    return not isinstance(state.data, USER_ERRORS)


def stage_task(__fn: Callable | None = None, *, retries: int = 0, retry_delay_seconds: float = 5, **kwargs: Any):
    """Decorate a stage's main step. Inputs are not hashed (params objects, frames)."""

    def wrap(fn: Callable) -> StageTask:
        return StageTask(
            fn,
            retries=retries,
            retry_delay_seconds=retry_delay_seconds,
            retry_condition_fn=_retry_unless_user_error,
            cache_policy=NO_CACHE,
            persist_result=False,
            **kwargs,
        )

    return wrap(__fn) if __fn is not None else wrap


def run_name(stage: str, parameters: dict[str, Any]) -> str:
    """A stage's flow-run name, as DVC names the stage: `evaluate@eric`, `report`."""
    variant = parameters.get("variant")
    return f"{stage}@{variant}" if variant else stage


def stage_flow(name: str, **kwargs: Any) -> Callable[[Callable], Flow]:
    """Decorate a stage's `run`: the flow `stage-<name>`, results kept in memory only,
    each flow run named as DVC names the stage (run_name)."""

    def current_run_name() -> str:
        from prefect.runtime import flow_run

        return run_name(name, flow_run.parameters)

    def wrap(fn: Callable) -> Flow:
        return flow(
            fn,
            name=f"stage-{name}",
            flow_run_name=current_run_name,
            persist_result=False,
            validate_parameters=False,  # the stage validates params.yaml itself
            **kwargs,
        )

    return wrap


class _OneLineUserErrors(logging.Filter):
    """Prefect logs a failing run with its traceback; for bad input, keep one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], USER_ERRORS):
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_user_errors(*errors: type[BaseException]) -> None:
    """Treat `errors` as bad input: no traceback in Prefect's logs, no retries."""
    global USER_ERRORS
    USER_ERRORS = tuple(dict.fromkeys(USER_ERRORS + errors))
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OneLineUserErrors) for f in logger.filters):
            logger.addFilter(_OneLineUserErrors())


def _usage(stage: Flow) -> str:
    """The command line a stage takes, from its signature: `<variant> [params_path]`."""
    params = inspect.signature(stage.fn).parameters.values()
    words = [f"<{p.name}>" if p.default is inspect.Parameter.empty else f"[{p.name}]" for p in params]
    return f"usage: python stages/{stage.name.removeprefix('stage-')}.py {' '.join(words)}"


def _arity(stage: Flow) -> tuple[int, float]:
    params = list(inspect.signature(stage.fn).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return 0, float("inf")
    return sum(p.default is inspect.Parameter.empty for p in params), len(params)


def run_stage(stage: Flow, *errors: type[BaseException], argv: list[str] | None = None) -> Any:
    """`python stages/<name>.py [args...]`: the flow's positional parameters from the
    command line; bad input (and a wrong command line) exits in one line, and so does a
    Ctrl-C (exit status 130).

    Under a distributed launcher (deepspeed, torchrun) only rank 0 is a Prefect
    flow run; the other ranks run the same function without Prefect."""
    quiet_user_errors(*errors)
    given = sys.argv[1:] if argv is None else argv
    args = [a for a in given if not a.startswith("--local_rank")]  # deepspeed appends it
    least, most = _arity(stage)
    if not least <= len(args) <= most:
        sys.exit(_usage(stage))
    call = flow_call(stage) if int(os.environ.get("RANK", "0")) == 0 else stage.fn
    try:
        return call(*args)
    except USER_ERRORS as exc:
        sys.exit(f"{stage.name}: {exc}")
    except KeyboardInterrupt:
        exit_interrupted(stage.name)


PARENT_TASK_ENV = "ERIC_PREFECT_PARENT_TASK_RUN_ID"


def flow_call(stage: Flow) -> Callable[..., Any]:
    """How a stage's main process runs its flow: a child of the pipeline's task run
    when PARENT_TASK_ENV names one, else a flow run of its own."""
    parent = os.environ.get(PARENT_TASK_ENV)
    stop_ephemeral_server_with_process()
    return (lambda *args: run_as_child(stage, parent, *args)) if parent else stage


def run_as_child(stage: Flow, parent_task_run_id: str, *args: Any) -> Any:
    """Run `stage` as a flow run whose parent is the task run `parent_task_run_id` of
    another process's flow run (the pipeline's `run_dvc`): Prefect's subflow link."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow
    from prefect.states import Pending
    from prefect.utilities.callables import get_call_parameters

    parameters = get_call_parameters(stage.fn, args, {})
    with get_client(sync_client=True) as client:
        parent = client.read_task_run(UUID(parent_task_run_id))
        flow_run = client.create_flow_run(
            flow=stage,
            name=run_name(stage.name.removeprefix("stage-"), parameters),
            parameters=stage.serialize_parameters(parameters),
            state=Pending(),
            parent_task_run_id=parent.id,
            tags=["eric", f"pipeline:{parent.flow_run_id}"],
        )
    return run_flow(stage, flow_run=flow_run, parameters=parameters)
