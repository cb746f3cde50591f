"""A tiny ERIC trained by the real Trainer with the codebook remedies on, checking at every
step what dead-code replacement must keep true (run in-process or under torchrun):

- every rank holds the same codebook;
- ZeRO's fp32 master copy equals the module's codebook (a re-seed written only to the
  module would be overwritten by the master at the next step);
- the Adam moments of the rows just re-seeded are zero.

    python -m tests.train.tiny_states OUT [--ds-config infra/deepspeed/cpu_zero2.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist

from tests.model.conftest import make_batch, tiny_model


def collate(items: list[int]) -> dict:
    return make_batch(seed=sum(items), rows=len(items))


def _same_on_all_ranks(tensor: torch.Tensor) -> bool:
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return True
    parts = [torch.zeros_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return all(torch.equal(parts[0], p) for p in parts)


def _moments(engine, param) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(moment values, row of each value) of `param` that this rank holds: the torch
    optimizer's own state (ZeRO 0), or this rank's piece of the flat fp32 partition (ZeRO 1-2)."""
    inner = getattr(engine.optimizer, "optimizer", engine.optimizer)
    rows = torch.arange(param.shape[0])[:, None].expand(param.shape).flatten()
    found = [(inner.state[param][k].flatten(), rows) for k in ("exp_avg", "exp_avg_sq")
             if k in inner.state.get(param, {})]
    mapping = getattr(param, "_hp_mapping", None)
    if mapping is not None:
        flat = engine.optimizer.single_partition_of_fp32_groups[mapping.param_group_index]
        lp, hp = mapping.lp_fragment_address, mapping.hp_fragment_address
        for key in ("exp_avg", "exp_avg_sq"):
            state = inner.state.get(flat, {}).get(key)
            if state is not None:
                found.append((state.narrow(0, hp.start, hp.numel), rows.narrow(0, lp.start, lp.numel)))
    return found


def _all_ranks(value: int, op=None) -> int:
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return value
    t = torch.tensor([value])
    dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
    return int(t.item())


def check_step(trainer, log: list[dict]) -> None:
    from deepspeed.utils import safe_get_full_fp32_param

    space = trainer.engine.module.state_space
    book = space.codebook.detach().float()
    master = safe_get_full_fp32_param(space.codebook)
    care = trainer.hooks[0].care
    replaced = int(care.replaced_total)
    moments = _moments(trainer.engine, space.codebook)
    reseeded = care.last_replaced
    zeroed = all(bool((values[reseeded[rows]] == 0).all()) for values, rows in moments)
    log.append({
        "step": trainer.state.step,
        "replaced_total": replaced,
        "ranks": dist.get_world_size() if dist.is_initialized() else 1,  # ranks compared (1: nothing to compare)
        "ranks_agree": _same_on_all_ranks(book),
        "master_seen": master is not None,  # ZeRO keeps an fp32 master copy to compare with
        "master_matches": master is None or bool(torch.allclose(master, book, atol=1e-6)),
        "moments_zeroed": _all_ranks(int(not zeroed)) == 0,
        "moments_seen": _all_ranks(len(moments)),
    })


def train(out: Path, ds_config: str, steps: int = 6, dead_code_steps: int = 1) -> list[dict]:
    from eric.train.codebook import codebook_hooks
    from eric.train.loop import LoopSettings, Trainer

    model = tiny_model(seed=0, dead_code_steps=dead_code_steps, state_init="kmeans", state_init_events=32)
    settings = LoopSettings(deepspeed_config=ds_config, precision="fp32", micro_batch_size=2, lr=1e-2,
                            max_steps=steps, checkpoint_every=100, log_every=1, eval_at_start=False,
                            progress=False)
    log: list[dict] = []
    trainer = Trainer(model, settings, train_set=list(range(48)), collate_fn=collate,
                      checkpoint_dir=out / "ckpt", seed=3, fingerprint="states",
                      on_step_end=lambda t: check_step(t, log), hooks=codebook_hooks(model))
    trainer.fit()
    if trainer.rank.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "steps.json").write_text(json.dumps(log, indent=1))
    return log


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--ds-config", default="infra/deepspeed/cpu.json")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    train(args.out, args.ds_config, args.steps)


if __name__ == "__main__":
    main()
