"""The training loop, one for every stage and variant: explicit, no framework magic.

    trainer = Trainer(model, LoopSettings(...), train_set=..., collate_fn=...,
                      val_set=..., checkpoint_dir=...)
    result = trainer.fit()          # resumes from the latest checkpoint if there is one
    trainer.save_pretrained(out_dir, tokenizer)

Every optimizer step reads the step batch `DataOrder` assigns to it, so a resumed run
continues at the same step and data position. Validation runs at the start, every
`eval_every` steps (if set), at each epoch end and at the end; a checkpoint is written
every `checkpoint_every` steps, at each epoch end and at the end.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, Protocol, Sequence

import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from eric.config import LoopSettings
from eric.train.checkpoint import (
    CheckpointManager,
    full_precision_state_dict,
    save_pretrained_atomic,
)
from eric.train.data_order import DataOrder, eval_batches
from eric.train.ds_config import build_ds_config
from eric.train.engine import compile_in_place, initialize, symbolic_shapes
from eric.train.errors import TrainError
from eric.train.meters import (
    Averager,
    StateUsageWindow,
    Throughput,
    batch_state_ids,
    batch_tokens,
    step_terms,
    target_tokens,
)
from eric.train.runtime import avoid_per_shape_attention_plans, prepare_environment


class Tracker(Protocol):
    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...


class LoopHook(Protocol):
    """A model's training-time care, called by the loop around its own work (ERIC's codebook:
    eric/train/codebook.py `CodebookHook`). Each method may do nothing."""

    def attach(self, trainer: "Trainer") -> None: ...  # once the engine exists
    def on_start(self, trainer: "Trainer") -> None: ...  # a fresh run, before the first validation
    def after_step(self, trainer: "Trainer") -> dict[str, float]: ...  # metrics averaged into the log
    def log_columns(self, trainer: "Trainer") -> dict[str, float]: ...  # extra columns of a logged row


@dataclass
class TrainerState:
    """What a checkpoint records besides DeepSpeed's own state (JSON)."""

    step: int = 0
    tokens: int = 0
    train_seconds: float = 0.0
    history: list[dict] = field(default_factory=list)  # train rows every log_every steps
    val_history: list[dict] = field(default_factory=list)
    resumed_from: list[int] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # caller's (e.g. the MLflow run id)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainerState":
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass
class TrainResult:
    steps: int
    epochs: float
    tokens: int
    train_seconds: float
    tokens_per_s: float
    final_train_loss: float | None
    initial_val_loss: float | None
    final_val_loss: float | None
    states_used: int | None
    resumed_from: list[int]
    history: list[dict]
    val_history: list[dict]

    def summary(self) -> dict:
        """The small JSON a DVC metrics file holds (no curves)."""
        skip = {"history", "val_history"}
        return {k: v for k, v in asdict(self).items() if k not in skip}


