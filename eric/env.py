"""Process-wide environment defaults, declared here once.

`DEFAULTS` (offline hub, telemetry off) apply on `import eric`, and to shells through
`shell_exports` (infra/env.sh, infra/services.sh); `apply_prefect_defaults` is
called by the stage and flow entry points before they import Prefect, which reads its
settings once, at import. Only defaults (`setdefault`): a user who exports another value
keeps it.
"""

import os
from pathlib import Path

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


def shell_exports() -> str:
    """`DEFAULTS` as one shell line (infra/env.sh and infra/services.sh eval it)."""
    return "export " + " ".join(f"{key}={value}" for key, value in DEFAULTS.items())
