"""Operators and host syncs that code dispatches: a cost proxy that no host noise moves.

    with OpCounter() as counter:
        model.generate(...)
    counter.total, counter.syncs, counter.counts.most_common(10)

At a small size a decoding step is bound by per-operator overhead (Python, dispatch, and on
a GPU one kernel launch each), so operators per token predict the speed ratio of two
models where timings on a shared host are noisy; host syncs (a tensor's value read on the
host) stall a GPU's queue. Counted below autograd, at torch's dispatch level.
"""

from __future__ import annotations

from collections import Counter

from torch.utils._python_dispatch import TorchDispatchMode

# operators whose result size or value the host must read (on a GPU: wait for the device), and
# the cuSOLVER decompositions that torch documents as synchronizing a CUDA device with the host
SYNC_OPERATORS = ("aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten._unique2",
                  "aten.repeat_interleave.Tensor", "aten._linalg_svd", "aten._linalg_eigh")


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()
        self.views: set[str] = set()  # the operators seen whose output aliases an input (no kernel)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        self.counts[name] += 1
        if func.is_view:
            self.views.add(name)
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def syncs(self) -> int:
        return sum(n for name, n in self.counts.items() if name.startswith(SYNC_OPERATORS))
