"""Checks of the scale-out examples in infra/README.md, runnable on one CPU box.

    python infra/scale/check.py deepspeed-dryrun [--hostfile F] [-- deepspeed args... script args...]
    python infra/scale/check.py torchrun-local [--nodes 2]
    python infra/scale/check.py work-pool [--template F] [--create NAME]
    python infra/scale/check.py all

deepspeed-dryrun: DeepSpeed's own launcher code parses the hostfile and builds the
  pdsh command every node would run; nothing is started.
torchrun-local:   N torchrun "nodes" on 127.0.0.1 meet through a c10d rendezvous
  and all-reduce over gloo (infra/scale/dist_check.py): a real multi-node launch.
work-pool:        the Kubernetes base job template passes Prefect's server-side
  check, its defaults fit its schema, and it renders to a batch/v1 Job; with
  --create it is registered on the Prefect server at PREFECT_API_URL.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
EXAMPLE_LAUNCH = ["--no_local_rank", "--master_addr", "gpu-node-1", "stages/train_stage_one.py", "eric", "params.yaml"]


class CheckError(RuntimeError):
    pass


def deepspeed_dryrun(hostfile: Path, launch_args: list[str]) -> list[str]:
    """The command DeepSpeed's launcher would run over pdsh, as a list."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")  # no GPU needed to plan a launch
    from deepspeed.launcher import runner
    from deepspeed.launcher.multinode_runner import PDSHRunner

    args = runner.parse_args(["--hostfile", str(hostfile), *launch_args])
    pool = runner.fetch_hostfile(args.hostfile)
    if not pool:
        raise CheckError(f"{hostfile}: no hostfile there")
    active = runner.parse_inclusion_exclusion(pool, args.include, args.exclude)
    active = runner.apply_num_nodes_and_gpus(active, args.num_nodes, args.num_gpus)
    if len(active) < 2:
        raise CheckError(f"{hostfile}: a multi-node launch needs two nodes or more, got {list(active)}")
    world_info = runner.encode_world_info(active)
    cmd, _, _ = PDSHRunner(args, world_info).get_cmd(dict(os.environ), active)
    ranks = sum(len(slots) for slots in active.values())
    print(f"deepspeed: {len(active)} nodes, {ranks} ranks: {dict((h, len(s)) for h, s in active.items())}")
    print("  " + shlex.join(cmd))
    return cmd


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torchrun_local(nodes: int = 2, timeout: float = 300) -> list[str]:
    """`nodes` torchrun agents on loopback, one process each: the multi-node recipe."""
    endpoint = f"127.0.0.1:{_free_port()}"
    command = [
        sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}", "--nproc_per_node=1",
        "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}", "--rdzv_id=eric-check",
        str(HERE / "dist_check.py"),
    ]  # fmt: skip
    print("torchrun (one per node): " + shlex.join(["torchrun", *command[3:]]))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    agents = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(nodes)]
    try:
        outputs = [agent.communicate(timeout=timeout)[0] for agent in agents]
    except subprocess.TimeoutExpired:  # e.g. another process took the port first: c10d then waits on it as a client
        raise CheckError(f"torchrun: the agents did not finish in {timeout:.0f} s (rendezvous {endpoint}; is that port taken?)") from None
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
    lines = [line for out in outputs for line in out.splitlines() if line.startswith("rank ")]
    for line in lines:
        print("  " + line)
    if any(agent.returncode for agent in agents) or len(lines) != nodes:
        tail = "\n".join(out.strip().splitlines()[-1] for out in outputs if out.strip())
        raise CheckError(f"torchrun: {nodes} nodes did not all finish the collective: {tail}")
    return lines


def work_pool_template(template: Path, create: str | None = None) -> dict:
    """Validate a base job template; return the rendered job configuration."""
    import jsonschema
    from prefect.server.schemas.actions import validate_base_job_template
    from prefect.utilities.templating import apply_values

    spec = json.loads(template.read_text())
    validate_base_job_template(spec)
    schema = spec["variables"]
    defaults = {k: v["default"] for k, v in schema["properties"].items() if "default" in v}
    jsonschema.validate(defaults, schema)
    runtime = {"name": "eric-pipeline-run", "command": "prefect flow-run execute", "labels": {"app": "eric"}}
    rendered = apply_values(spec["job_configuration"], {**defaults, **runtime})
    job = rendered["job_manifest"]
    if (job.get("apiVersion"), job.get("kind")) != ("batch/v1", "Job"):
        raise CheckError(f"{template}: job_manifest is not a batch/v1 Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    unresolved = [k for k, v in container.items() if isinstance(v, str) and "{{" in v]
    if unresolved or not container.get("image"):
        raise CheckError(f"{template}: container fields left unrendered: {unresolved or ['image']}")
    print(f"work pool template: valid; renders a Job running {container['image']} with {container['resources']['limits']}")
    if create:
        _create_pool(create, template)
    return rendered


def _create_pool(name: str, template: Path) -> None:
    if not os.environ.get("PREFECT_API_URL"):
        raise CheckError("--create needs PREFECT_API_URL (eval \"$(infra/services.sh env)\")")
    done = subprocess.run(
        [sys.executable, "-m", "prefect", "work-pool", "create", name, "--type", "kubernetes",
         "--base-job-template", str(template), "--overwrite"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise CheckError(f"prefect work-pool create {name}: {(done.stdout + done.stderr).strip().splitlines()[-1:]}")
    print(f"work pool {name!r} (kubernetes) registered on {os.environ['PREFECT_API_URL']}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="check", required=True)
    ds = sub.add_parser("deepspeed-dryrun")
    ds.add_argument("--hostfile", type=Path, default=HERE / "hostfile.example")
    ds.add_argument("launch", nargs=argparse.REMAINDER, help="deepspeed arguments, then the script and its arguments")
    tr = sub.add_parser("torchrun-local")
    tr.add_argument("--nodes", type=int, default=2)
    wp = sub.add_parser("work-pool")
    wp.add_argument("--template", type=Path, default=HERE / "k8s-work-pool.json")
    wp.add_argument("--create", metavar="POOL")
    sub.add_parser("all")
    args = parser.parse_args(argv)
    try:
        if args.check in ("deepspeed-dryrun", "all"):
            launch = [a for a in getattr(args, "launch", []) if a != "--"] or EXAMPLE_LAUNCH
            deepspeed_dryrun(getattr(args, "hostfile", HERE / "hostfile.example"), launch)
        if args.check in ("torchrun-local", "all"):
            torchrun_local(getattr(args, "nodes", 2))
        if args.check in ("work-pool", "all"):
            work_pool_template(getattr(args, "template", HERE / "k8s-work-pool.json"), getattr(args, "create", None))
    except (CheckError, ValueError, OSError) as exc:
        sys.exit(f"check {args.check}: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
