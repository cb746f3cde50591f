import numpy as np
import pytest

from eric.train.data_order import DataOrder, eval_batches


def order(**kw) -> DataOrder:
    base = dict(n_examples=103, micro_batch_size=4, grad_accum_steps=2, seed=3)
    return DataOrder(**{**base, **kw})


def test_same_seed_same_order_and_epochs_differ():
    a, b = order(), order()
    assert np.array_equal(a.step_batches(0), b.step_batches(0))
    assert not np.array_equal(a.step_batches(0), a.step_batches(1))
    assert not np.array_equal(a.step_batches(0), order(seed=4).step_batches(0))


def test_epoch_uses_each_example_at_most_once_and_drops_the_tail():
    o = order()
    batches = o.step_batches(0)
    assert o.steps_per_epoch == 103 // 8 == 12
    assert batches.shape == (12, 8)
    assert len(np.unique(batches)) == 96


def test_resuming_at_a_step_reads_the_same_micro_batches():
    o = order(lengths=list(range(103)))
    full = list(o.iter_steps(epoch=2))
    resumed = list(o.iter_steps(epoch=2, start=5))
    assert resumed == full[5:]


def test_ranks_and_accumulation_cover_the_same_step_batch():
    """2 ranks x 1 micro-step and 1 rank x 2 micro-steps train on the same examples."""
    single = order(grad_accum_steps=2, world_size=1)
    ranks = [order(grad_accum_steps=1, world_size=2, rank=r) for r in (0, 1)]
    for (_, acc), (_, r0), (_, r1) in zip(single.iter_steps(0), *(o.iter_steps(0) for o in ranks)):
        assert sorted(sum(acc, [])) == sorted(r0[0] + r1[0])
        assert set(r0[0]).isdisjoint(r1[0])


def test_length_grouping_cuts_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 300, size=400).tolist()

    def padding(o: DataOrder) -> int:
        total = 0
        for _, micro in o.iter_steps(0):
            for batch in micro:
                width = max(lengths[i] for i in batch)
                total += sum(width - lengths[i] for i in batch)
        return total

    plain = order(n_examples=400, grad_accum_steps=1)
    grouped = order(n_examples=400, grad_accum_steps=1, lengths=lengths, group_size=8)
    assert padding(grouped) < padding(plain) / 3
    assert sorted(grouped.step_batches(0).ravel()) == sorted(plain.step_batches(0).ravel())


def test_eval_batches_split_ranks_without_overlap():
    lengths = list(range(10))
    r0 = eval_batches(10, 3, rank=0, world_size=2, lengths=lengths)
    r1 = eval_batches(10, 3, rank=1, world_size=2, lengths=lengths)
    seen = sum(r0, []) + sum(r1, [])
    assert sorted(seen) == list(range(10))
    assert r0[0] == [8, 6, 4]  # longest first


@pytest.mark.parametrize("n", [0, 7])
def test_too_few_examples_for_one_step(n):
    assert order(n_examples=n).steps_per_epoch == 0
