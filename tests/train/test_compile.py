"""`train.compile`: torch.compile of the model in place, and AdamW fused only on CUDA.

The compiled path is traced by dynamo and AOTAutograd (backend `aot_eager`: no code
generation, so the test needs no compiler and stays fast); it must compute what the eager
model computes."""

from __future__ import annotations

import copy

import pytest
import torch

from eric.train.engine import build_optimizer, compile_in_place
from tests.model.conftest import make_batch, tiny_model
from tests.train.test_loop import make_trainer


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Every test compiles anew: dynamo's per-function recompile limit, reached by the suite's
    earlier compiles of the same forward, would otherwise fall back to eager (and fail fullgraph)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _loss_and_grads(model, batch) -> tuple[float, torch.Tensor]:
    torch.manual_seed(1)
    loss = model(**batch).loss
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    model.zero_grad(set_to_none=True)
    return float(loss.detach()), grads


def test_compiled_eric_computes_the_eager_loss_and_gradients_across_shapes():
    eager = tiny_model()
    compiled = copy.deepcopy(eager)
    compile_in_place(compiled, "aot_eager")
    for seed, units in ((0, (3, 4, 2)), (1, (5, 2, 6))):  # a second shape: lengths and unit counts change
        batch = make_batch(seed=seed, units=units)
        loss, grads = _loss_and_grads(eager, batch)
        loss_c, grads_c = _loss_and_grads(compiled, batch)
        assert abs(loss - loss_c) <= 1e-5 * abs(loss)
        assert float((grads - grads_c).norm() / grads.norm()) < 1e-5
    assert list(compiled.state_dict()) == list(eager.state_dict())  # in place: no `_orig_mod.` prefix


def test_trainer_with_compile_trains_like_eager_and_saves_plain_names(tmp_path):
    runs = {}
    for compiled in (False, True):
        trainer = make_trainer(tmp_path / f"ckpt{compiled}", max_steps=3, eval_at_start=False, log_every=1,
                               compile=compiled, compile_backend="aot_eager")
        result = trainer.fit()
        runs[compiled] = ([row["loss"] for row in result.history],
                          trainer.save_pretrained(tmp_path / f"model{compiled}"))
    (eager_losses, _), (compiled_losses, out) = runs[False], runs[True]
    assert len(compiled_losses) == 3
    assert all(abs(a - b) <= 1e-5 * abs(a) for a, b in zip(eager_losses, compiled_losses))
    from safetensors.torch import load_file

    assert not any("_orig_mod" in key for key in load_file(out / "model.safetensors"))


def test_adamw_is_fused_only_where_asked_or_on_cuda():
    model = tiny_model()
    optimizer, _ = build_optimizer(model, 1e-3, 0.01, total_steps=2)
    assert bool(optimizer.defaults["fused"]) == torch.cuda.is_available()
    fused, _ = build_optimizer(model, 1e-3, 0.01, total_steps=2, fused=True)  # torch fuses on CPU too
    assert fused.defaults["fused"] is True
    batch = make_batch()
    model(**batch).loss.backward()
    fused.step()  # the fused kernel runs here
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_erics_forward_is_one_graph_in_training_and_in_evaluation():
    """fullgraph=True fails on any graph break: no shape or branch of the forward depends on
    the data (static unit slots, masked losses), in either mode, with every remedy on."""
    options = dict(state_init="kmeans", dead_code_steps=2, event_norm="batch", entropy_weight=1.0,
                   predictor_residual=True, hard_negatives=True)
    for training in (True, False):
        eager = tiny_model(**options).train(training)
        compiled = torch.compile(copy.deepcopy(eager), backend="aot_eager", fullgraph=True)
        for seed, units in ((0, (3, 4, 2)), (1, (5, 2, 6))):
            batch = make_batch(seed=seed, units=units)
            torch.manual_seed(seed)
            loss = eager(**batch).loss.detach()
            torch.manual_seed(seed)
            loss_c = compiled(**batch).loss.detach()
            assert abs(float(loss) - float(loss_c)) <= 1e-5 * abs(float(loss)), (training, seed)
