# Source from a shell before running services or tools by hand:  . infra/env.sh
# The values are eric/env.py's DEFAULTS (offline hub, telemetry off), declared there once.
eval "$("${ERIC_PYTHON:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv/bin/python}" -c 'from eric.env import shell_exports; print(shell_exports())')"
