"""Environment defaults, declared once in eric/env.py and reaching every entry point:
Python processes (`import eric`), the stage and flow entry points (Prefect's settings) and
shells (infra/env.sh, infra/services.sh)."""

from __future__ import annotations

import os
import subprocess
import sys

from eric import env
from eric.config import PROJECT_ROOT


def _shell(script: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in env.DEFAULTS}
    clean["ERIC_PYTHON"] = sys.executable
    out = subprocess.run(["bash", "-c", f"{script} && env -0"], cwd=PROJECT_ROOT, env=clean, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


def test_a_shell_that_sources_infra_env_sh_gets_every_default():
    got = _shell(". infra/env.sh")
    assert {k: got.get(k) for k in env.DEFAULTS} == env.DEFAULTS


def test_the_services_client_environment_carries_the_defaults(tmp_path):
    got = _shell(f'eval "$(ERIC_SERVICES_DIR={tmp_path} bash infra/services.sh env)"')
    assert {k: got.get(k) for k in env.DEFAULTS} == env.DEFAULTS
    assert got["PREFECT_HOME"] == str(tmp_path / "prefect")


def test_prefect_defaults_keep_a_users_value(monkeypatch, tmp_path):
    for key in ("PREFECT_HOME", *env.PREFECT_DEFAULTS, *env.DEFAULTS):  # recorded, so the test leaves them as found
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    env.apply_prefect_defaults(tmp_path)
    assert os.environ["PREFECT_HOME"] == str(tmp_path / ".prefect")
    assert os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] == "300"  # exported by the user: kept
    assert os.environ["PREFECT_API_BLOCKS_REGISTER_ON_START"] == "false"
