"""A stage killed with `kill -9` leaves no Prefect server behind, and one interrupted
with a signal to its whole process group (Ctrl-C, `kill -- -pgid`) stops at once.

Without PREFECT_API_URL a stage's flow starts Prefect's temporary server as a child
process (stages/_flow.py); SIGKILL gives the stage no chance to stop it, so a watchdog
must. The server runs in a session of its own (eric/env.py `_OwnSession`): sharing the
stage's group, it died with the group's signal and the stage spent about 150 s retrying to
report its crash to it. A real stage-like script goes through run_stage's ephemeral path here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from eric.config import PROJECT_ROOT

STAGE = """\
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal: a runner may ignore it
sys.path.insert(0, {stages!r})
from _flow import run_stage, stage_flow


@stage_flow("sleepy")
def run(seconds: str = "120") -> None:
    print("in the flow", flush=True)
    time.sleep(float(seconds))


if __name__ == "__main__":
    run_stage(run)
"""


def servers(processes: list[psutil.Process]) -> list[psutil.Process]:
    """The stage's Prefect server among its processes: uvicorn serving prefect's app."""
    found = []
    for child in processes:
        try:
            if "uvicorn" in child.cmdline():
                found.append(child)
        except psutil.Error:
            pass
    return found


def start_stage(tmp_path) -> tuple[subprocess.Popen, list[psutil.Process], list[psutil.Process], Path]:
    """The stage-like script in a session of its own (its group is the one a terminal would
    signal), once its flow runs: (the stage, every process it started, its one server, its log)."""
    script = tmp_path / "sleepy.py"
    script.write_text(STAGE.format(stages=str(PROJECT_ROOT / "stages")))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # ephemeral mode
    log = tmp_path / "stage.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 150  # the server's start-up: 8-30 s on 2 busy cores, up to its 120 s timeout
    while "in the flow" not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    started = psutil.Process(proc.pid).children(recursive=True)  # the server, and whatever else the stage started
    server = servers(started)
    if len(server) != 1:
        stop(proc, started)
        raise AssertionError([p.cmdline() for p in started])
    return proc, started, server, log


def stop(proc: subprocess.Popen, started: list[psutil.Process]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for child in started:
        try:
            child.kill()
        except psutil.Error:
            pass


def test_a_killed_stage_leaves_no_prefect_server_running(tmp_path):
    proc, started, server, _ = start_stage(tmp_path)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        _, alive = psutil.wait_procs(server, timeout=15)
        assert not alive, "the killed stage's Prefect server still runs"
        _, helpers = psutil.wait_procs(started, timeout=5)
        assert not helpers, [p.cmdline() for p in helpers]  # nor anything else it started
    finally:
        stop(proc, started)


def test_a_ctrl_c_to_the_stages_group_stops_it_at_once_and_takes_its_server(tmp_path):
    """SIGINT to the whole group, as a terminal sends it (a `kill -- -pgid` with SIGTERM takes the
    same path to the server: it is not in the group; the watchdog then stops it, as above)."""
    proc, started, server, log = start_stage(tmp_path)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)  # sharing the group, the server died first: about 150 s of retries
        text = log.read_text()
        assert "Error logging to API" not in text and "Connection refused" not in text, text
        assert "Crash detected" in text, text  # the server lived to record it
        assert code == 130 and "stage-sleepy: interrupted\n" in text and "Traceback" not in text, text
        _, alive = psutil.wait_procs(server, timeout=15)
        assert not alive, "the interrupted stage's Prefect server still runs"
    finally:
        stop(proc, started)
