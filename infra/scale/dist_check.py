"""A collective across every rank: proves a launch wires ranks and rendezvous.

    torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d \
        --rdzv_endpoint 127.0.0.1:29512 --rdzv_id check infra/scale/dist_check.py
Uses gloo, so it runs on CPU as on GPU nodes. Each rank prints one line.
"""

import os

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    expected = world * (world + 1) / 2
    node = os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", "?"))
    print(f"rank {rank}/{world} node {node}: all_reduce {total.item():g} (expected {expected:g})", flush=True)
    dist.destroy_process_group()
    if total.item() != expected:
        raise SystemExit(f"rank {rank}: all_reduce gave {total.item()}, expected {expected}")


if __name__ == "__main__":
    main()
