"""What the loop measures: loss terms, tokens/s, and codebook usage over a recent window."""

from __future__ import annotations

import math
import time
from collections import Counter, deque

import torch

from eric.model.state_space import usage_perplexity

# Loss terms a model output may carry besides `.loss` (ERIC returns all three; BART none).
LOSS_TERMS = ("lm_loss", "entity_loss", "contrastive_loss", "state_entropy_loss")
# state-space diagnostics ERIC outputs carry (docs/state-space.md), averaged like the losses
DIAGNOSTICS = ("contrastive_chance", "contrastive_entity_chance", "event_cosine", "event_rank")


def step_terms(outputs) -> dict[str, torch.Tensor]:
    """`loss` plus whichever separate terms (`*_loss`) and diagnostics the output has, as detached
    0-dim tensors, still on the device (a training step reads none of them on the host): from
    its `scalar_terms()` (ERIC and the baselines), else by name (a plain transformers output)."""
    if callable(getattr(outputs, "scalar_terms", None)):
        terms = outputs.scalar_terms()
    else:
        names = ("loss", *LOSS_TERMS, *DIAGNOSTICS)
        terms = {n: v.detach() for n in names if (v := getattr(outputs, n, None)) is not None}
    return {k: v for k, v in terms.items() if k == "loss" or k.endswith("_loss") or k in DIAGNOSTICS}


def loss_terms(outputs) -> dict[str, float]:
    """`step_terms` as floats."""
    return {k: float(v) for k, v in step_terms(outputs).items()}


def batch_tokens(batch: dict) -> int:
    """Tokens the step processed: non-pad source tokens + supervised target tokens. Counted with
    numpy on the collated host batch (before it moves to the device: no device read)."""
    total = 0
    if "attention_mask" in batch:
        total += int(_host(batch["attention_mask"]).sum())
    elif "input_ids" in batch:
        total += batch["input_ids"].numel()
    return total + target_tokens(batch)


def target_tokens(batch: dict) -> int:
    """Supervised target tokens: the weight that makes batch means a per-token mean."""
    return int((_host(batch["labels"]) != -100).sum()) if "labels" in batch else 0


def _host(tensor: torch.Tensor):
    return tensor.detach().cpu().numpy()


def batch_state_ids(outputs) -> torch.Tensor | None:
    """Codebook indices the batch used (ERIC outputs carry them; other models do not)."""
    for name in ("state_ids", "state_indices"):
        value = getattr(outputs, name, None)
        if value is not None:
            return value
    return None


class Averager:
    """Mean of each loss term over the steps since the last `pop()`. Values may be floats or
    0-dim tensors: tensors are summed where they are (no host read until `totals()`). A NaN (a
    diagnostic undefined for that batch) is left out of its mean."""

    def __init__(self) -> None:
        self.sums: dict = {}
        self.counts: dict = {}

    def add(self, values: dict, weight: float = 1.0) -> None:
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                defined = ~torch.isnan(value)
                value, counted = torch.where(defined, value * weight, 0.0), defined * weight
            elif math.isnan(value):
                continue
            else:
                value, counted = value * weight, weight
            self.sums[key] = self.sums.get(key, 0.0) + value
            self.counts[key] = self.counts.get(key, 0.0) + counted

    def totals(self) -> tuple[dict[str, float], dict[str, float]]:
        """(sums, counts) as floats."""
        return ({k: float(v) for k, v in self.sums.items()}, {k: float(v) for k, v in self.counts.items()})

    def pop(self) -> dict[str, float]:
        """Each term's mean (terms with no defined value left out), and clear."""
        sums, counts = self.pop_totals()
        return {k: sums[k] / counts[k] for k in sums if counts[k]}

    def pop_totals(self) -> tuple[dict[str, float], dict[str, float]]:
        """`totals()`, and clear."""
        found = self.totals()
        self.sums.clear()
        self.counts.clear()
        return found


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
    usage perplexity (exp entropy of their counts: equally used states it is worth). A step's
    ids stay on the device; they are counted when a figure is asked for (a logged row)."""

    def __init__(self, steps: int = 50) -> None:
        self.window: deque[list[torch.Tensor]] = deque(maxlen=max(1, steps))
        self._current: list[torch.Tensor] = []
        self.seen_any = False

    def add(self, state_ids: torch.Tensor | None) -> None:
        if state_ids is None:
            return
        self.seen_any = True
        self._current.append(state_ids.detach().reshape(-1))

    def end_step(self) -> None:
        if self.seen_any:
            self.window.append(self._current)
        self._current = []

    def _counts(self) -> Counter:
        ids = [t for step in self.window for t in step]
        if not ids:
            return Counter()
        flat = torch.cat([t.to(ids[0].device) for t in ids])
        return Counter(flat[flat >= 0].tolist())

    def distinct(self) -> int | None:
        if not self.seen_any:
            return None
        return len(self._counts())

    def perplexity(self) -> float | None:
        if not self.seen_any:
            return None
        counts = self._counts()
        return usage_perplexity(torch.tensor(list(counts.values()) or [0]))
