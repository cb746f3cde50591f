"""What being a Prefect flow costs a stage: wall time of `python <toy stage>.py`,
a stage of two trivial tasks made with stages/_flow.py, in fresh interpreters.

    python benchmarks/bench_flow_startup.py [--repeats 3] [--no-server]

Rows: the interpreter with prefect imported (the floor); the flow in ephemeral
mode on a fresh PREFECT_HOME (first run: migrations) and on a warm one; the flow
against a running `prefect server`; the same function without Prefect (run.fn).
Best of N, modes interleaved (the host is noisy).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from record import record

ROOT = Path(__file__).resolve().parent.parent
TOY_STAGE = """
import sys
sys.path.insert(0, {stages!r})
from _flow import run_stage, stage_flow, stage_task

@stage_task
def load(x: int) -> int:
    return x + 1

@stage_task
def save(x: int) -> dict:
    return {{"value": x}}

@stage_flow("toy")
def run(params_path: str = "1") -> dict:
    return save(load(int(params_path)))

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "import":
        pass
    elif mode == "plain":
        assert run.fn("1") == {{"value": 2}}
    else:
        assert run_stage(run, argv=["1"]) == {{"value": 2}}
"""


def timed(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, env=env, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(home: Path, env: dict[str, str], tries: int = 3) -> tuple[subprocess.Popen, str]:
    """A Prefect server on a free port; a fresh port again when ours was taken before the
    server bound it (the server exits; a health answer counts only while ours runs)."""
    for _ in range(tries):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=dict(env, PREFECT_HOME=str(home)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        api = f"http://127.0.0.1:{port}/api"
        for _ in range(300):
            if proc.poll() is not None:
                break
            try:
                urllib.request.urlopen(f"{api}/health", timeout=2)
                return proc, api
            except OSError:
                time.sleep(1)
        else:
            raise SystemExit("prefect server did not become healthy in 300 s")
    raise SystemExit(f"prefect server exited at start {tries} times (ports taken?)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-server", action="store_true", help="skip the running-server row")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench_flow_"))
    toy = work / "toy_stage.py"
    toy.write_text(TOY_STAGE.format(stages=str(ROOT / "stages")))
    base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    warm_home = work / "warm"
    rows: dict[str, list[float]] = {}
    server = None
    try:
        timed([sys.executable, str(toy), "flow"], dict(base, PREFECT_HOME=str(warm_home)))  # warm it up
        if not args.no_server:
            server, api = start_server(work / "server", base)
        for i in range(args.repeats):
            cold = work / f"cold{i}"
            modes = {
                "python + import prefect (floor)": ("import", dict(base, PREFECT_HOME=str(warm_home))),
                "stage without Prefect (run.fn)": ("plain", dict(base, PREFECT_HOME=str(warm_home))),
                "flow, ephemeral, fresh PREFECT_HOME": ("flow", dict(base, PREFECT_HOME=str(cold))),
                "flow, ephemeral, warm PREFECT_HOME": ("flow", dict(base, PREFECT_HOME=str(warm_home))),
            }
            if server:
                modes["flow, running server (PREFECT_API_URL)"] = ("flow", dict(base, PREFECT_API_URL=api, PREFECT_HOME=str(warm_home)))
            for label, (mode, env) in modes.items():
                rows.setdefault(label, []).append(timed([sys.executable, str(toy), mode], env))
    finally:
        if server:
            os.killpg(server.pid, signal.SIGINT)
            server.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(f"stage start-up, best of {args.repeats} (s), load average {os.getloadavg()[0]:.1f}:")
    for label, values in rows.items():
        print(f"  {label:42s} {min(values):6.1f}   (median {sorted(values)[len(values) // 2]:.1f})")
    record("bench_flow_startup", {f"{label} (best s)": round(min(values), 2) for label, values in rows.items()})


if __name__ == "__main__":
    main()
