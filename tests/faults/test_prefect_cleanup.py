"""A stage killed with `kill -9` leaves no Prefect server behind.

Without PREFECT_API_URL a stage's flow starts Prefect's temporary server as a child
process (stages/_flow.py); SIGKILL gives the stage no chance to stop it, so a watchdog
must. A real stage-like script goes through run_stage's ephemeral path here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from eric.config import PROJECT_ROOT

STAGE = """\
import sys, time
sys.path.insert(0, {stages!r})
from _flow import run_stage, stage_flow


@stage_flow("sleepy")
def run(seconds: str = "120") -> None:
    print("in the flow", flush=True)
    time.sleep(float(seconds))


if __name__ == "__main__":
    run_stage(run)
"""


def servers(stage: psutil.Process) -> list[psutil.Process]:
    """The stage's Prefect server: uvicorn serving prefect's app."""
    found = []
    for child in stage.children(recursive=True):
        try:
            if "uvicorn" in child.cmdline():
                found.append(child)
        except psutil.Error:
            pass
    return found


def test_a_killed_stage_leaves_no_prefect_server_running(tmp_path):
    script = tmp_path / "sleepy.py"
    script.write_text(STAGE.format(stages=str(PROJECT_ROOT / "stages")))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # ephemeral mode
    log = tmp_path / "stage.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    stage = psutil.Process(proc.pid)
    started: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 150  # the server's start-up: 8-30 s on 2 busy cores, up to its 120 s timeout
        while "in the flow" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        started = stage.children(recursive=True)  # the server, and whatever else the stage started
        server = servers(stage)
        assert len(server) == 1, [p.cmdline() for p in started]

        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        gone, alive = psutil.wait_procs(server, timeout=15)
        assert not alive, "the killed stage's Prefect server still runs"
        _, helpers = psutil.wait_procs(started, timeout=5)
        assert not helpers, [p.cmdline() for p in helpers]  # nor anything else it started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for child in started:
            try:
                child.kill()
            except psutil.Error:
                pass
