"""Process-wide defaults: offline hub, telemetry off. Applied on `import eric`.

Only defaults (`setdefault`): a user who exports another value keeps it.
"""

import os

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


def apply_defaults() -> None:
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
