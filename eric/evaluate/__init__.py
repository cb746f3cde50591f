"""Evaluation of generated stories (the paper's Table 2 and analyses).

  text         what is scored: special tokens removed, at most 15 units, WordPunct tokens
  metrics      B-n, MSJ-n, Rpt-L, D-n, Zipf, Len on token lists
  mauve_score  MAUVE on features of an offline featurizer (MiniLM, or a local GPT-2)
  io           readers: released (<mask> units), plain lines, JSONL, Parquet
  scoring      evaluate_texts(): all metrics as one flat dict with their provenance
  command      what `eric evaluate` does
"""

from eric.evaluate.io import read_generations
from eric.evaluate.scoring import evaluate_texts

__all__ = ["evaluate_texts", "read_generations"]
