"""Where ERIC's training FLOPs go at bart-base size, on the data's real shapes (no GPU needed).

    python benchmarks/bench_flops.py [--size base] [--micro-tokens 16384] [--rows 3000] [--batches 6] [--vocab N]

The models are built on the meta device, so nothing is computed: torch's FlopCounterMode
counts the forward + backward of ERIC and of transformers' BART of the same dimensions on
--batches micro-batches of the processed training split, packed by token budget as
benchmarks/gpu_train.py packs them (needs `data/processed` and `models/tokenizer`). Figures:

  step_tflop (each)              FLOPs per micro-batch, mean
  flop_ratio                     ERIC / BART: what an equally efficient ERIC would take longer
  sentence_encoder_share         the training-only sentence encoder's share of ERIC's FLOPs
  sentence_attention_share       its self-attention alone (block-diagonal over the whole
                                 target, projections excluded)
  unit_area_fraction             sum over units of length^2 / target length^2: what attention
                                 computed per unit (a block mask or variable-length kernels)
                                 would keep of that self-attention
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_train import build, encode_split, micro_flops, token_batches  # noqa: E402
from record import OUTPUTS, record  # noqa: E402

from eric.data.tokenizer import load_tokenizer  # noqa: E402

BART_KEYS = ("input_ids", "labels")  # no mask: its padding check reads a value (none on meta); dense either way


def unit_area(labels: torch.Tensor, sent_id: int) -> tuple[int, int]:
    """(sum of unit length^2, target length^2) over the rows of a batch's labels."""
    units = full = 0
    for row in labels:
        ids = row[row != -100].tolist()
        starts = [i for i, t in enumerate(ids) if t == sent_id] + [len(ids)]
        units += sum((b - a) ** 2 for a, b in zip(starts, starts[1:]))
        full += len(ids) ** 2
    return units, full


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="base", choices=["mini", "tiny", "base"])
    parser.add_argument("--vocab", type=int, default=50265 + 101, help="bart-base's vocabulary + ERIC's tokens")
    parser.add_argument("--split", type=Path, default=Path("data/processed/stage_one/train.parquet"))
    parser.add_argument("--tokenizer", type=Path, default=Path("models/tokenizer"))
    parser.add_argument("--micro-tokens", type=int, default=16384)
    parser.add_argument("--rows", type=int, default=3000, help="read only the split's first rows")
    parser.add_argument("--batches", type=int, default=6, help="micro-batches counted, spread over the lengths")
    parser.add_argument("--out-dir", type=Path, default=OUTPUTS)
    args = parser.parse_args(argv)
    encoded, collator = encode_split(args.split, load_tokenizer(args.tokenizer), 128, 512, args.rows)
    packed = token_batches(encoded, args.micro_tokens)
    chosen = [collator.pad([encoded[i] for i in b]) for b in packed[:: max(1, len(packed) // args.batches)]]
    chosen = chosen[: args.batches]
    result = {"size": args.size, "micro_tokens": args.micro_tokens, "batches": len(chosen)}
    for name in ("eric", "bart"):
        with torch.device("meta"):
            model = build(name, args.size, args.vocab, collator.ids).train()
        if name == "bart":  # SDPA's mask builder reads a value (none on meta); eager attention counts the same
            model.set_attn_implementation("eager")
        flops = [micro_flops(model, {k: v.to("meta") for k, v in batch.items() if name == "eric" or k in BART_KEYS},
                             bf16=False) for batch in chosen]
        result[f"{name}_step_tflop"] = sum(f["total"] for f in flops) / len(flops) / 1e12
        if name == "eric":
            total = sum(f["total"] for f in flops)
            result["sentence_encoder_share"] = sum(f["sentence_encoder"] for f in flops) / total
            result["sentence_attention_share"] = sum(f["sentence_attention"] for f in flops) / total
    result["flop_ratio"] = result["eric_step_tflop"] / result["bart_step_tflop"]
    units, full = map(sum, zip(*(unit_area(b["labels"], collator.ids.sent) for b in chosen)))
    result["unit_area_fraction"] = units / full
    for key, value in result.items():
        print(f"{key:28} {value:.4g}" if isinstance(value, float) else f"{key:28} {value}")
    record("bench_flops", result, args.out_dir)
    return result


if __name__ == "__main__":
    main()
