"""`RandomMasksFirst`: the dropout masks of a compiled graph are drawn before the layers, the
order stays valid and the values drawn do not change. `compile_in_place` gives it to inductor."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from eric.train import engine
from eric.train.compile_passes import RANDOM_OPS, RandomMasksFirst

PRIMS = torch.ops.prims


def _two_layers(x: torch.Tensor, seeds: torch.Tensor):
    """Two "layers", each a matrix product, then a dropout mask drawn where it is applied, as
    inductor's random-number pass leaves a traced graph."""
    out, masks = x, []
    for index in range(2):
        out = out @ x
        seed = PRIMS.inductor_lookup_seed.default(seeds, index)
        keep = PRIMS.inductor_random.default([4, 4], seed, "rand") > 0.1
        out = torch.nn.functional.layer_norm(out * keep / 0.9, [4])
        masks.append(keep)
    return out, *masks


def _graph():
    x, seeds = torch.randn(4, 4), PRIMS.inductor_seeds.default(2, torch.device("cpu"))
    return make_fx(_two_layers)(x, seeds), (x, seeds)


def test_the_masks_are_drawn_together_before_the_first_layer():
    module, _ = _graph()
    targets = [node.target for node in module.graph.nodes]
    first_product = targets.index(torch.ops.aten.mm.default)
    assert targets.index(PRIMS.inductor_random.default, first_product + 1)  # as traced: inside the layers

    RandomMasksFirst()(module.graph)
    module.graph.lint()  # every node still after its inputs
    nodes = list(module.graph.nodes)
    drawn = [i for i, node in enumerate(nodes) if node.target in RANDOM_OPS or node.target == torch.ops.aten.gt.Scalar]
    assert len(drawn) == 6  # two seed lookups, two draws, two `rand > p`
    assert drawn == list(range(drawn[0], drawn[0] + 6))  # one block
    assert drawn[-1] < [node.target for node in nodes].index(torch.ops.aten.mm.default)


def test_moving_the_masks_changes_no_value():
    """Traced eagerly, a draw reads torch's generator in graph order (compiled, it reads its seed
    index): the pass keeps the draws' order, so the same generator state gives the same values."""
    module, inputs = _graph()
    torch.manual_seed(0)
    before = module(*inputs)
    RandomMasksFirst()(module.graph)
    module.recompile()
    torch.manual_seed(0)
    after = module(*inputs)
    for old, new in zip(before, after, strict=True):
        assert torch.equal(old, new)


def test_the_pass_keys_inductors_cache_by_its_source():
    assert RandomMasksFirst().uuid() == RandomMasksFirst().uuid()
    assert isinstance(RandomMasksFirst().uuid(), bytes)


def test_compile_in_place_gives_the_pass_to_inductor_only():
    calls = []

    class Recorder(torch.nn.Module):
        def compile(self, **kwargs):
            calls.append(kwargs)

    engine.compile_in_place(Recorder(), "inductor")
    engine.compile_in_place(Recorder(), "aot_eager")
    assert isinstance(calls[0]["options"]["post_grad_custom_post_pass"], RandomMasksFirst)
    assert calls[1] == {"backend": "aot_eager", "options": None}
