#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py) at bart-base size with the GPU recipes: bf16 autocast
# (infra/deepspeed/gpu_bf16.json) and ZeRO-2 (gpu_bf16_zero2.json). Run from the project root on a
# CUDA machine with the venv set up (infra/setup.sh, then a CUDA torch: DEVELOPERS.md):
#
#     bash benchmarks/gpu_check.sh   # -> benchmarks/outputs/gpu/gpu_check_<card>_<commit>.json + .log
#
# Commit the JSON with the code that made it: docs/gpu.md is rendered from it (python -m studies.render).
#
# Extra arguments go to gpu_check.py (e.g. --peak-tflops 989 for a card not in its table).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check.sh: no CUDA device visible to $PYTHON (torch $("$PYTHON" -c 'import torch; print(torch.__version__)'))" >&2
  exit 2
fi
card=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name().replace(" ", "_"))')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
out=benchmarks/outputs/gpu
mkdir -p "$out"
export TOKENIZERS_PARALLELISM=false
"$PYTHON" benchmarks/gpu_check.py --size base --steps 20 --warmup 5 --batch 16 \
  --sample-batches 1 8 32 --sample-tokens 128 --out "$out/gpu_check_${card}_${commit}.json" "$@" \
  2>&1 | tee "$out/gpu_check_${card}_${commit}.log"
