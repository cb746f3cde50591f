"""Entity coherence (the paper's "accuracy vs position" figure), on stage-one models.

For every test text and every target unit k that mentions an entity, the first
placeholder of unit k is replaced by another placeholder mentioned in an earlier
unit (drawn with a seed per text and unit); the prefix is left as it is. A case is
right when the model gives the original unit k a higher log-probability than the
perturbed one, given the same prefix. Unit k's log-probability sums its tokens
after its sentence token, up to and including the token that ends it (the next
`<sent>` or `</s>`).

Every unit's entity input p_n is its first placeholder (<none> without one), so the
perturbed unit reads the replacement as its entity. A model that reads p_n is told the
entity and so never pays for choosing it; two scorings make models comparable:
  lm     the unit's log-probability (the paper's test)
  joint  plus the planner's log-probability of the unit's entity (of the swapped-in one in
         the perturbed unit): what the model pays for choosing it; = lm without a planner
  event  the unit's log-probability without the swapped placeholder token, in both
         versions: only what the rest of the unit says about that entity counts
States, for variants that have them:
  predicted  the model's own: unit by unit, e^_n from the prefix (with the states of
             the earlier units injected) quantized to the nearest state; the perturbed
             unit gets the state predicted for the replacement entity
  random     a random state per unit with an entity, the same in both versions
  gold       (asked for: `state_modes(config, gold=True)`) the sentence encoder's state of
             each unit of the true text, read at its first placeholder, the same in both
             versions: what states the text itself chose are worth, the reference beside
             predicted and random
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers.models.bart.modeling_bart import shift_tokens_right

from eric.data.collate import StageOneCollator
from eric.evaluate.figures import line_figure

PREDICTED, RANDOM, GOLD, NO_STATES = "predicted", "random", "gold", "none"
LM, JOINT, EVENT = "lm", "joint", "event"
SCORINGS = (LM, JOINT, EVENT)


@dataclass
class Text:
    """One encoded test text: unit spans in `labels` and the per-unit inputs."""

    id: str
    source: list[int]
    labels: list[int]  # <s> <sent> ... <sent> ... </s>
    spans: list[tuple[int, int]]  # (index of the unit's <sent>, index of the token ending it)
    entities: list[int]  # entity class per unit: 0 = <none>, i+1 = <ei>
    states: list[int] = field(default_factory=list)  # state id per unit, -1 = none


@dataclass(frozen=True)
class Case:
    text: int  # index into the texts
    unit: int  # 0-based unit index (position k = unit + 1)
    position: int  # index in labels of the replaced placeholder
    replacement: int  # token id of the placeholder put there


@dataclass
class CoherenceResult:
    label: str  # e.g. "eric", "eric (random states)"
    correct: dict[int, int] = field(default_factory=dict)  # by position k (1-based unit of the target)
    total: dict[int, int] = field(default_factory=dict)
    outcomes: list[tuple[str, int, bool]] = field(default_factory=list)  # (text id, unit, right) per case

    def add(self, position: int, right: bool, text: str = "") -> None:
        self.total[position] = self.total.get(position, 0) + 1
        self.correct[position] = self.correct.get(position, 0) + int(right)
        self.outcomes.append((text, position - 1, right))

    @property
    def accuracy(self) -> float | None:
        n = sum(self.total.values())
        return sum(self.correct.values()) / n if n else None

    def by_position(self) -> dict[int, dict]:
        return {k: {"accuracy": self.correct[k] / self.total[k], "count": self.total[k]} for k in sorted(self.total)}

    def rows(self) -> list[dict]:
        return [{"model": self.label, "position": k, "accuracy": round(v["accuracy"], 6), "count": v["count"]}
                for k, v in self.by_position().items()]


def state_modes(config, gold: bool = False) -> list[str]:
    """Predicted (, gold) and random states for a variant with states; otherwise none."""
    return ([PREDICTED, *([GOLD] if gold else []), RANDOM]) if config.use_state else [NO_STATES]


def mode_label(variant: str, mode: str) -> str:
    return f"{variant} ({mode} states)" if mode in (RANDOM, GOLD) else variant


class CoherenceScorer:
    """Scores originals and perturbations of test texts with one stage-one model."""

    def __init__(self, model, tokenizer, *, batch_size: int = 16, seed: int = 42, max_source_length: int = 128,
                 max_target_length: int = 512, progress: bool = True, scoring: str = LM):
        if scoring not in SCORINGS:
            raise ValueError(f"unknown coherence scoring {scoring!r} ({', '.join(SCORINGS)})")
        self.scoring = scoring
        self.model = model.eval()
        self.config = model.config
        self.collator = StageOneCollator(tokenizer, max_source_length, max_target_length,
                                         max_entities=self.config.max_entities)
        self.sent = self.collator.ids.sent
        self.entity_class = self.collator.entity_class
        self.entity_token = {cls: token for token, cls in self.entity_class.items()}
        self.batch_size = batch_size
        self.seed = seed
        self.progress = progress

    # -- texts and cases --
    def encode(self, row: dict) -> Text:
        encoded = self.collator.encode(row)  # tokenized and truncated as in training
        labels = encoded.labels
        starts = [i for i, t in enumerate(labels) if t == self.sent]
        spans = list(zip(starts, [*starts[1:], len(labels) - 1]))
        entities = [self._first_entity(labels, s, e)[1] for s, e in spans]
        return Text(str(row.get("id")), encoded.source, labels, spans, entities)

    def _first_entity(self, labels: list[int], start: int, end: int) -> tuple[int, int]:
        """(index, class) of the first placeholder in a unit's words; (-1, 0) if none."""
        for i in range(start + 1, end):
            if labels[i] in self.entity_class:
                return i, self.entity_class[labels[i]]
        return -1, 0

    def cases(self, texts: list[Text]) -> list[Case]:
        found = []
        for t, text in enumerate(texts):
            for n, (start, end) in enumerate(text.spans):
                position, cls = self._first_entity(text.labels, start, end)
                earlier = {tok for tok in text.labels[:start] if tok in self.entity_class}
                candidates = sorted(earlier - {text.labels[position]}) if position >= 0 else []
                if candidates:
                    rng = random.Random(f"{self.seed}:{text.id}:{n}")
                    found.append(Case(t, n, position, rng.choice(candidates)))
        return found

    def perturb(self, text: Text, case: Case) -> Text:
        labels = list(text.labels)
        labels[case.position] = case.replacement
        entities = list(text.entities)
        entities[case.unit] = self.entity_class[case.replacement]
        return replace(text, labels=labels, entities=entities, states=list(text.states))

    # -- model passes --
    # A unit's score and its predicted state depend only on what precedes it (causal
    # decoder, state attention and predictor over earlier positions), so every pass
    # reads a text only up to where it is needed: `cut` labels.
    def _forward(self, texts: list[Text], cuts: list[int] | None = None):
        """Teacher-forced pass; returns the model output (its `logits` left empty: the model's
        `without_lm_head`) and the labels read."""
        cuts = cuts or [len(t.labels) for t in texts]
        units = max(len(t.spans) for t in texts)
        pad = self.config.pad_token_id
        labels = _pad([t.labels[:cut] for t, cut in zip(texts, cuts)], -100)
        batch = {
            "input_ids": _pad([t.source for t in texts], pad),
            # decoder inputs rather than labels: no LM loss to compute
            "decoder_input_ids": shift_tokens_right(labels, pad, self.config.decoder_start_token_id),
        }
        batch["attention_mask"] = (batch["input_ids"] != pad).long()
        if self.config.use_entity:
            batch["entity_ids"] = _pad([t.entities for t in texts], -100, units)
        if self.config.use_state:
            batch["state_ids"] = _pad([t.states for t in texts], -1, units)
        device = self.model.device
        with torch.no_grad(), self.model.without_lm_head():
            return self.model(**{k: v.to(device) for k, v in batch.items()}), labels

    def unit_logprobs(self, texts: list[Text], units: list[int] | None = None) -> list[list[float]]:
        """Log-probability of units given their prefix: every unit of each text, or with
        `units` only unit units[i] of text i (read up to the token that ends it)."""
        cuts = None if units is None else [t.spans[n][1] + 1 for t, n in zip(texts, units)]
        out, labels = self._forward(texts, cuts)
        scores = []
        for b, text in enumerate(texts):
            ns = range(len(text.spans)) if units is None else [units[b]]
            scores.append([self._unit_score(out, b, labels[b], text, n) for n in ns])
        return scores

    def _unit_score(self, out, row: int, labels: torch.Tensor, text: Text, n: int) -> float:
        """Unit n's score under this scorer's `scoring`."""
        start, end = text.spans[n]
        skip = self._first_entity(text.labels, start, end)[0] if self.scoring == EVENT else -1
        score = self._span_logprob(out, row, labels, start, end, skip)
        planner = getattr(out, "entity_logits", None)
        if self.scoring == JOINT and planner is not None and text.entities[n] > 0:
            score += float(torch.log_softmax(planner[row, n].float(), dim=-1)[text.entities[n]])
        return score

    def _span_logprob(self, out, row: int, labels: torch.Tensor, start: int, end: int, skip: int = -1) -> float:
        """Sum of log p(labels[t]) for t in (start, end], t != skip: the unit's words and its end
        token (the model's `row_logits`: its LM head, or a baseline's whole next-token distribution)."""
        with torch.no_grad():
            logits = self.model.row_logits(out, row, slice(start + 1, end + 1)).float()
        rows = torch.log_softmax(logits, dim=-1)
        targets = labels[start + 1 : end + 1].to(rows.device)
        scores = rows.gather(-1, targets[:, None])[:, 0]
        if start < skip <= end:
            scores[skip - start - 1] = 0.0
        return float(scores.sum())

    def predicted_states(self, texts: list[Text]) -> list[list[int]]:
        """The model's own states, unit by unit: pass n fixes unit n (it sees only earlier states)."""
        for text in texts:
            text.states = [-1] * len(text.entities)
        for n in range(max(len(t.spans) for t in texts)):
            todo = [t for t in texts if n < len(t.spans) and t.entities[n] > 0]
            if todo:
                for text, state in zip(todo, self._states_for_unit(todo, [n] * len(todo))):
                    text.states[n] = state
        return [t.states for t in texts]

    def _states_for_unit(self, texts: list[Text], units: list[int]) -> list[int]:
        """The predicted state of unit units[i] of text i, reading up to that unit's <sent>."""
        cuts = [t.spans[n][0] + 2 for t, n in zip(texts, units)]  # the <sent> must reach the decoder input
        out, _ = self._forward(texts, cuts)
        predicted = out.predicted_state_ids.cpu()
        return [int(predicted[b, n]) for b, n in enumerate(units)]

    def gold_states(self, texts: list[Text]) -> None:
        """Each unit's gold state: the sentence encoder's e_n at its first placeholder, quantized."""
        from eric.evaluate.state_analysis import gold_states

        units = max(len(t.spans) for t in texts)
        positions = [[self._first_entity(t.labels, s, e)[0] for s, e in t.spans] for t in texts]
        batch = {"labels": _pad([t.labels for t in texts], -100), "entity_positions": _pad(positions, -1, units),
                 "entity_ids": _pad([t.entities for t in texts], -100, units)}
        ids = gold_states(self.model, {k: v.to(self.model.device) for k, v in batch.items()})[0].cpu()
        for b, text in enumerate(texts):
            text.states = ids[b, : len(text.entities)].tolist()

    def random_states(self, text: Text) -> list[int]:
        rng = random.Random(f"{self.seed}:random-states:{text.id}")
        return [rng.randrange(self.config.num_states) if cls > 0 else -1 for cls in text.entities]

    # -- the experiment --
    def run(self, rows: list[dict], mode: str, label: str) -> CoherenceResult:
        texts = [self.encode(row) for row in rows]
        cases = sorted(self.cases(texts), key=lambda c: texts[c.text].spans[c.unit][1])  # less padding
        self._set_states(texts, mode)
        originals: list[list[float]] = []
        for batch in self._batches(texts, f"{label}: originals"):
            originals.extend(self.unit_logprobs(batch))
        result = CoherenceResult(label)
        for chunk in self._batches(cases, f"{label}: perturbed"):
            perturbed = [self.perturb(texts[c.text], c) for c in chunk]
            units = [c.unit for c in chunk]
            if mode == PREDICTED:  # the replacement entity's own predicted state
                for text, case, state in zip(perturbed, chunk, self._states_for_unit(perturbed, units)):
                    text.states[case.unit] = state
            for case, (score,) in zip(chunk, self.unit_logprobs(perturbed, units)):
                result.add(case.unit + 1, originals[case.text][case.unit] > score, texts[case.text].id)
        return result

    def _set_states(self, texts: list[Text], mode: str) -> None:
        if mode == PREDICTED:
            for batch in self._batches(texts, "predicting states"):
                self.predicted_states(batch)
        elif mode == GOLD:
            for batch in self._batches(texts, "gold states"):
                self.gold_states(batch)
        elif mode == RANDOM:
            for text in texts:
                text.states = self.random_states(text)

    def _batches(self, items: list, desc: str):
        starts = range(0, len(items), self.batch_size)
        for start in tqdm(starts, desc=desc, disable=not self.progress, unit="batch", leave=False):
            yield items[start : start + self.batch_size]


