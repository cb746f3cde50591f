"""Process-wide environment defaults, declared here once.

`DEFAULTS` (offline hub, telemetry off) apply on `import eric`, and to shells through
`shell_exports` (infra/env.sh, infra/services.sh); `apply_prefect_defaults` is
called by the stage and flow entry points before they import Prefect, which reads its
settings once, at import. Only defaults (`setdefault`): a user who exports another value
keeps it. `stop_ephemeral_server_with_process`: a killed entry point takes its ephemeral
Prefect server with it.
"""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

DEFAULTS = {
    # nothing downloads at run time: models and tokenizers come from local paths
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    # no phoning home from the orchestration stack
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "1",
}

PREFECT_DEFAULTS = {
    # the ephemeral server needs 8-30 s on 2 busy cores; Prefect's default is 20
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    # stages use no blocks; skipping their registration shortens every start
    "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
    "PREFECT_LOGGING_LOG_PRINTS": "true",
}


def apply_defaults() -> None:
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


def apply_prefect_defaults(project_root: Path) -> None:
    """Prefect's settings for this project (state in <project>/.prefect, git-ignored);
    call before `import prefect`."""
    apply_defaults()
    os.environ.setdefault("PREFECT_HOME", str(project_root / ".prefect"))
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)


# Runs beside each ephemeral server, as `python -I -S -c` (no site: starts in ~20 ms):
# waits for the stage (its parent) to die, however it died, then stops the server as
# Prefect's own stop() does (TERM, then KILL after 5 s). A pidfd names that very process,
# so a pid reused after a normal exit (the server already stopped) is never signalled.
_WATCHDOG = """
import os, select, signal, sys, time
stage, server = int(sys.argv[1]), int(sys.argv[2])
try:
    fd = os.pidfd_open(server)
except ProcessLookupError:
    sys.exit()
except (AttributeError, OSError):
    fd = None
def send(sig):
    try:
        signal.pidfd_send_signal(fd, sig) if fd is not None else os.kill(server, sig)
    except ProcessLookupError:
        sys.exit()
while os.getppid() == stage:
    time.sleep(0.25)
send(signal.SIGTERM)
if fd is not None and not select.select([fd], [], [], 5)[0]:
    send(signal.SIGKILL)
"""
_watchdogs: list[subprocess.Popen] = []  # kept: a Popen collected while running warns


class _OwnSession:
    """`subprocess` as Prefect's server module sees it, except that Popen starts the server in
    a session of its own: a Ctrl-C (SIGINT to the terminal's process group) or a `kill -- -pgid`
    then reaches the stage, not its server. Sharing the group, the server died with the signal
    and the stage spent about 150 s retrying to report its crash to it, printing tracebacks."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen:  # noqa: N802 (subprocess's name)
        return subprocess.Popen(*args, **kwargs, start_new_session=True)


def stop_ephemeral_server_with_process() -> None:
    """Prefect's ephemeral server (a uvicorn child, SubprocessASGIServer) is stopped only
    by an atexit hook, so a killed stage or flow leaves it running, holding its port and the
    stage's stdout. Prefect offers no setting or preexec hook for that child, and
    PR_SET_PDEATHSIG would fire when the *thread* that started it ends (any of Prefect's
    threads may), so each server started in this process gets a watchdog process, and
    starts in a session of its own (`_OwnSession`), out of reach of the signals sent to
    the stage's group. A no-op with PREFECT_API_URL set: then no server module is even imported."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value() or os.name != "posix":
        return
    from prefect.server.api import server as server_module  # get_client imports it next anyway

    start = getattr(server_module.SubprocessASGIServer, "_run_uvicorn_command", None)
    if start is None or getattr(start, "eric_watched", False):
        return
    server_module.subprocess = _OwnSession()  # its one Popen is the server's

    def run_uvicorn_command(self: Any) -> subprocess.Popen:
        server = start(self)  # every server: Prefect starts another if the port was taken
        _watchdogs.append(subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(os.getpid()), str(server.pid)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the terminal's group leaves it to finish its job
        ))  # fmt: skip
        return server

    run_uvicorn_command.eric_watched = True  # type: ignore[attr-defined]
    server_module.SubprocessASGIServer._run_uvicorn_command = run_uvicorn_command


def exit_interrupted(name: str) -> None:
    """A Ctrl-C's one line (the flow has recorded its run as crashed) and the shell's status, 130."""
    print(f"{name}: interrupted", file=sys.stderr)
    sys.exit(130)


def shell_exports() -> str:
    """`DEFAULTS` as one shell line (infra/env.sh and infra/services.sh eval it)."""
    return "export " + " ".join(f"{key}={value}" for key, value in DEFAULTS.items())
