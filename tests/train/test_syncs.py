"""No host syncs in a training step (issue 27): nothing in ERIC's forward + backward, the
optimizer step or the loop's bookkeeping reads a device value on the host, so a GPU's queue
never drains mid-step. Counted at torch's dispatch level (benchmarks/op_count.py): reading a
tensor's value (`.item()`, `float()`, `.tolist()`), an operator whose output size depends on the
data (nonzero, boolean indexing, unique), or a cuSOLVER decomposition is a sync. The SVD of
the `event_rank` diagnostic runs only on the steps whose row the loop logs, outside the forward
(`finish_output(out, logged=True)`)."""

from __future__ import annotations

import sys

import torch

from eric.config import PROJECT_ROOT
from eric.train.codebook import codebook_hooks
from eric.train.loop import LoopSettings, Trainer
from tests.model.conftest import make_batch, tiny_model

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
from op_count import OpCounter  # noqa: E402

# every remedy on (the default recipe's set): each adds bookkeeping to the step
REMEDIES = dict(state_init="kmeans", state_init_events=32, dead_code_steps=2, event_norm="batch", entropy_weight=1.0,
                predictor_residual=True, dropout=0.1)


def test_erics_training_forward_and_backward_read_nothing_on_the_host():
    model = tiny_model(seed=0, **REMEDIES).train()
    batch = make_batch(seed=1)
    model(**batch).loss.backward()  # first call: lazy set-up outside the count
    with OpCounter() as counter:
        out = model(**batch)
        out.loss.backward()
    assert counter.syncs == 0, counter.counts
    assert counter.total > 500  # the counter really saw the step
    assert torch.isfinite(out.loss) and out.event_rank is None and torch.isfinite(out.event_cosine)
    with OpCounter() as counter:  # what the loop adds on a logged step: the effective rank's SVD, its one sync
        model.finish_output(out, logged=True)
    assert counter.syncs == 1 and counter.counts["aten._linalg_svd.default"] == 1 and out.event_rank > 1


def test_a_whole_training_step_reads_nothing_else_on_the_host_outside_logging(tmp_path):
    """The Trainer with the codebook hooks (dead codes re-seeded every 2 steps), gradient
    accumulation and fused AdamW: every step's micro-batches, optimizer steps and hooks."""
    batches = {(total, rows): make_batch(seed=total, rows=rows) for total in range(96) for rows in (1, 2)}
    model = tiny_model(seed=0, **REMEDIES)
    settings = LoopSettings(deepspeed_config="infra/deepspeed/cpu.json", precision="fp32", micro_batch_size=2,
                            grad_accum_steps=2, lr=1e-2, max_steps=6, checkpoint_every=100, log_every=3,
                            eval_at_start=False, progress=False, fused_optimizer=True)
    trainer = Trainer(model, settings, train_set=list(range(48)), collate_fn=lambda items: batches[sum(items), len(items)],
                      checkpoint_dir=tmp_path / "ckpt", seed=3, fingerprint="syncs", hooks=codebook_hooks(model))
    step, counts = trainer._train_step, []

    def counted(micro_batches):
        with OpCounter() as counter:
            step(micro_batches)
        counts.append((counter.syncs, counter.total))

    trainer._train_step = counted
    result = trainer.fit()
    assert len(counts) == 6 and all(total > 1000 for _, total in counts)
    assert [syncs for syncs, _ in counts] == [0, 0, 2, 0, 0, 2]  # a logged step: the rank's SVD, a micro-batch each
    assert [row["step"] for row in result.history] == [3, 6]  # the host reads happen here, when a row is logged
    assert all(row["event_rank"] > 1 for row in result.history)  # measured on the logged steps
    assert result.history[-1]["codes_replaced_total"] > 0 and result.states_used > 0
