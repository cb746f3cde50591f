"""Training phases after the main one, in the same stage run (DiscoDVT's prior).

A model that trains in phases has

    set_training_phase(name)   freezes what the phase leaves alone (requires_grad) and picks
                               the phase's objective in forward
    training_phases()          [(name, steps), ...] after the main phase

Each later phase gets its own DeepSpeed engine over the parameters it trains (an engine's
optimizer holds only those, so the frozen ones cannot move through momentum or weight
decay under any ZeRO stage), its own linear schedule of `steps` optimizer steps at the main
lr, and its own checkpoints in `<checkpoint dir>/phase-<name>/`. A killed run resumes
where it was: the main phase finds its final checkpoint and returns at once, the later
phase resumes from its own. `run_job` clears the whole checkpoint folder at the end.

The saved model takes the frozen weights at the main engine's fp32 master values (under
bf16 the module holds rounded copies) and the phase's parameters at the phase engine's.
"""

from __future__ import annotations

from pathlib import Path

from eric.train.checkpoint import full_precision_state_dict
from eric.train.codebook import codebook_hooks
from eric.train.loop import Trainer, TrainResult


class PhaseTracker:
    """Logs a phase's metrics as `<phase>_<name>`, at steps after the main phase's."""

    def __init__(self, tracker, phase: str, offset: int):
        self.tracker, self.phase, self.offset = tracker, phase, offset

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        if self.tracker is not None:
            self.tracker.log_metrics({f"{self.phase}_{k}": v for k, v in metrics.items()}, step=self.offset + step)


def has_phases(model) -> bool:
    return hasattr(model, "training_phases") and hasattr(model, "set_training_phase")


def run_later_phases(job, main: Trainer, fingerprint: str, tracker) -> tuple[dict | None, dict]:
    """Train every later phase of `job.model` after `main.fit()`. Returns (the state dict to
    save, or None when the model has no later phase; metrics of the phases by name)."""
    phases = job.model.training_phases() if has_phases(job.model) else []
    if not phases:
        return None, {}
    state = full_precision_state_dict(main.engine.module)
    offset, summaries = main.state.step, {}
    for name, steps in phases:
        job.model.set_training_phase(name)
        trainer = Trainer(
            job.model, job.settings.model_copy(update={"max_steps": steps}), train_set=job.train_set,
            collate_fn=job.collate_fn, val_set=job.val_set,
            checkpoint_dir=Path(main.checkpoints.root) / f"phase-{name}", seed=job.params.seed,
            fingerprint=f"{fingerprint}:{name}", train_lengths=job.train_lengths,
            val_lengths=job.val_lengths, tracker=PhaseTracker(tracker, name, offset),
            hooks=codebook_hooks(job.model),
        )
        result = trainer.fit()
        trained = {n for n, p in trainer.engine.module.named_parameters() if p.requires_grad}
        phase_state = full_precision_state_dict(trainer.engine.module)
        state.update({k: v for k, v in phase_state.items() if k in trained})
        summaries[name] = result
        offset += result.steps
    job.model.set_training_phase("main")
    return state, summaries


def phase_metrics(summaries: dict[str, TrainResult]) -> dict:
    """Flat `<phase>_<metric>` numbers for the metrics JSON."""
    keys = ("steps", "train_seconds", "tokens_per_s", "initial_val_loss", "final_val_loss", "final_train_loss")
    return {f"{name}_{k}": getattr(result, k) for name, result in summaries.items() for k in keys}


def merged_history(main: TrainResult, summaries: dict[str, TrainResult]) -> tuple[list[dict], list[dict]]:
    """The loss curves of all phases in one table each: later phases' columns prefixed, steps offset."""
    history, val_history, offset = list(main.history), list(main.val_history), main.steps
    for name, result in summaries.items():
        for source, target in ((result.history, history), (result.val_history, val_history)):
            target.extend({"step": offset + row["step"], **{f"{name}_{k}": v for k, v in row.items() if k != "step"}}
                          for row in source)
        offset += result.steps
    return history, val_history
