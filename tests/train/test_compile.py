"""`train.compile`: torch.compile of the model in place, and AdamW fused only on CUDA.

The compiled path is traced by dynamo and AOTAutograd (backend `aot_eager`: no code
generation, so the test needs no compiler and stays fast); it must compute what the eager
model computes."""

from __future__ import annotations

import copy

import pytest
import torch

from torch._dynamo.testing import CompileCounterWithBackend
from transformers import BartConfig, BartForConditionalGeneration

from eric.train.data_order import token_budget_batches
from eric.train.engine import build_optimizer, compile_in_place, symbolic_shapes
from tests.model.conftest import BOS, ENTITIES, EOS, PAD, SENT, WORDS, _pad, make_batch, tiny_config, tiny_model
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


def test_a_compiled_forward_leaves_its_no_grad_work_to_finish_output():
    """What no gradient needs (the states used, the state-space diagnostics) is not in the compiled
    graph: the compiled forward returns it undone and `finish_output` does it once, to the values
    and the state-space bookkeeping an eager forward gives."""
    eager = tiny_model(seed=0, dead_code_steps=2, event_norm="batch").train()
    compiled = copy.deepcopy(eager)
    compile_in_place(compiled, "aot_eager")
    batch = make_batch(seed=2)
    torch.manual_seed(1)
    expected = eager(**batch)
    torch.manual_seed(1)
    out = compiled(**batch)
    assert not out.deferred.done and out.event_cosine is None and out.codebook_usage is None
    assert int(compiled.state_space.usage_counts.sum()) == 0
    compiled.finish_output(out)
    compiled.finish_output(out)  # a second call finds nothing left to do
    assert out.deferred.done and expected.deferred.done
    names = ("codebook_usage", "contrastive_chance", "event_cosine", "contrastive_entity_loss",
             "contrastive_entity_chance")
    for name in names:
        assert torch.allclose(getattr(out, name), getattr(expected, name), atol=1e-6, equal_nan=True), name
    space, reference = compiled.state_space, eager.state_space
    assert int(space.usage_counts.sum()) == int(reference.usage_counts.sum()) > 0  # counted once
    assert torch.equal(space.usage_counts, reference.usage_counts)
    assert int(space.recent_filled) == int(reference.recent_filled) > 0
    assert torch.allclose(space.recent, reference.recent, atol=1e-6)


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


BART_KEYS = ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
             "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings",
             "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")


def _story(g: torch.Generator) -> dict:
    """One stage-one row of 2-8 units (every other one naming an entity) and a 3-12 token source."""
    n_units, unit_len = (int(torch.randint(lo, hi, (1,), generator=g)) for lo, hi in ((2, 9), (3, 8)))
    labels, entity_ids, positions = [BOS], [], []
    for n in range(n_units):
        unit = [SENT, *torch.randint(*WORDS, (unit_len - 1,), generator=g).tolist()]
        named = n % 2 == 0
        if named:
            unit[1] = ENTITIES[n % len(ENTITIES)]
        entity_ids.append(n % len(ENTITIES) + 1 if named else 0)
        positions.append(len(labels) + 1 if named else -1)
        labels += unit
    source = [BOS, *torch.randint(*WORDS, (int(torch.randint(3, 13, (1,), generator=g)),), generator=g).tolist(), EOS]
    return {"input_ids": source, "labels": [*labels, EOS], "entity_ids": entity_ids, "entity_positions": positions}


def _collate(rows: list[dict]) -> dict:
    batch = {"input_ids": _pad([r["input_ids"] for r in rows], PAD), "labels": _pad([r["labels"] for r in rows], -100),
             "entity_ids": _pad([r["entity_ids"] for r in rows], -100),
             "entity_positions": _pad([r["entity_positions"] for r in rows], -1)}
    return {**batch, "attention_mask": (batch["input_ids"] != PAD).long()}


def token_budget_micro_batches(n_shapes: int = 8) -> list[dict]:
    """Micro-batches as the token-budget packing makes them, until `n_shapes` distinct
    (batch, source, target, units) shapes: batch size and every length change."""
    g = torch.Generator().manual_seed(0)
    rows = [_story(g) for _ in range(160)]
    packed = token_budget_batches([(len(r["input_ids"]), len(r["labels"])) for r in rows], 240)
    batches, shapes = [], set()
    for indices in packed[::3]:
        batch = _collate([rows[i] for i in indices])
        shape = tuple(tuple(v.shape) for v in batch.values())
        if shape not in shapes and len(indices) > 1:
            shapes.add(shape)
            batches.append(batch)
    batches = sorted(batches[:n_shapes], key=lambda b: -b["entity_ids"].shape[1])
    # the first two share their unit count (as the longest stories do): left to torch's automatic
    # dynamic shapes, the unit count of a later batch would then cost a third graph
    assert batches[0]["entity_ids"].shape[1] == batches[1]["entity_ids"].shape[1] != batches[-1]["entity_ids"].shape[1]
    assert len({b["input_ids"].shape[0] for b in batches}) >= 3
    return batches


def test_the_training_step_compiles_once_for_every_token_budget_shape():
    """What made a compiled ERIC recompile at nearly every step on the GPU (batch size, then
    unit count, each a new graph): batches through `symbolic_shapes` compile at most twice
    over 8 shapes, for ERIC and for transformers' BART alike (docs/gpu.md)."""
    batches = token_budget_micro_batches()
    bart = BartForConditionalGeneration(BartConfig(**{k: getattr(tiny_config(), k) for k in BART_KEYS}))
    for name, model in (("eric", tiny_model()), ("bart", bart)):
        counter = CompileCounterWithBackend("aot_eager")
        compile_in_place(model.train(), counter)
        for batch in batches:
            keys = batch if name == "eric" else ("input_ids", "attention_mask", "labels")
            model(**symbolic_shapes({k: batch[k] for k in keys})).loss.backward()
        assert 1 <= counter.frame_count <= 2, (name, counter.frame_count)


def test_a_logged_step_reuses_the_compiled_graph():
    """The loop logs a row every few steps, and that row's diagnostic (the e_n's effective rank,
    an SVD that syncs a GPU) is computed outside the forward: a compiled ERIC runs one graph for
    logged and unlogged steps (while the forward read a per-step switch, a logged step compiled
    a second one)."""
    model, batch = tiny_model().train(), make_batch()
    counter = CompileCounterWithBackend("aot_eager")
    compile_in_place(model, counter)
    for logged in (False, True, False, True):
        out = model(**batch)
        model.finish_output(out, logged)
        out.loss.backward()
        assert (out.event_rank is not None) == logged and (not logged or out.event_rank > 1)
    assert counter.frame_count == 1
