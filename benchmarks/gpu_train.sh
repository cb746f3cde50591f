#!/usr/bin/env bash
# Training throughput at the data's real shape (benchmarks/gpu_train.py) at bart-base size on one
# CUDA GPU: token-budget batches of the processed training split, eager and compiled, ERIC and BART.
# Needs `data/processed` and `models/tokenizer` (a `dvc repro` of the embedded default makes them).
#
#     bash benchmarks/gpu_train.sh   # -> benchmarks/outputs/gpu/gpu_train_<card>_<commit>.json + .log
#
# ON_CPU=1 runs it without a GPU (the test does, at a toy size: --size tiny ...).
# COMPILE_CAP (seconds, default 300) bounds each compiled model ("did not finish" past it).
# OUT_DIR moves the outputs; COMMIT names them where the checkout has no git history. Extra
# arguments go to gpu_train.py (e.g. --modes eager, --micro-tokens 32768, --peak-tflops 989).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
if [[ -z "${ON_CPU:-}" ]] && ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_train.sh: no CUDA device visible to $PYTHON" >&2
  exit 2
fi
card=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name().replace(" ", "_") if torch.cuda.is_available() else "cpu")')
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
out=${OUT_DIR:-benchmarks/outputs/gpu}
mkdir -p "$out"
export TOKENIZERS_PARALLELISM=false
export TORCH_LOGS=${TORCH_LOGS:-recompiles}  # every recompile and the guard that failed, in the log
"$PYTHON" benchmarks/gpu_train.py --size base --compile-cap "${COMPILE_CAP:-300}" \
  --out "$out/gpu_train_${card}_${commit}.json" "$@" \
  2>&1 | tee "$out/gpu_train_${card}_${commit}.log"
