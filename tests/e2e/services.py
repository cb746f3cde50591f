"""Helpers of the end-to-end test: a throw-away copy of the project, the services
of infra/services.sh on free loopback ports, and small REST clients."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

from eric.config import PROJECT_ROOT

GIT_ID = ["-c", "user.name=eric-e2e", "-c", "user.email=e2e@localhost"]


def copy_project(base: Path) -> Path:
    """The working tree's files (tracked and untracked, not ignored) in base/eric,
    committed to a fresh git repo (the embedded corpus comes with them). DVC and MLflow
    write only there."""
    root = base / "eric"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT_ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = PROJECT_ROOT / rel
        if src.is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)
    for args in (["init", "-q"], ["add", "-A"], [*GIT_ID, "commit", "-q", "-m", "e2e snapshot"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    for key, value in (("user.name", "eric-e2e"), ("user.email", "e2e@localhost")):
        subprocess.run(["git", "config", key, value], cwd=root, check=True)  # dvc exp commits
    return root


# what in-process training of an earlier test may leave in os.environ (eric/train/runtime.py): a
# child would take MASTER_PORT for a launcher's and fail on the port this process still holds
LAUNCHER_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def clean_env() -> dict[str, str]:
    """This process's environment without its services, its eric settings and launcher variables.
    A copy's training uses this checkout's compiled DeepSpeed ops (eric/train/runtime.py): built
    again in every copy, the CPU comm op cost each copy about 2 minutes."""
    from eric.train.runtime import EXTENSIONS_DIR

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "MLFLOW_", "ERIC_")) and k not in LAUNCHER_ENV}
    env.setdefault("TORCH_EXTENSIONS_DIR", str(EXTENSIONS_DIR))
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# What infra/services.sh says when a port was taken between free_port() and the server's bind.
PORT_TAKEN = ("is in use on 127.0.0.1", "address already in use")


class Services:
    """infra/services.sh of the copy, on free ports, state under base/services."""

    def __init__(self, root: Path, base: Path):
        self.root, self.state = root, base / "services"
        self.env = clean_env()
        self.env.update(
            ERIC_PYTHON=sys.executable,
            ERIC_SERVICES_DIR=str(self.state),
            ERIC_START_TIMEOUT="240",
            PREFECT_WORKER_QUERY_SECONDS="2",
        )
        self.use_ports(free_port(), free_port())

    def use_ports(self, prefect_port: int, mlflow_port: int) -> None:
        self.prefect_port, self.mlflow_port = prefect_port, mlflow_port
        self.env.update(ERIC_PREFECT_PORT=str(prefect_port), ERIC_MLFLOW_PORT=str(mlflow_port))
        self.prefect_api = f"http://127.0.0.1:{prefect_port}/api"
        self.mlflow_url = f"http://127.0.0.1:{mlflow_port}"

    def start(self, tries: int = 3) -> subprocess.CompletedProcess:
        """`start`, on fresh ports again when another process took ours before the server bound
        it (the script refuses a busy port, and a server that loses the race exits)."""
        for _ in range(tries):
            started = self.script("start")
            if started.returncode == 0 or not any(m in started.stderr.lower() for m in PORT_TAKEN):
                return started
            self.script("stop", timeout=120)
            self.use_ports(free_port(), free_port())
        return started

    def script(self, action: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(self.root / "infra" / "services.sh"), action],
            cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout,
        )

    def client_env(self) -> dict[str, str]:
        """What `eval "$(infra/services.sh env)"` gives a shell."""
        lines = self.script("env").stdout.split()
        pairs = dict(item.split("=", 1) for item in lines if "=" in item)
        return {**self.env, **{k: v.strip("'") for k, v in pairs.items()}}

    def prefect(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "prefect", *args],
            cwd=self.root, env=self.client_env(), capture_output=True, text=True, timeout=timeout,
        )

    def pids(self) -> dict[str, int]:
        return {p.stem: int(p.read_text()) for p in self.state.glob("*.pid") if p.read_text().strip()}

    def kill_leftovers(self) -> list[str]:
        """Last resort after `stop`: SIGKILL the process group of any service still alive."""
        alive = []
        for name, pid in self.pids().items():
            cmdline = Path(f"/proc/{pid}/cmdline")
            if not cmdline.exists() or not _ours(cmdline):  # gone, or a reused pid
                continue
            try:
                os.killpg(pid, signal.SIGKILL)
                alive.append(name)
            except ProcessLookupError:
                pass
        return alive


def _ours(cmdline: Path) -> bool:
    return any(word in cmdline.read_bytes() for word in (b"prefect", b"mlflow"))


def get_json(url: str, payload: dict | None = None) -> dict:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"{}")


def mlflow_runs(base_url: str, experiment: str) -> list[dict]:
    """Every run of `experiment`, through MLflow's REST API (as README shows)."""
    query = urllib.parse.urlencode({"experiment_name": experiment})
    exp = get_json(f"{base_url}/api/2.0/mlflow/experiments/get-by-name?{query}")["experiment"]
    found = get_json(f"{base_url}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment_id"]]})
    return found.get("runs", [])


def tags_of(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


def metrics_of(run: dict) -> dict[str, float]:
    return {m["key"]: m["value"] for m in run["data"].get("metrics", [])}
