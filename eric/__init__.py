"""ERIC: coherent narrative generation with dynamic, discrete entity states."""

from eric.env import apply_defaults

apply_defaults()

__version__ = "0.1.0"
