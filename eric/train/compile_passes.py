"""Graph passes for a compiled training step (`compile_in_place`): what inductor's own order misses.

`RandomMasksFirst` draws every dropout mask of a graph together, right after the values it
needs (the seeds and the sizes), instead of just before the layer that applies it.

Why: inductor's CPU backend writes the nodes that run between two library calls (matrix
products, attention) as one C++ kernel, and a dropout mask's random draw reads its seed at
a constant index written into that kernel's source. A mask drawn just before its layer norm
makes each layer's kernel differ from its neighbours' by that index, so inductor builds each
layer's kernel again instead of once. Drawn first, the masks have kernels of their own and
the layers' kernels are identical again. BART's forward gets this order by chance from
inductor's peak-memory reordering (its depth-first order wins by a few kilobytes); ERIC's
keeps the traced order, which cost it about 20 of its C++ files (docs/gpu.md). The masks are
saved for the backward anyway, so drawing them early keeps nothing alive longer than the
forward already does. The values drawn do not change: each mask keeps its seed index.
"""

from __future__ import annotations

import torch
import torch._inductor.inductor_prims  # noqa: F401  (registers the random prims below)
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

RANDOM_OPS = (torch.ops.prims.inductor_lookup_seed.default, torch.ops.prims.inductor_random.default)


class RandomMasksFirst(CustomGraphPass):
    """Move each random draw, and what is computed from it alone (`rand > p`), as early as its
    inputs allow, next to the draws moved before it. A node only ever moves earlier and after
    all its inputs, so the order stays topological."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        last = None  # the draw moved before this one
        for node in [n for n in graph.nodes if _drawn(n)]:
            position = {n: i for i, n in enumerate(graph.nodes)}
            anchor = max(node.all_input_nodes, key=position.__getitem__)
            if last is not None and position[last] > position[anchor]:
                anchor = last  # keep the masks together
            anchor.append(node)
            last = node

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__,))


def _drawn(node: torch.fx.Node) -> bool:
    """A random op, or an op whose tensor inputs are all random draws."""
    if node.op != "call_function":
        return False
    if node.target in RANDOM_OPS:
        return True
    tensors = [n for n in node.all_input_nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    return bool(tensors) and all(n.target in RANDOM_OPS for n in tensors)
