"""infra/scale/check.py: the scale-out examples of infra/README.md hold up."""

from __future__ import annotations

import base64
import json
import sys

import pytest

from eric.config import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "infra" / "scale"))
from check import EXAMPLE_LAUNCH, CheckError, deepspeed_dryrun, torchrun_local, work_pool_template  # noqa: E402

SCALE = PROJECT_ROOT / "infra" / "scale"


def test_deepspeed_hostfile_launch_plans_every_node_and_rank():
    cmd = deepspeed_dryrun(SCALE / "hostfile.example", EXAMPLE_LAUNCH)
    assert cmd[:2] == ["pdsh", "-S"] and "gpu-node-1,gpu-node-2" in cmd
    world = next(a for a in cmd if a.startswith("--world_info="))
    ranks = json.loads(base64.urlsafe_b64decode(world.split("=", 1)[1]))
    assert ranks == {"gpu-node-1": list(range(8)), "gpu-node-2": list(range(8))}
    assert cmd[-3:] == ["stages/train_stage_one.py", "eric", "params.yaml"]


def test_a_one_node_hostfile_is_not_a_multi_node_launch(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("only-node slots=4\n")
    with pytest.raises(CheckError, match="two nodes or more"):
        deepspeed_dryrun(hostfile, EXAMPLE_LAUNCH)


def test_torchrun_two_nodes_meet_and_all_reduce_on_loopback():
    lines = torchrun_local(nodes=2)
    assert sorted(line.split(":")[0] for line in lines) == ["rank 0/2 node 0", "rank 1/2 node 1"]
    assert all("all_reduce 3 (expected 3)" in line for line in lines)


def test_kubernetes_work_pool_template_renders_a_job():
    rendered = work_pool_template(SCALE / "k8s-work-pool.json")
    container = rendered["job_manifest"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == "prefect flow-run execute"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert rendered["namespace"] == "eric"


def test_a_template_with_an_undeclared_variable_is_rejected(tmp_path):
    spec = json.loads((SCALE / "k8s-work-pool.json").read_text())
    spec["job_configuration"]["job_manifest"]["metadata"]["annotations"] = {"team": "{{ team }}"}
    broken = tmp_path / "pool.json"
    broken.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="undeclared variable"):
        work_pool_template(broken)


def test_torchrun_on_a_taken_rendezvous_port_fails_with_one_line(monkeypatch):
    import socket

    import check

    with socket.socket() as held:  # a listener that is not a c10d store: the agents wait on it
        held.bind(("127.0.0.1", 0))
        held.listen()
        monkeypatch.setattr(check, "_free_port", lambda: held.getsockname()[1])
        with pytest.raises(CheckError, match=r"did not finish in 5 s \(rendezvous 127\.0\.0\.1:\d+; is that port taken\?\)"):
            torchrun_local(nodes=2, timeout=5)
