"""The state space's training-time care: what needs the optimizer, not just the module.

    CodebookCare(engine, state_space, config)
        .start(batches)   k-means init of the codes from the first batches' event vectors
        .after_step()     ages the codes, re-seeds the dead ones; returns metrics to log

Writing codebook rows is not a plain `param.data[...] = v` under DeepSpeed: ZeRO 1-2
and bf16 keep an fp32 master copy (partitioned across ranks) that overwrites the module
tensor at the next step, and Adam's moments of a re-seeded row would carry the dead
code's history. `write_rows` updates the module, the master copy and the moments.
Every decision is made on rank 0 and broadcast, so all ranks hold the same codebook.

`CodebookProbe` measures, per optimizer step, the gradient that reaches the codebook
(norm, rows with any) and how far the codes moved from their start (docs/state-space.md).

`CodebookHook` puts both on the training loop's hooks (eric/train/loop.py `LoopHook`):

    Trainer(model, settings, ..., hooks=codebook_hooks(model))
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn import functional as F
from tqdm.auto import tqdm

from eric.model.state_space import StateSpace, kmeans

ADAM_STATE = ("exp_avg", "exp_avg_sq")


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _broadcast(tensor: torch.Tensor) -> torch.Tensor:
    """Rank 0's tensor on every rank (same shape everywhere)."""
    if _distributed():
        dist.broadcast(tensor, src=0)
    return tensor


def _gather_rows(tensor: torch.Tensor) -> torch.Tensor:
    """The rows of every rank's tensor (rows may differ in number), rank order."""
    if not _distributed():
        return tensor
    sizes = [torch.zeros(1, dtype=torch.long) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([tensor.shape[0]]))
    width = int(max(s.item() for s in sizes))
    padded = torch.zeros(width, *tensor.shape[1:], dtype=tensor.dtype)
    padded[: tensor.shape[0]] = tensor
    parts = [torch.zeros_like(padded) for _ in sizes]
    dist.all_gather(parts, padded)
    return torch.cat([part[: int(size.item())] for part, size in zip(parts, sizes)])


def _client_optimizer(engine):
    optimizer = getattr(engine, "optimizer", None)
    return getattr(optimizer, "optimizer", optimizer)  # DeepSpeed wrappers keep the torch one inside


@torch.no_grad()
def write_rows(engine, param: torch.nn.Parameter, rows: torch.Tensor, values: torch.Tensor) -> None:
    """Set the rows of `param` where the mask `rows` [K] is set to `values` [K, D] (the other
    rows of `values` are ignored), in the module and in ZeRO's fp32 master copy, and zero those
    rows' Adam moments. Masked writes, no gather: nothing waits for the device. Local on every
    rank (each writes the fragment it owns), so it needs no collective; every rank must pass the
    same rows and values."""
    rows = rows.to(param.device)
    param.data.copy_(torch.where(rows[:, None], values.to(param.device, param.dtype), param.data))
    mapping = getattr(param, "_hp_mapping", None)
    if mapping is not None:  # ZeRO 1-2 / bf16 optimizer: this rank's piece of the fp32 master
        _write_fragment(engine, param, mapping, rows)
    optimizer = _client_optimizer(engine)
    state = optimizer.state.get(param, {}) if optimizer is not None else {}
    for key in ADAM_STATE:  # ZeRO 0: the torch optimizer holds the module tensor's moments
        if key in state and state[key].shape == param.shape:
            state[key].masked_fill_(rows[:, None].to(state[key].device), 0)


def _write_fragment(engine, param, mapping, rows: torch.Tensor) -> None:
    lp = mapping.lp_fragment_address
    full = param.data.float().flatten()
    mapping.hp_fragment.data.copy_(full.narrow(0, lp.start, lp.numel))
    mask = rows[:, None].expand(param.shape).flatten().narrow(0, lp.start, lp.numel)
    flat = _flat_partition(engine.optimizer, mapping.param_group_index)
    state = _client_optimizer(engine).state.get(flat, {}) if flat is not None else {}
    hp = mapping.hp_fragment_address
    for key in ADAM_STATE:  # the moments live on the flat fp32 partition, at the fragment's address
        if key in state and torch.is_tensor(state[key]) and state[key].shape == flat.shape:
            state[key].narrow(0, hp.start, hp.numel).masked_fill_(mask.to(state[key].device), 0)


def _flat_partition(optimizer, group: int):
    """The flat fp32 tensor the torch optimizer steps for param group `group` on this rank."""
    for name in ("single_partition_of_fp32_groups", "fp32_groups_flat_partition"):  # ZeRO 1-2, bf16
        groups = getattr(optimizer, name, None)
        if groups is not None:
            return groups[group]
    return None


