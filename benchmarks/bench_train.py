"""Training throughput: our DeepSpeed loop vs a plain PyTorch loop, same model and batches.

    python benchmarks/bench_train.py [--steps 30] [--rounds 2] [--batch 8] [--src 128] [--tgt 256]
                                     [--size tiny|base] [--precision auto|fp32|bf16]
                                     [--clock wall|process] [--threads N]

Plain = AdamW + linear decay + clip_grad_norm_ + loss.item() per step, written by hand.
Ours = `eric.train.loop.Trainer` (deepspeed.initialize, accumulation bookkeeping, meters,
progress bar; no validation; checkpoint time is excluded from its tokens/s, as here).
Both are timed per optimizer step, end to end (collate included); the first `--warmup`
steps are dropped and the median is reported. Rounds alternate plain/ours to share the
host's noise; `--clock process` counts CPU seconds instead of wall time, which a busy
shared host disturbs less.
Goal: overhead <= 10%. On a CUDA machine it runs the GPU config: bf16 ZeRO-2.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import BartConfig, BartForConditionalGeneration

from eric.train.ds_config import apply_precision, read_config
from eric.train.engine import build_optimizer
from eric.train.loop import LoopSettings, Trainer
from eric.train.runtime import bf16_supported, device_kind
from bench_model import plain_step
from record import record

SIZES = {  # the tiny preset of the embedded default, and bart-base dimensions
    "tiny": dict(d_model=256, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
                 vocab_size=16000),
    "base": dict(d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                 decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072,
                 vocab_size=50265),
}


def make_model(size: str) -> BartForConditionalGeneration:
    torch.manual_seed(0)
    return BartForConditionalGeneration(BartConfig(max_position_embeddings=512, **SIZES[size]))


def make_examples(n: int, src: int, tgt: int, vocab: int) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    return [{"input_ids": torch.randint(4, vocab, (src,), generator=g),
             "labels": torch.randint(4, vocab, (tgt,), generator=g)} for _ in range(n)]


def collate(examples: list[dict]) -> dict:
    input_ids = torch.stack([e["input_ids"] for e in examples])
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
            "labels": torch.stack([e["labels"] for e in examples])}


def use_bf16(precision: str) -> bool:
    return precision == "bf16" or (precision == "auto" and bf16_supported())


def plain_loop(args, examples, clock) -> list[float]:
    """Seconds of each step of a hand-written loop."""
    device = device_kind()
    model = make_model(args.size).to(device).train()
    optimizer, scheduler = build_optimizer(model, 5e-4, 0.01, total_steps=args.steps)
    marks = [clock()]
    for step in range(args.steps):
        rows = examples[step * args.batch:(step + 1) * args.batch]
        batch = {k: v.to(device) for k, v in collate(rows).items()}
        plain_step(model, batch, optimizer, scheduler, device, use_bf16(args.precision))
        if device == "cuda":
            torch.cuda.synchronize()
        marks.append(clock())
    return [b - a for a, b in zip(marks, marks[1:])]


def deepspeed_loop(args, examples, clock) -> list[float]:
    """Seconds of each step of our Trainer, end of step to end of step (its bookkeeping,
    meters and logging included). The last step, which writes the final checkpoint, is
    left out."""
    settings = LoopSettings(precision=args.precision, micro_batch_size=args.batch,
                            max_steps=args.steps, checkpoint_every=10**9, log_every=1,
                            eval_at_start=False, length_grouping=False, progress=False)
    marks: list[float] = []

    def mark(_trainer) -> None:
        if device_kind() == "cuda":
            torch.cuda.synchronize()
        marks.append(clock())

    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(make_model(args.size), settings, train_set=examples,
                          collate_fn=collate, checkpoint_dir=Path(tmp) / "ckpt", on_step_end=mark)
        trainer.fit()
    return [b - a for a, b in zip(marks, marks[1:-1])]


def tokens_per_s(durations: list[float], warmup: int, tokens_per_step: int) -> float:
    return tokens_per_step / statistics.median(durations[warmup:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--src", type=int, default=128)
    parser.add_argument("--tgt", type=int, default=256)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto")
    parser.add_argument("--clock", choices=["wall", "process"], default="wall",
                        help="process: CPU seconds of this process (robust on a shared host)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    args = parser.parse_args()
    if args.steps <= args.warmup:
        parser.error(f"--steps ({args.steps}) must exceed --warmup ({args.warmup}): the warm-up steps are not timed")
    if args.threads:
        torch.set_num_threads(args.threads)

    examples = make_examples(args.steps * args.batch, args.src, args.tgt, SIZES[args.size]["vocab_size"])
    tokens = args.batch * (args.src + args.tgt)
    clock = time.process_time if args.clock == "process" else time.perf_counter
    config = apply_precision(read_config("auto"), args.precision)
    mode = "bf16" if "bf16" in config else "torch_autocast" if "torch_autocast" in config else "fp32"
    print(f"device {device_kind()}, size {args.size}, batch {args.batch} x ({args.src} + {args.tgt}) "
          f"tokens, bf16 {use_bf16(args.precision)}, DeepSpeed ZeRO "
          f"{config['zero_optimization']['stage']} {mode}, clock {args.clock}, "
          f"torch threads {torch.get_num_threads()}")
    plain, ours = [], []
    for r in range(args.rounds):
        plain.append(tokens_per_s(plain_loop(args, examples, clock), args.warmup, tokens))
        ours.append(tokens_per_s(deepspeed_loop(args, examples, clock), args.warmup, tokens))
        print(f"round {r + 1}: plain {plain[-1]:,.0f} tok/s   deepspeed loop {ours[-1]:,.0f} tok/s")
    best_plain, best_ours = max(plain), max(ours)
    overhead = 100 * (best_plain / best_ours - 1)
    print(f"best of {args.rounds}: plain {best_plain:,.0f} tok/s, ours {best_ours:,.0f} tok/s, "
          f"overhead {overhead:+.1f}% (goal <= 10%) -> {'ok' if overhead <= 10 else 'OVER'}")
    record("bench_train", {"size": args.size, "batch": args.batch, "clock": args.clock,
                           "plain_tokens_per_s": round(best_plain), "ours_tokens_per_s": round(best_ours),
                           "overhead_percent": round(overhead, 1), "goal_overhead_percent": 10})


if __name__ == "__main__":
    main()
