"""A tiny BART and a synthetic copy-with-shift task: the engine's test bench.

Also a script (used by the kill/resume and two-rank tests):
    python -m tests.train.tiny OUT_DIR [--steps N] [--accum A] [--ds-config PATH] [--hold-at STEP]
    python -m torch.distributed.run --nproc_per_node 2 -m tests.train.tiny OUT_DIR ...
trains to N steps with checkpoints under OUT_DIR/ckpt and writes OUT_DIR/result.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from transformers import BartConfig, BartForConditionalGeneration

PAD, BOS, EOS, VOCAB = 1, 0, 2, 40


def tiny_bart(seed: int = 0, dropout: float = 0.0) -> BartForConditionalGeneration:
    torch.manual_seed(seed)
    config = BartConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=64, dropout=dropout,
        pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=EOS,
        forced_eos_token_id=None,
    )
    return BartForConditionalGeneration(config)


def copy_task(n: int, seed: int = 0, min_len: int = 4, max_len: int = 12) -> list[dict]:
    """Source: random tokens; target: the same tokens shifted by one id (learnable fast)."""
    g = torch.Generator().manual_seed(seed)
    examples = []
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
        tokens = torch.randint(4, VOCAB - 1, (length,), generator=g)
        examples.append({"source": tokens.tolist(), "target": (tokens + 1).tolist()})
    return examples


def collate(examples: list[dict]) -> dict:
    def pad(rows, value):
        width = max(len(r) for r in rows)
        return torch.tensor([r + [value] * (width - len(r)) for r in rows])

    sources = [[BOS] + e["source"] + [EOS] for e in examples]
    targets = [[BOS] + e["target"] + [EOS] for e in examples]
    input_ids = pad(sources, PAD)
    return {"input_ids": input_ids, "attention_mask": (input_ids != PAD).long(),
            "labels": pad(targets, -100)}


def lengths(examples: list[dict]) -> list[int]:
    return [len(e["source"]) + len(e["target"]) for e in examples]


def train_tiny(out: Path, steps: int = 12, micro: int = 4, accum: int = 1,
               ds_config: str = "infra/deepspeed/cpu.json", checkpoint_every: int = 3,
               dropout: float = 0.1, hold_at: int | None = None) -> dict | None:
    """Train the tiny BART on the copy task; returns (and on rank 0 writes) the result."""
    from eric.train.loop import LoopSettings, Trainer

    data = copy_task(64, seed=1)
    settings = LoopSettings(
        deepspeed_config=ds_config, precision="fp32", micro_batch_size=micro,
        grad_accum_steps=accum, lr=3e-3, max_steps=steps, checkpoint_every=checkpoint_every,
        log_every=1, eval_at_start=False, progress=False,
    )
    trainer = Trainer(
        tiny_bart(seed=0, dropout=dropout), settings, train_set=data, collate_fn=collate,
        val_set=copy_task(16, seed=2), train_lengths=lengths(data),
        checkpoint_dir=out / "ckpt", seed=7, fingerprint="tiny",
        on_step_end=None if hold_at is None else lambda trainer: _hold(trainer, out, hold_at),
    )
    result = trainer.fit()
    trainer.save_pretrained(out / "model")
    if not trainer.rank.is_main:
        return None
    summary = dict(result.summary(), history=result.history)
    (out / "result.json").write_text(json.dumps(summary, indent=1))
    return summary


def _hold(trainer, out: Path, step: int) -> None:
    """From `step` on (its checkpoint written), say so in OUT/held and wait to be killed: the
    kill test kills on that event, not within a window of time."""
    if trainer.state.step >= step:
        (out / "held").write_text(str(trainer.state.step))
        while True:
            time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--ds-config", default="infra/deepspeed/cpu.json")
    parser.add_argument("--checkpoint-every", type=int, default=3)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--hold-at", type=int, default=None, help="wait to be killed after this step (kill test)")
    args = parser.parse_args()
    train_tiny(args.out, args.steps, args.micro, args.accum, args.ds_config,
               args.checkpoint_every, args.dropout, args.hold_at)


if __name__ == "__main__":
    main()