class CodebookCare:
    def __init__(self, engine, space: StateSpace, *, init: str = "random", init_events: int = 1024,
                 dead_code_steps: int = 0, seed: int = 0):
        self.engine, self.space = engine, space
        self.init, self.init_events, self.dead_code_steps = init, init_events, dead_code_steps
        self.generator = torch.Generator().manual_seed(seed)  # k-means init (host)
        device = space.codebook.device
        self.device_generator = torch.Generator(device=device).manual_seed(seed)  # re-seeding (device)
        self.replaced_total = torch.zeros((), dtype=torch.long, device=device)
        self.last_replaced = torch.zeros(space.num_states, dtype=torch.bool, device=device)  # rows re-seeded last step

    @torch.no_grad()
    def start(self, batches) -> int:
        """k-means init from the event vectors of `batches` (an iterable of model inputs),
        before the first step. Returns how many event vectors it clustered."""
        if self.init != "kmeans":
            return 0
        module = self.engine.module
        for batch in batches:
            module(**batch)  # training mode: the state space keeps the e_n it quantizes
            if self.space.recent_filled >= self.init_events:
                break
        events = _gather_rows(self.space.recent_events().cpu())
        centroids = kmeans(events, self.space.num_states, generator=self.generator) if events.shape[0] else None
        centroids = _broadcast(centroids if centroids is not None else torch.zeros(self.space.codebook.shape))
        every = torch.ones(self.space.num_states, dtype=torch.bool, device=self.space.codebook.device)
        write_rows(self.engine, self.space.codebook, every, centroids.to(self.space.codebook.device))
        self.space.assign_rows(every, centroids.to(self.space.codebook.device))
        self.space.reset_usage()
        return int(events.shape[0])

    def after_step(self) -> dict[str, torch.Tensor]:
        """Age the codes (used on any rank = used); re-seed those unused for dead_code_steps.
        Without dead-code replacement nothing reads the ages: no collective, no work. All on
        the device (masks, not row lists): the step reads nothing on the host."""
        used = self.space.pop_used().to(torch.int32)
        if self.dead_code_steps <= 0:
            return {}
        if _distributed():
            dist.all_reduce(used, op=dist.ReduceOp.MAX)
        self.space.age(used.bool())
        dead = _broadcast((self.space.steps_since_used >= self.dead_code_steps).to(torch.int32)).bool()
        self.last_replaced = self._reseed(dead)
        replaced = self.last_replaced.sum()
        self.replaced_total = self.replaced_total + replaced
        return {"codes_replaced": replaced.float(), "codes_replaced_total": self.replaced_total.float()}

    def _reseed(self, dead: torch.Tensor) -> torch.Tensor:
        """Dead codes become recent event vectors (rank 0's, picked uniformly from the filled
        part of the ring buffer, a little noise so that two codes seeded from one vector can
        part). Returns the rows written: none while rank 0 has seen no event yet."""
        recent, filled = self.space.recent, self.space.recent_filled
        if recent.shape[0] == 0:
            return torch.zeros_like(dead)
        size, (k, d) = recent.shape[0], self.space.codebook.shape
        gen = self.device_generator
        offset = (torch.rand(k, generator=gen, device=recent.device) * filled).long()  # < filled
        picks = (size - filled + offset).clamp(max=size - 1)  # the newest `filled` slots are the events (none: clamped)
        noise = torch.randn(k, d, generator=gen, device=recent.device) * 0.01
        values = _broadcast(F.normalize(recent[picks] + noise, dim=-1))
        rows = dead & _broadcast(filled.clone()).gt(0)
        write_rows(self.engine, self.space.codebook, rows, values)
        self.space.assign_rows(rows, values)
        return rows


class CodebookProbe:
    """Per step: L2 norm of the codebook's gradient and rows that got any; per log: drift.
    Accumulated on the device; the loop reads them when it logs."""

    def __init__(self, space: StateSpace):
        self.space = space
        self.start = F.normalize(space.codebook.detach().float().clone(), dim=-1)
        self._reset()
        self.handle = space.codebook.register_hook(self._on_grad) if space.codebook.requires_grad else None

    def _reset(self) -> None:
        device = self.space.codebook.device
        self.norm_sq = torch.zeros((), device=device)
        self.rows = torch.zeros(self.space.num_states, dtype=torch.bool, device=device)

    def _on_grad(self, grad: torch.Tensor) -> None:
        g = grad.detach().float()
        self.norm_sq = self.norm_sq.to(g.device) + (g * g).sum()
        self.rows = self.rows.to(g.device) | (g.abs().sum(dim=-1) > 0)

    def pop(self) -> dict[str, torch.Tensor]:
        out = {"codebook_grad_norm": self.norm_sq.sqrt(), "codebook_grad_rows": self.rows.sum().float()}
        self._reset()
        return out

    def drift(self) -> float:
        """Mean 1 - cos between each code now and at the start of training."""
        now = F.normalize(self.space.codebook.detach().float(), dim=-1)
        return float(1 - (now * self.start.to(now.device)).sum(-1).mean())


class CodebookHook:
    """The care and the probe of a model's state space, on the loop's hooks: k-means init at a
    fresh start, dead codes re-seeded and the gradient measured after each step, the drift in
    each logged row."""

    def __init__(self, space: StateSpace, config):
        self.space, self.config = space, config
        self.care: CodebookCare | None = None
        self.probe: CodebookProbe | None = None

    def attach(self, trainer) -> None:
        c = self.config
        self.care = CodebookCare(trainer.engine, self.space, init=c.state_init, init_events=c.state_init_events,
                                 dead_code_steps=c.dead_code_steps, seed=trainer.seed)
        self.probe = CodebookProbe(self.space)

    def on_start(self, trainer) -> None:
        if self.care.init != "kmeans":
            return
        trainer.engine.train()
        clustered = self.care.start(trainer.first_step_batches())
        if trainer.rank.is_main:
            tqdm.write(f"state space: k-means init from {clustered} event vectors")

    def after_step(self, trainer) -> dict[str, float]:
        return {**self.care.after_step(), **self.probe.pop()}

    def log_columns(self, trainer) -> dict[str, float]:
        return {"codebook_drift": round(self.probe.drift(), 6)}


def codebook_hooks(model) -> list[CodebookHook]:
    """The loop hooks a model needs: its codebook's, when it learns a state space (ERIC)."""
    module = getattr(model, "module", model)  # a DeepSpeed engine or the model itself
    space = getattr(module, "state_space", None)
    return [] if space is None else [CodebookHook(space, module.config)]
