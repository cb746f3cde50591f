"""What the loop measures: loss terms, tokens/s, and codebook usage over a recent window."""

from __future__ import annotations

import time
from collections import Counter, deque

import torch

from eric.model.state_space import usage_perplexity

# Loss terms a model output may carry besides `.loss` (ERIC returns all three; BART none).
LOSS_TERMS = ("lm_loss", "entity_loss", "contrastive_loss", "state_entropy_loss")
# state-space diagnostics ERIC outputs carry (docs/state-space.md), averaged like the losses
DIAGNOSTICS = ("contrastive_chance", "event_cosine", "event_rank")


def loss_terms(outputs) -> dict[str, float]:
    """`loss` plus whichever separate terms (`*_loss`) and diagnostics the output has, as floats:
    from its `loss_terms()` (ERIC and the baselines), else by name (a plain transformers output)."""
    if callable(getattr(outputs, "loss_terms", None)):
        terms = outputs.loss_terms()
    else:
        names = ("loss", *LOSS_TERMS, *DIAGNOSTICS)
        terms = {n: float(v.detach()) for n in names if (v := getattr(outputs, n, None)) is not None}
    return {k: v for k, v in terms.items() if k == "loss" or k.endswith("_loss") or k in DIAGNOSTICS}


def batch_tokens(batch: dict) -> int:
    """Tokens the step processed: non-pad source tokens + supervised target tokens."""
    total = 0
    if "attention_mask" in batch:
        total += int(batch["attention_mask"].sum())
    elif "input_ids" in batch:
        total += batch["input_ids"].numel()
    if "labels" in batch:
        total += int((batch["labels"] != -100).sum())
    return total


def target_tokens(batch: dict) -> int:
    """Supervised target tokens: the weight that makes batch means a per-token mean."""
    return int((batch["labels"] != -100).sum()) if "labels" in batch else 0


def batch_state_ids(outputs) -> torch.Tensor | None:
    """Codebook indices the batch used (ERIC outputs carry them; other models do not)."""
    for name in ("state_ids", "state_indices"):
        value = getattr(outputs, name, None)
        if value is not None:
            return value
    return None


class Averager:
    """Mean of each loss term over the steps since the last `pop()`."""

    def __init__(self) -> None:
        self.sums: Counter = Counter()
        self.counts: Counter = Counter()

    def add(self, values: dict[str, float], weight: float = 1.0) -> None:
        for key, value in values.items():
            self.sums[key] += value * weight
            self.counts[key] += weight

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.counts[k] for k in self.sums if self.counts[k]}

    def pop(self) -> dict[str, float]:
        means = self.means()
        self.sums.clear()
        self.counts.clear()
        return means


class Throughput:
    """Tokens per second of training time (evaluation and checkpoints excluded)."""

    def __init__(self) -> None:
        self.tokens = 0
        self.seconds = 0.0
        self.window_tokens = 0
        self.window_seconds = 0.0
        self._start: float | None = None

    def start(self) -> None:
        self._start = time.perf_counter()

    def stop(self, tokens: int) -> float:
        elapsed = time.perf_counter() - self._start
        self.tokens += tokens
        self.seconds += elapsed
        self.window_tokens += tokens
        self.window_seconds += elapsed
        return elapsed

    @property
    def overall(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def pop_window(self) -> float:
        rate = self.window_tokens / self.window_seconds if self.window_seconds else 0.0
        self.window_tokens, self.window_seconds = 0, 0.0
        return rate


class StateUsageWindow:
    """Codebook states used over the last `steps` optimizer steps: how many distinct, and the
    usage perplexity (exp entropy of their counts: equally used states it is worth)."""

    def __init__(self, steps: int = 50) -> None:
        self.window: deque[Counter] = deque(maxlen=max(1, steps))
        self._current: Counter = Counter()
        self.seen_any = False

    def add(self, state_ids: torch.Tensor | None) -> None:
        if state_ids is None:
            return
        self.seen_any = True
        ids = state_ids.detach().reshape(-1)
        self._current.update(ids[ids >= 0].tolist())

    def end_step(self) -> None:
        if self.seen_any:
            self.window.append(self._current)
        self._current = Counter()

    def _counts(self) -> Counter:
        total: Counter = Counter()
        for step in self.window:
            total.update(step)
        return total

    def distinct(self) -> int | None:
        if not self.seen_any:
            return None
        return len(self._counts())

    def perplexity(self) -> float | None:
        if not self.seen_any:
            return None
        counts = self._counts()
        return usage_perplexity(torch.tensor(list(counts.values()) or [0]))
