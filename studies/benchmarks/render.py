"""The benchmarks study has no page of its own: its figures fill docs/benchmarks.md and
docs/gpu.md through studies/render.py's `benchmarks` and `gpu-check` blocks."""

from __future__ import annotations

from pathlib import Path


def pages() -> dict[Path, str]:
    return {}
