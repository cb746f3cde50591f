"""stages/ and flows/ are script folders (DVC and Prefect run their files by
path); their modules import their siblings by bare name, so tests do the same."""

import sys

from eric.config import PROJECT_ROOT

for folder in ("stages", "flows"):
    path = str(PROJECT_ROOT / folder)
    if path not in sys.path:
        sys.path.insert(0, path)
