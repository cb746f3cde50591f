"""The sentence encoder: each unit on its own, positions restarting, encoded in place (static shapes)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from tests.model.conftest import EOS, SENT, make_batch, tiny_model


def _needed(batch):
    has = batch["entity_ids"] > 0
    needed = torch.zeros(has.shape[0], has.shape[1] + 1, dtype=torch.bool)
    needed[:, 1:] = has
    return needed, torch.where(has, batch["entity_positions"], -1)


def _reference_event(model, labels_row, position):
    """BART encoder layers on one unit alone (a sequence of its own), read at `position`."""
    enc = model.sentence_encoder
    starts = (labels_row == SENT).nonzero()[:, 0]
    start = int(starts[starts <= position].max())
    end = start + 1
    while end < len(labels_row) and int(labels_row[end]) not in (SENT, EOS, -100):
        end += 1
    ids = labels_row[start:end][None]
    hidden = model.model.shared(ids) + enc.embed_positions.weight[torch.arange(ids.shape[1]) + 2]
    hidden = enc.layernorm_embedding(hidden)
    for layer in enc.layers:
        hidden = layer(hidden, None)
    return F.normalize(enc.event_proj(hidden[0, position - start]), dim=-1)


def test_events_equal_encoding_each_unit_alone():
    model = tiny_model().eval()
    batch = make_batch(seed=3, rows=3, units=(4, 3, 5))
    needed, positions = _needed(batch)
    events = model.sentence_encoder(batch["labels"], model.model.shared, needed, positions)
    checked = 0
    for b, n in zip(*torch.nonzero(positions >= 0, as_tuple=True)):
        expected = _reference_event(model, batch["labels"][b], int(positions[b, n]))
        torch.testing.assert_close(events[b, n], expected, atol=1e-5, rtol=1e-5)
        checked += 1
    assert checked >= 5
    assert torch.equal(events[positions < 0], torch.zeros_like(events[positions < 0]))


def test_other_units_and_offsets_do_not_change_an_event():
    """Block-diagonal attention and restarted positions: e_n depends on its unit only."""
    model = tiny_model().eval()
    batch = make_batch(seed=4, rows=1, units=(3,))
    needed, positions = _needed(batch)
    assert positions[0, 0] >= 0  # unit 1 has an entity
    base = model.sentence_encoder(batch["labels"], model.model.shared, needed, positions)[0, 0]
    # prepend a different unit: unit 1 moves right and gains a neighbour
    labels = batch["labels"][0].tolist()
    extra = [SENT, 30, 31, 32]
    shifted = torch.tensor([[labels[0], *extra, *labels[1:]]])
    needed2 = torch.cat([torch.zeros(1, 1, dtype=torch.bool), torch.tensor([[True]]), needed[:, 1:]], 1)
    positions2 = torch.cat([torch.tensor([[-1]]), positions + len(extra)], 1)
    moved = model.sentence_encoder(shifted, model.model.shared, needed2, positions2)[0, 1]
    torch.testing.assert_close(moved, base, atol=1e-5, rtol=1e-5)


def test_units_without_entities_are_not_encoded_but_all_rows_are():
    model = tiny_model().eval()
    batch = make_batch(seed=5, rows=4, units=(2, 6, 1, 3))
    needed, positions = _needed(batch)
    events = model.sentence_encoder(batch["labels"], model.model.shared, needed, positions)
    norms = events.norm(dim=-1)
    assert torch.allclose(norms[positions >= 0], torch.ones_like(norms[positions >= 0]), atol=1e-5)
    assert torch.equal(norms[positions < 0], torch.zeros_like(norms[positions < 0]))


def test_masked_batch_norm_is_the_batch_norm_of_the_masked_rows():
    """Statistics from the masked rows only (padding slots change nothing), buffers as nn.BatchNorm1d's."""
    from eric.model.sentence_encoder import masked_batch_norm

    torch.manual_seed(0)
    norm, masked = (torch.nn.BatchNorm1d(8, affine=False).train() for _ in range(2))
    x = torch.randn(5, 8)
    padded = torch.cat([x[:2], 100 * torch.randn(3, 8), x[2:]])
    mask = torch.tensor([True, True, False, False, False, True, True, True])
    out = masked_batch_norm(masked, padded, mask)
    torch.testing.assert_close(out[mask], norm(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked.running_mean, norm.running_mean)
    torch.testing.assert_close(masked.running_var, norm.running_var)
    assert int(masked.num_batches_tracked) == 1
    one = masked_batch_norm(masked, padded, mask & (torch.arange(8) == 0))  # one vector: the running statistics
    torch.testing.assert_close(one[0], (padded[0] - masked.running_mean) / torch.sqrt(masked.running_var + masked.eps))
    assert int(masked.num_batches_tracked) == 1  # and no update from it


def test_event_norm_runs_in_float32_when_the_model_is_cast_to_bf16():
    """DeepSpeed's bf16 mode casts every buffer; the batch norm of e_n still works, in float32."""
    from eric.model.sentence_encoder import masked_batch_norm

    torch.manual_seed(0)
    norm = torch.nn.BatchNorm1d(8, affine=False).train()
    cast = torch.nn.BatchNorm1d(8, affine=False).train().to(torch.bfloat16)
    x = torch.randn(5, 8)
    every = torch.ones(5, dtype=torch.bool)
    out = masked_batch_norm(cast, x, every)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, norm(x), atol=1e-5, rtol=1e-5)  # training: the batch's own statistics
    torch.testing.assert_close(cast.running_mean, norm.running_mean.to(torch.bfloat16))
    assert int(cast.num_batches_tracked) == 1

    model = tiny_model(event_norm="batch").to(torch.bfloat16).train()
    assert torch.isfinite(model(**make_batch()).loss)
    cast.eval()
    assert torch.isfinite(masked_batch_norm(cast, x, every)).all()
