"""stages/ is a script folder whose modules import `_flow` by bare name: tests do the same."""

import sys

from eric.config import PROJECT_ROOT

STAGES = str(PROJECT_ROOT / "stages")
if STAGES not in sys.path:
    sys.path.insert(0, STAGES)