def _to_device(batch: dict, device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _reduce(values: dict[str, float], any_keys: bool = False) -> dict[str, float]:
    """Sum a dict of floats over ranks; identity on one process. With `any_keys`, ranks
    may hold different keys (a rank without validation batches holds none)."""
    if not _distributed():
        return values
    keys = sorted(values)
    if any_keys:
        gathered: list = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, keys)
        keys = sorted(set().union(*gathered))
    tensor = torch.tensor([values.get(k, 0.0) for k in keys], dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return dict(zip(keys, tensor.tolist()))


def _pooled_means(averager: Averager) -> dict[str, float]:
    """Each term's mean over every rank's steps (and clears `averager`). Sums and counts are
    pooled, not each rank's means: a rank may hold no defined value of a term (a NaN
    diagnostic, a rank without validation batches), so ranks may hold different keys."""
    sum_of, count_of = averager.pop_totals()
    totals = _reduce({**{f"sum_{k}": v for k, v in sum_of.items()},
                      **{f"n_{k}": v for k, v in count_of.items()}}, any_keys=True)
    return {k[4:]: totals[k] / totals[f"n_{k[4:]}"] for k in totals
            if k.startswith("sum_") and totals[f"n_{k[4:]}"]}


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        settings: LoopSettings,
        *,
        train_set: Sequence,
        collate_fn: Callable[[list], dict],
        checkpoint_dir: str | Path,
        val_set: Sequence | None = None,
        seed: int = 42,
        fingerprint: str = "",
        train_lengths: Sequence[int] | None = None,
        val_lengths: Sequence[int] | None = None,
        tracker: Tracker | None = None,
        on_step_end: Callable[["Trainer"], None] | None = None,
        hooks: Sequence[LoopHook] = (),
        snapshot_dir: str | Path | None = None,
        tokenizer=None,
    ):
        self.rank = prepare_environment()
        avoid_per_shape_attention_plans()
        self.settings, self.seed = settings, seed
        self.train_set, self.val_set, self.collate_fn = train_set, val_set, collate_fn
        self.tracker, self.on_step_end = tracker, on_step_end
        self.snapshot_dir = Path(snapshot_dir) if snapshot_dir is not None else None
        self.tokenizer = tokenizer  # saved with each snapshot: a snapshot loads like the final model
        self.order = DataOrder(
            n_examples=len(train_set), micro_batch_size=settings.micro_batch_size,
            grad_accum_steps=settings.grad_accum_steps, world_size=self.rank.world_size,
            rank=self.rank.rank, seed=seed,
            lengths=train_lengths if settings.length_grouping else None,
        )
        if self.order.steps_per_epoch == 0:
            raise TrainError(
                f"{len(train_set)} training examples do not fill one step batch of "
                f"{self.order.step_batch_size} (micro batch x accumulation x ranks)"
            )
        self.total_steps = settings.max_steps or settings.epochs * self.order.steps_per_epoch
        self.val_batches = (
            eval_batches(len(val_set), settings.micro_batch_size, self.rank.rank,
                         self.rank.world_size, val_lengths)
            if val_set is not None and len(val_set) else []
        )
        self.ds_config = build_ds_config(
            settings.deepspeed_config, micro_batch_size=settings.micro_batch_size,
            grad_accum_steps=settings.grad_accum_steps, world_size=self.rank.world_size,
            max_grad_norm=settings.max_grad_norm, precision=settings.precision,
        )
        self.engine = initialize(
            model, self.ds_config, lr=settings.lr, weight_decay=settings.weight_decay,
            total_steps=self.total_steps, warmup_steps=settings.warmup_steps, fused=settings.fused_optimizer,
        )
        if settings.compile:
            compile_in_place(self.engine.module, settings.compile_backend)
        self.checkpoints = CheckpointManager(
            checkpoint_dir, self.rank, settings.keep_checkpoints, fingerprint
        )
        self.state = TrainerState()
        self.losses = Averager()
        self.throughput = Throughput()
        self.usage = StateUsageWindow(settings.usage_window)
        self._last_lr = settings.lr
        self.hooks = list(hooks)
        for hook in self.hooks:
            hook.attach(self)

    # ---- public ----------------------------------------------------------------------
    @property
    def steps_per_epoch(self) -> int:
        return self.order.steps_per_epoch

    def fit(self, extra_state: dict | None = None) -> TrainResult:
        """Train to `total_steps`, resuming from the latest matching checkpoint."""
        self._resume_or_start(extra_state or {})
        bar = tqdm(total=self.total_steps, initial=self.state.step, desc="train", unit="step",
                   disable=not (self.settings.progress and self.rank.is_main), mininterval=1.0,
                   dynamic_ncols=True)
        while self.state.step < self.total_steps:
            epoch, position = divmod(self.state.step, self.steps_per_epoch)
            self._set_collate_epoch(epoch)
            for _, micro_batches in self.order.iter_steps(epoch, position):
                self._train_step(micro_batches)
                bar.update(1)
                self._after_step()
                if self._logs_row(self.state.step):
                    bar.set_postfix(self._postfix(), refresh=False)
                if self.state.step >= self.total_steps:
                    break
        bar.close()
        return self.result()

    def save_pretrained(self, out_dir: str | Path, tokenizer=None) -> Path:
        """Final weights (fp32 masters, safetensors) + tokenizer, in HF format."""
        module = self.engine.module
        state_dict = full_precision_state_dict(module)
        return save_pretrained_atomic(module, out_dir, self.rank, tokenizer, state_dict)

    def result(self) -> TrainResult:
        vals = [row["val_loss"] for row in self.state.val_history]
        return TrainResult(
            steps=self.state.step,
            epochs=round(self.state.step / self.steps_per_epoch, 3),
            tokens=self.state.tokens,
            train_seconds=round(self.state.train_seconds, 2),
            tokens_per_s=round(self.state.tokens / self.state.train_seconds, 1)
            if self.state.train_seconds else 0.0,
            final_train_loss=self.state.history[-1]["loss"] if self.state.history else None,
            initial_val_loss=vals[0] if vals else None,
            final_val_loss=vals[-1] if vals else None,
            states_used=self.usage.distinct(),
            resumed_from=list(self.state.resumed_from),
            history=list(self.state.history),
            val_history=list(self.state.val_history),
        )

    # ---- steps -----------------------------------------------------------------------
    def _resume_or_start(self, extra_state: dict) -> None:
        self.checkpoints.prepare()
        saved = self.checkpoints.load(self.engine)
        if saved is not None:
            self.state = TrainerState.from_dict(saved)
            self.state.resumed_from.append(self.state.step)
            self.state.extra.update(extra_state)
            if self.rank.is_main:
                epoch, position = divmod(self.state.step, self.steps_per_epoch)
                tqdm.write(f"resuming at step {self.state.step} (epoch {epoch}, "
                           f"step batch {position}) from {self.checkpoints.root}")
            return
        self.state = TrainerState(extra=dict(extra_state))
        torch.manual_seed(self.seed + self.rank.rank)  # dropout stream per rank
        for hook in self.hooks:
            hook.on_start(self)
        if self.settings.eval_at_start:
            self._validate()

    def _train_step(self, micro_batches: list[list[int]]) -> None:
        self.engine.train()
        logged = self._logs_row(self.state.step + 1)
        lr = self.engine.get_lr()[0]
        self.throughput.start()
        tokens = 0
        for indices in micro_batches:  # no host read of a device value in here (tests/train/test_syncs.py)
            host_batch = self._collate(self.train_set, indices)
            tokens += batch_tokens(host_batch)
            outputs = self.engine(**self._on_device(host_batch))
            self._finish_output(outputs, logged)
            self.engine.backward(outputs.loss)
            self.engine.step()
            self.losses.add(step_terms(outputs))
            self.usage.add(batch_state_ids(outputs))
        tokens = int(_reduce({"tokens": tokens})["tokens"])  # all ranks' tokens
        self.state.train_seconds += self.throughput.stop(tokens)
        self.usage.end_step()
        for hook in self.hooks:
            if metrics := hook.after_step(self):
                self.losses.add(metrics)
        self.state.step += 1
        self.state.tokens += tokens
        self._last_lr = lr

    def first_step_batches(self):
        """The micro batches of the first epoch's steps, in order (a hook's warm-up data)."""
        for _, micro_batches in self.order.iter_steps(0, 0):
            for indices in micro_batches:
                yield self._batch(self.train_set, indices)

    def _after_step(self) -> None:
        step, s = self.state.step, self.settings
        epoch_end = step % self.steps_per_epoch == 0
        done = step >= self.total_steps
        if self._logs_row(step):
            self._log_train()
        if self.val_batches and (epoch_end or done or (s.eval_every and step % s.eval_every == 0)):
            self._validate()
        if step % s.checkpoint_every == 0 or epoch_end or done:
            self._checkpoint()
        if s.snapshot_every and self.snapshot_dir is not None and (step % s.snapshot_every == 0 or done):
            self.save_pretrained(self.snapshot_dir / f"step-{step:06d}", self.tokenizer)
        if self.on_step_end is not None:
            self.on_step_end(self)

    def _set_collate_epoch(self, epoch: int) -> None:
        """A collator that draws per epoch (ERIC's entity choice) redraws deterministically."""
        if hasattr(self.collate_fn, "set_epoch"):
            self.collate_fn.set_epoch(epoch)

    def _logs_row(self, step: int) -> bool:
        """Whether the loop logs a training row after optimizer step `step` (1-based)."""
        return step % self.settings.log_every == 0 or step >= self.total_steps

    def _finish_output(self, outputs, logged: bool) -> None:
        """The no-grad work a model leaves outside its (compiled) forward, where it has some (ERIC:
        the states used, the state-space diagnostics, and for a logged row the effective rank
        of the e_n, a host sync on CUDA)."""
        if hasattr(self.engine.module, "finish_output"):
            self.engine.module.finish_output(outputs, logged)

    def _on_device(self, host_batch: dict) -> dict:
        batch = _to_device(host_batch, self.engine.device)
        return symbolic_shapes(batch) if self.settings.compile else batch  # one compile for every shape

    def _collate(self, dataset: Sequence, indices: list[int]) -> dict:
        return self.collate_fn([dataset[i] for i in indices])

    def _batch(self, dataset: Sequence, indices: list[int]) -> dict:
        return self._on_device(self._collate(dataset, indices))

    # ---- logging, validation, checkpoints ---------------------------------------------
    def _postfix(self) -> dict:
        """The progress bar's figures: those of the last logged row (read on the host only then)."""
        row = self.state.history[-1]
        return {"loss": f"{row.get('loss', float('nan')):.3f}", "tok/s": f"{row['tokens_per_s']:,.0f}"}

    def _log_train(self) -> None:
        means = _pooled_means(self.losses)
        row = {"step": self.state.step, "epoch": round(self.state.step / self.steps_per_epoch, 4),
               **{k: round(v, 5) for k, v in means.items()},
               "lr": self._last_lr,
               "tokens_per_s": round(self.throughput.pop_window(), 1)}
        if self.usage.distinct() is not None:
            row["states_used"] = self.usage.distinct()
            row["usage_perplexity"] = round(self.usage.perplexity(), 2)
        for hook in self.hooks:
            row.update(hook.log_columns(self))
        self.state.history.append(row)
        self._track({f"train_{k}" if k in means else k: v for k, v in row.items()
                     if k not in ("step",)})

    @torch.no_grad()
    def _validate(self) -> None:
        self.engine.eval()
        self._set_collate_epoch(0)  # the same draws at every validation: comparable losses
        sums = Averager()
        for indices in self.val_batches:
            batch = self._batch(self.val_set, indices)
            outputs = self.engine(**batch)
            self._finish_output(outputs, logged=True)
            weight = target_tokens(batch) or len(indices)
            sums.add(step_terms(outputs), weight=weight)
            if (swapped := next_rows_input(batch)) is not None:
                other = self.engine(**(symbolic_shapes(swapped) if self.settings.compile else swapped))
                sums.add(input_gap(outputs, other), weight=weight)
        self.engine.train()
        self._set_collate_epoch(self.state.step // self.steps_per_epoch)
        means = _pooled_means(sums)
        row = {"step": self.state.step, "epoch": round(self.state.step / self.steps_per_epoch, 4),
               **{f"val_{k}": round(v, 5) for k, v in means.items()}}
        self.state.val_history.append(row)
        self._track({k: v for k, v in row.items() if k != "step"})
        if self.rank.is_main:
            tqdm.write(f"step {row['step']}: val loss {row.get('val_loss', math.nan):.4f}")

    def _track(self, metrics: dict) -> None:
        if self.tracker is not None and self.rank.is_main:
            self.tracker.log_metrics(metrics, step=self.state.step)

    def _checkpoint(self) -> None:
        self.checkpoints.save(self.engine, self.state.step, asdict(self.state))


def next_rows_input(batch: dict) -> dict | None:
    """The batch with every row given the next row's input (its encoder side, mask with it);
    None for a batch of one row or without an encoder input."""
    if batch.get("input_ids") is None or batch["input_ids"].shape[0] < 2:
        return None
    swapped = dict(batch, input_ids=batch["input_ids"].roll(1, dims=0))
    if batch.get("attention_mask") is not None:
        swapped["attention_mask"] = batch["attention_mask"].roll(1, dims=0)
    return swapped


def input_gap(own, other) -> dict[str, torch.Tensor]:
    """The LM loss with another row's input and how much higher it is than with the own
    (`input_gap`): 0 says the model ignores its input (one that never learned to read, e.g. to
    copy the scene's names, writes the same text whatever it is given)."""
    lm = lambda out: (out.loss if getattr(out, "lm_loss", None) is None else out.lm_loss).detach()  # noqa: E731
    swapped = lm(other)
    return {"other_input_lm_loss": swapped, "input_gap": swapped - lm(own)}
