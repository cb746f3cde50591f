"""ERIC: coherent narrative generation with dynamic, discrete entity states."""

__version__ = "0.1.0"