def _pad(rows: list[list[int]], value: int, width: int | None = None) -> torch.Tensor:
    width = max(width or 0, max((len(r) for r in rows), default=0), 1)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def entity_coherence(model, tokenizer, rows: list[dict], variant: str, **scorer_options) -> list[CoherenceResult]:
    """Accuracy by position for a variant: with predicted and random states if it has states."""
    scorer = CoherenceScorer(model, tokenizer, **scorer_options)
    return [scorer.run(rows, mode, mode_label(variant, mode)) for mode in state_modes(model.config)]


def write_rows(results: list[CoherenceResult], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["model", "position", "accuracy", "count"])
        writer.writeheader()
        for result in results:
            writer.writerows(result.rows())
    return path


def read_rows(path: str | Path) -> list[dict]:
    with open(path, newline="") as handle:
        return [{"model": r["model"], "position": int(r["position"]), "accuracy": float(r["accuracy"]),
                 "count": int(r["count"])} for r in csv.DictReader(handle)]


def plot_coherence(rows: list[dict], path: str | Path, title: str = "Entity coherence") -> Path:
    """Accuracy vs position of the perturbed unit, one line per model (rows as `write_rows`),
    beside chance (50%)."""
    series = []
    for model in dict.fromkeys(r["model"] for r in rows):
        points = sorted((r["position"], r["accuracy"]) for r in rows if r["model"] == model)
        series.append((model, [p for p, _ in points], [100 * a for _, a in points]))
    return line_figure(path, series, title, "position of the perturbed unit", "accuracy (%)", chance=50, marker="o")
