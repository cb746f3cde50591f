"""infra/services.sh refuses a port another process holds: otherwise its health check
would be answered by that process's server and the start would report success."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from eric.config import PROJECT_ROOT
from tests.e2e.services import Services


def test_start_refuses_a_busy_port_and_launches_nothing(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        env = dict(os.environ, ERIC_PYTHON=sys.executable, ERIC_SERVICES_DIR=str(tmp_path),
                   ERIC_MLFLOW_PORT=str(busy), ERIC_PREFECT_PORT="1")  # fmt: skip
        started = subprocess.run(["bash", str(PROJECT_ROOT / "infra" / "services.sh"), "start"],
                                 env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert started.returncode == 3
    assert f"port {busy} is in use on 127.0.0.1 (set ERIC_MLFLOW_PORT" in started.stderr
    assert not list(tmp_path.glob("*.pid"))  # neither server was launched


def test_the_e2e_services_retry_on_fresh_ports_when_theirs_was_taken(tmp_path, monkeypatch):
    services = Services(tmp_path, tmp_path)
    first = services.mlflow_port
    answers = iter([
        subprocess.CompletedProcess([], 3, "", f"services: port {first} is in use on 127.0.0.1 (set ERIC_MLFLOW_PORT to another port)"),
        subprocess.CompletedProcess([], 0, "ready", ""),
    ])  # fmt: skip
    calls = []
    monkeypatch.setattr(services, "script", lambda action, timeout=300: calls.append((action, services.env["ERIC_MLFLOW_PORT"])) or (next(answers) if action == "start" else None))
    assert services.start().returncode == 0
    assert [a for a, _ in calls] == ["start", "stop", "start"]
    assert calls[0][1] == str(first) and calls[2][1] == str(services.mlflow_port)
    assert services.mlflow_url.endswith(f":{services.mlflow_port}") and services.env["ERIC_MLFLOW_PORT"] == str(services.mlflow_port)


def test_the_e2e_services_do_not_retry_other_failures(tmp_path, monkeypatch):
    services = Services(tmp_path, tmp_path)
    calls = []
    monkeypatch.setattr(services, "script", lambda action, timeout=300: calls.append(action) or subprocess.CompletedProcess([], 1, "", "services: mlflow exited"))
    assert services.start().returncode == 1 and calls == ["start"]
