"""Does a state id tell something about a unit? A majority-vote probe with a bootstrap interval.

For every unit with a planned entity, the model gives a predicted state (the predictor's
e^_n quantized, from the prefix only: what generation uses) and a gold state (the sentence
encoder's e_n quantized, from the unit itself). The probe learns, on training units, the
most frequent label (e.g. EntityWorld's event kind) per state id, and predicts it on held-out
units (an unseen state gets the overall majority label). Its accuracy is compared with the
majority class; the 95% interval of the difference is a bootstrap over held-out texts, so
units of one text move together.

    pairs = unit_state_pairs(model, collator, rows, labels=lambda row, n: row["world_events"][n])
    result = majority_probe(train_pairs, test_pairs)

Any model, states or not, can be probed the same way through its decoder: the last hidden
state at each unit's sentence token (what it has read before writing the unit; a model with
states reads its own predicted states there, not the unit's gold one) is quantized
into as many clusters as ERIC has states (k-means fitted on the training units), and the
cluster id is probed like a state id (`hidden_unit_pairs`, `quantize_hidden`): a probe of
equal capacity for BART and ERIC. `linear_probe` reads the vectors themselves (a multinomial
logistic regression on standardized vectors): what any linear read-out can find there; of
ERIC's own vectors (`unit_state_vectors`): the continuous e^_n, its quantized state and the
gold e_n.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, replace
from typing import Callable, Iterable

import numpy as np
import torch


@dataclass(frozen=True)
class UnitState:
    text: int  # index of the row
    unit: int  # 0-based target unit
    predicted: int  # predicted state id
    gold: int  # gold state id
    label: str


@dataclass
class ProbeResult:
    accuracy: float
    majority: float  # accuracy of always answering the training split's majority label
    gain: float  # accuracy - majority
    gain_low: float  # 95% bootstrap interval of the gain (over texts)
    gain_high: float
    units: int
    texts: int
    states_seen: int  # distinct state ids among the training units

    def to_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _on(model, batch: dict) -> dict:
    """The collator's batch on the model's device (the probes run wherever the model is)."""
    return {k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


# the vectors `unit_state_vectors` gives per unit, for `linear_probe`
VECTORS = ("predicted_vector", "predicted_state_vector", "gold_vector")


@torch.no_grad()
def read_units(model, collator, rows: list[dict], readers: dict, batch_size: int = 16) -> dict:
    """One forward per chunk of `rows` (the collator's seeded draw), shown to every reader
    (`add(start, chunk, batch, output)`); name -> its `result()`. The probes of one split
    share this pass instead of running the model once each.

    A model with states is run as the training loop runs it (gold s_n injected: the gold and
    predicted ids StateReader reads). A reader of the decoder (`reads_decoder`) is shown a
    second pass instead, with every unit's predicted state injected: with the gold one, the
    hidden state at unit n's sentence token has read s_n, the sentence encoder's reading of
    unit n itself, and a probe there would find the unit's own event. No reader needs the
    next-token distribution: the LM head is skipped (the model's `without_lm_head`)."""
    model.eval()
    own_states = getattr(model.config, "use_state", False) and any(
        getattr(r, "reads_decoder", False) for r in readers.values())
    with model.without_lm_head():
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            batch = collator(chunk)
            on = _on(model, batch)
            output = model(**on)
            decoder = model(**on, state_ids=output.predicted_state_ids) if own_states else output
            for reader in readers.values():
                reader.add(start, chunk, batch, decoder if getattr(reader, "reads_decoder", False) else output)
    return {name: reader.result() for name, reader in readers.items()}


class StateReader:
    """Predicted and gold state of every unit with a planned entity and, in the same order, its
    vectors (VECTORS): the predictor's continuous e^_n, the state it is quantized to (what
    generation injects) and the sentence encoder's e_n (from the unit itself: the reference a
    prefix can at best approach)."""

    def __init__(self, model, label: Callable[[dict, int], str]):
        self.model, self.label = model, label
        self.codebook = model.state_space.vectors().float()
        self.pairs: list[UnitState] = []
        self.found: dict[str, list[torch.Tensor]] = {name: [] for name in VECTORS}

    def add(self, start: int, chunk: list[dict], batch: dict, output) -> None:
        from eric.evaluate.state_analysis import gold_states

        predicted, gold = output.predicted_state_ids, output.state_ids
        units = gold >= 0
        for b, n in units.nonzero().tolist():
            self.pairs.append(UnitState(start + b, n, int(predicted[b, n]), int(gold[b, n]), self.label(chunk[b], n)))
        self.found["predicted_vector"].append(output.predicted_events[units].float().cpu())
        self.found["predicted_state_vector"].append(self.codebook[predicted[units]].cpu())
        self.found["gold_vector"].append(gold_states(self.model, _on(self.model, batch))[1][units].float().cpu())

    def result(self) -> tuple[list[UnitState], dict[str, torch.Tensor]]:
        return self.pairs, {name: torch.cat(parts) if parts else torch.zeros(0) for name, parts in self.found.items()}


class HiddenReader:
    """Every unit with a label: its decoder's last hidden state where it has read the unit's
    sentence token (the position that writes the unit's first word), or with `entity`
    (row, unit -> a token id) where it has read that token's first occurrence in the unit
    (a unit without it is skipped), and the unit's label. The states' ids are left -1
    (filled by `quantize_hidden`). Of a model with states it reads the pass with predicted
    states (`read_units`): what the decoder knows from the prefix and the planned entity."""

    reads_decoder = True

    def __init__(self, sent: int, label: Callable[[dict, int], str], entity: Callable[[dict, int], int] | None = None):
        self.sent, self.label, self.entity = sent, label, entity
        self.pairs: list[UnitState] = []
        self.vectors: list[torch.Tensor] = []

    def add(self, start: int, chunk: list[dict], batch: dict, output) -> None:
        hidden = output.decoder_last_hidden_state.float().cpu()
        for b, row in enumerate(chunk):
            labels = batch["labels"][b].tolist()
            starts = [i for i, token in enumerate(labels) if token == self.sent]
            for n, (begin, end) in enumerate(zip(starts, [*starts[1:], len(labels)])):
                read = begin if self.entity is None else next(
                    (i for i in range(begin + 1, end) if labels[i] == self.entity(row, n)), None)
                position = None if read is None else read + 1  # decoder input = labels shifted right
                if position is not None and position < hidden.shape[1] and (name := self.label(row, n)) is not None:
                    self.pairs.append(UnitState(start + b, n, -1, -1, name))
                    self.vectors.append(hidden[b, position])

    def result(self) -> tuple[list[UnitState], torch.Tensor]:
        return self.pairs, torch.stack(self.vectors) if self.vectors else torch.zeros(0)


class CosineReader:
    """How e^_n sits among the states, over the units with a gold state: mean cosine to its own
    unit's gold state, to the other units' gold states of the batch, and to its nearest state."""

    def __init__(self, model):
        self.vectors = model.state_space.vectors().float()
        self.own = self.others = self.nearest = self.units = 0.0

    def add(self, start: int, chunk: list[dict], batch: dict, output) -> None:
        target = output.state_ids >= 0
        predicted, gold = output.predicted_events[target].float(), self.vectors[output.state_ids[target]]
        m = predicted.shape[0]
        if m < 2:
            return
        cross = predicted @ gold.t()
        self.own += float(cross.diagonal().sum())
        self.others += float((cross.sum() - cross.diagonal().sum()) / (m - 1))
        self.nearest += float((predicted @ self.vectors.t()).max(-1).values.sum())
        self.units += m

    def result(self) -> dict:
        return {"own_gold_state": round(self.own / self.units, 4),
                "other_gold_states": round(self.others / self.units, 4),
                "nearest_state": round(self.nearest / self.units, 4), "units": int(self.units)}


def unit_state_pairs(model, collator, rows: list[dict], label: Callable[[dict, int], str],
                     batch_size: int = 16) -> list[UnitState]:
    """Predicted and gold state of every unit with a planned entity (the collator's seeded draw)."""
    return unit_state_vectors(model, collator, rows, label, batch_size)[0]


def unit_state_vectors(model, collator, rows: list[dict], label: Callable[[dict, int], str],
                       batch_size: int = 16) -> tuple[list[UnitState], dict[str, torch.Tensor]]:
    """StateReader's pairs and vectors over `rows`."""
    return read_units(model, collator, rows, {"states": StateReader(model, label)}, batch_size)["states"]


def hidden_unit_pairs(model, collator, rows: list[dict], label: Callable[[dict, int], str],
                      batch_size: int = 16, entity: Callable[[dict, int], int] | None = None,
                      ) -> tuple[list[UnitState], torch.Tensor]:
    """HiddenReader's pairs and vectors over `rows`."""
    reader = HiddenReader(collator.ids.sent, label, entity)
    return read_units(model, collator, rows, {"hidden": reader}, batch_size)["hidden"]


def quantize_hidden(train: tuple[list[UnitState], torch.Tensor], test: tuple[list[UnitState], torch.Tensor],
                    clusters: int, seed: int = 0) -> tuple[list[UnitState], list[UnitState]]:
    """The pairs with `predicted` = the k-means cluster (fitted on the training vectors) of each vector."""
    from sklearn.cluster import KMeans

    (train_pairs, train_x), (test_pairs, test_x) = train, test
    kmeans = KMeans(n_clusters=min(clusters, len(train_pairs)), n_init=1, random_state=seed).fit(train_x.numpy())
    label = lambda pairs, x: [replace(u, predicted=int(c)) for u, c in zip(pairs, kmeans.predict(x.numpy()))]  # noqa: E731
    return label(train_pairs, train_x), label(test_pairs, test_x)


def majority_probe(train: Iterable[UnitState], test: list[UnitState], which: str = "predicted",
                   resamples: int = 1000, seed: int = 0) -> ProbeResult:
    """Fit state id -> most frequent label on `train`, score on `test` against the majority class."""
    by_state: dict[int, Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for u in train:
        by_state[getattr(u, which)][u.label] += 1
        overall[u.label] += 1
    if not overall or not test:
        raise ValueError("the probe needs training and test units")
    majority = overall.most_common(1)[0][0]
    guess = {state: counts.most_common(1)[0][0] for state, counts in by_state.items()}
    guesses = [guess.get(getattr(u, which), majority) for u in test]
    return _scored(test, guesses, majority, len(by_state), resamples, seed)


def linear_probe(train: tuple[list[UnitState], torch.Tensor], test: tuple[list[UnitState], torch.Tensor],
                 resamples: int = 1000, seed: int = 0) -> ProbeResult:
    """A logistic regression from the vectors to the labels (fitted on `train`), scored like
    `majority_probe` against the training split's majority label."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    (train_pairs, train_x), (test_pairs, test_x) = train, test
    if not train_pairs or not test_pairs:
        raise ValueError("the probe needs training and test units")
    labels = [u.label for u in train_pairs]
    majority = Counter(labels).most_common(1)[0][0]
    if len(set(labels)) < 2:
        return _scored(test_pairs, [majority] * len(test_pairs), majority, 0, resamples, seed)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(train_x.numpy(), labels)
    return _scored(test_pairs, list(model.predict(test_x.numpy())), majority, 0, resamples, seed)


def _scored(test: list[UnitState], guesses: list[str], majority: str, states_seen: int, resamples: int,
            seed: int) -> ProbeResult:
    """Accuracy of `guesses` against always answering `majority`, with the bootstrap interval of
    the gain over texts."""
    per_text: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])  # text -> units, probe right, majority right
    for u, guess in zip(test, guesses):
        counts = per_text[u.text]
        counts[0] += 1
        counts[1] += guess == u.label
        counts[2] += majority == u.label
    units, right, base_right = np.array(list(per_text.values()), dtype=np.int64).reshape(-1, 3).T
    accuracy, base = _rates(units, right, base_right)
    gains = np.sort(_resampled_gains(units, right, base_right, resamples, seed))
    low, high = gains[int(0.025 * resamples)], gains[int(0.975 * resamples) - 1]
    return ProbeResult(accuracy, base, accuracy - base, float(low), float(high), len(test), len(per_text), states_seen)


def _resampled_gains(units: np.ndarray, right: np.ndarray, base_right: np.ndarray, resamples: int,
                     seed: int) -> np.ndarray:
    """The gain over `resamples` draws of the texts with replacement. The draws are
    `random.Random(seed).choices` over the texts, one resample after another (a text index
    is what choices picks), so the interval is the one a loop over resamples gives; the
    sums are done in numpy, integer counts, divided as `_rates` divides."""
    rng = random.Random(seed)
    picks = np.array([rng.choices(range(len(units)), k=len(units)) for _ in range(resamples)], dtype=np.int64)
    n = units[picks].sum(axis=1)
    return right[picks].sum(axis=1) / n - base_right[picks].sum(axis=1) / n


def prediction_cosines(model, collator, rows: list[dict], batch_size: int = 16) -> dict:
    """CosineReader over `rows`."""
    return read_units(model, collator, rows, {"cosines": CosineReader(model)}, batch_size)["cosines"]


def agreement(pairs: list[UnitState]) -> float:
    """Share of units whose predicted state is their gold state (the predictor's exact hit rate)."""
    return sum(u.predicted == u.gold for u in pairs) / max(len(pairs), 1)


def _rates(units: np.ndarray, right: np.ndarray, base_right: np.ndarray) -> tuple[float, float]:
    n = int(units.sum())
    return int(right.sum()) / n, int(base_right.sum()) / n
