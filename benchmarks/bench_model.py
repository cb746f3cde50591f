"""ERIC vs BART: parameters, one training step, sampling speed.

    python benchmarks/bench_model.py [--steps 6] [--bf16] [--threads 2]

1. Parameters at bart-base size (50,265 + 101 tokens): ERIC without the
   training-only sentence encoder / BartForConditionalGeneration (paper: +3%;
   must stay <= 1.05). Built on the meta device, so it is instant.
2. One training step (forward + backward + AdamW) at the embedded-default size:
   the `tiny` preset, batch 8, 128 source + 256 target tokens, synthetic texts with
   a unit every ~17 tokens and an entity in 73% of them (as in wikiplots-mini's
   training split; the paper reports ~50% for its corpora). Goal: ERIC / BART <= 1.25.
3. Sampling (top-p 0.9, KV cache), 256 new tokens, batch 8 and batch 1: ERIC's
   `generate` (plans an entity and a state at every sentence token) vs BART's
   transformers `generate`. Both models get the same logit bias on <sent> so that a
   random-weight model opens units (measured: about every 9 tokens, twice wikiplots-mini's rate;
   benchmarks/bench_sample.py --unit-rate real calibrates to ~17). Goal: ERIC / BART >= 0.95.
4. The floor: ERIC must do BART's work plus one pass of the sentence encoder over the
   units it encodes. `sentence_encoder_step` times that pass alone (forward + backward,
   then AdamW on its own parameters, an update ERIC's step also does) on the same batch
   and units, and the script prints ERIC / (BART + sentence encoder), with and without
   that AdamW update in the floor. Goal: <= 1.10.

Medians over --steps runs after one warm-up; the two models alternate so host
noise hits both alike. On a shared host, `--clock process` (CPU time of this
process) with `--threads 1` is steadier than wall time. Run with jemalloc
(LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2) as training does.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from transformers import BartConfig, BartForConditionalGeneration
from transformers.models.bart.modeling_bart import shift_tokens_right

from eric.config import ModelParams
from eric.data.tokenizer import SpecialTokenIds
from eric.model import EricConfig, EricForConditionalGeneration
from eric.model.units import UnitLayout
from eric.generate.sampler import transformers_step_options
from eric.model.variants import SIZE_PRESETS, build_config, parameter_counts
from record import record

SENT = 5
ENTITIES = list(range(6, 106))
UNIT_LENGTH = 17
BASELINES = {  # the baselines' parameter overhead at bart-base (PlanAhead: "additional parameters for planning")
    "bart": {"state_attention": False, "state": False, "entity": False},
    "simctg": {"kind": "simctg"}, "hint": {"kind": "hint"}, "plan_ahead": {"kind": "plan_ahead"},
    "plan_ahead (tied plan head)": {"kind": "plan_ahead", "options": {"tie_plan_head": True}},
    "discodvt": {"kind": "discodvt"},
}


def special_ids() -> SpecialTokenIds:
    return SpecialTokenIds(bos=0, eos=2, pad=1, sent=SENT, entities=ENTITIES)


def eric_config(size: str, vocab: int, variant: str = "eric") -> EricConfig:
    return build_config(ModelParams(size=size), variant, vocab, special_ids())


def bart_config(config: EricConfig) -> BartConfig:
    keys = [*SIZE_PRESETS["base"], "vocab_size", "max_position_embeddings", "dropout"]
    return BartConfig(**{k: getattr(config, k) for k in keys})


def parameter_ratio(vocab: int = 50265 + 101) -> tuple[int, int, float]:
    with torch.device("meta"):
        eric = EricForConditionalGeneration(eric_config("base", vocab))
        bart = BartForConditionalGeneration(bart_config(eric.config))
    n_eric = sum(p.numel() for n, p in eric.named_parameters() if not n.startswith("sentence_encoder."))
    n_bart = sum(p.numel() for p in bart.parameters())
    return n_eric, n_bart, n_eric / n_bart


def synthetic_batch(
    batch: int, source: int, target: int, vocab: int, entity_fraction: float = 0.73, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Full-length rows: <s> (<sent> words [+ a placeholder]) ... </s>."""
    g = torch.Generator().manual_seed(seed)
    words = lambda n: torch.randint(200, vocab, (n,), generator=g).tolist()  # noqa: E731
    labels, entity_ids, entity_positions = [], [], []
    for _ in range(batch):
        row, ents, poss = [0], [], []
        while len(row) < target - 1 - UNIT_LENGTH:
            unit = [SENT, *words(UNIT_LENGTH - 1)]
            if torch.rand(1, generator=g).item() < entity_fraction:
                k = int(torch.randint(0, 5, (1,), generator=g))
                at = int(torch.randint(1, len(unit), (1,), generator=g))
                unit[at] = ENTITIES[k]
                ents.append(k + 1)
                poss.append(len(row) + at)
            else:
                ents.append(0)
                poss.append(-1)
            row += unit
        row += words(target - 1 - len(row)) + [2]
        labels.append(row)
        entity_ids.append(ents)
        entity_positions.append(poss)
    width = max(len(e) for e in entity_ids)
    pad = lambda rows, v: torch.tensor([r + [v] * (width - len(r)) for r in rows])  # noqa: E731
    return {
        "input_ids": torch.tensor([[0, *words(source - 2), 2] for _ in range(batch)]),
        "attention_mask": torch.ones(batch, source, dtype=torch.long),
        "labels": torch.tensor(labels),
        "entity_ids": pad(entity_ids, -100),
        "entity_positions": pad(entity_positions, -1),
    }


CLOCK = time.perf_counter


def train_step(model, optimizer, batch, bf16: bool) -> float:
    start = CLOCK()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return CLOCK() - start


def plain_step(model, batch, optimizer, scheduler, device: str, bf16: bool) -> None:
    """One step of the hand-written reference loop the Trainer is measured against: autocast
    forward, backward, clipping at 1.0, AdamW, the schedule; reading the loss waits for it."""
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    loss.item()


SENTENCE_ENCODER_PASS: list[float] = []  # forward + backward alone, per sentence_encoder_step call


def sentence_encoder_step(model, optimizer, batch, bf16: bool) -> float:
    """The sentence encoder alone on the units ERIC's forward encodes (same positions):
    forward + backward (also kept in SENTENCE_ENCODER_PASS) + AdamW on its own parameters."""
    config = model.config
    start = CLOCK()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        decoder_ids = shift_tokens_right(batch["labels"], config.pad_token_id, config.decoder_start_token_id)
        layout = UnitLayout.from_ids(decoder_ids, config.sent_token_id, config.pad_token_id,
                                     batch["entity_ids"].shape[1])
        _, has_entity = model.planned_units(batch["entity_ids"], layout.unit_exists)
        positions = torch.where(has_entity, batch["entity_positions"], -1)
        events = model.unit_events(batch["labels"], has_entity, positions)
    events.float().sum().backward()
    SENTENCE_ENCODER_PASS.append(CLOCK() - start)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return CLOCK() - start


def generate(model, source: torch.Tensor, tokens: int, seed: int = 0, bf16: bool = False,
             decode_step: str = "dynamic") -> torch.Tensor:
    """Exactly `tokens` new tokens a row (top-p 0.9, KV cache; bf16 autocast if asked), by ERIC's
    `generate` or transformers' for BART, on the decoding step the sample stage would use
    (`sample.decode_step`: dynamic | static | compiled): the sequences."""
    device = source.device.type
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16), torch.no_grad():
        if isinstance(model, EricForConditionalGeneration):
            return model.generate(source, max_new_tokens=tokens, min_new_tokens=tokens, top_p=0.9,
                                  generator=torch.Generator(device=device).manual_seed(seed),
                                  decode_step=decode_step).sequences
        torch.manual_seed(seed)
        return model.generate(source, do_sample=True, top_p=0.9, top_k=0, max_new_tokens=tokens,
                              min_new_tokens=tokens, num_beams=1, **transformers_step_options(decode_step, model))


def sample_key(batch: int, decode_step: str) -> str:
    """`batch8` for the dynamic step (the key of the runs before decode steps were timed), else `batch8_compiled`."""
    return f"batch{batch}" + ("" if decode_step == "dynamic" else f"_{decode_step}")


def sample(model, batch_size: int, tokens: int, source: torch.Tensor, seed: int) -> float:
    start = CLOCK()
    generate(model, source[:batch_size], tokens, seed)
    return batch_size * tokens / (CLOCK() - start)


def alternate(*fns, runs: int) -> list[float]:
    """Median of each fn over `runs` rounds after one warm-up round; fns take turns."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, t in zip(fns, times):
            t.append(fn())
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="tiny", choices=sorted(SIZE_PRESETS))
    parser.add_argument("--vocab", type=int, default=8000 + 101, help="tokenizer length (BPE 8000 + ERIC tokens)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--source", type=int, default=128)
    parser.add_argument("--target", type=int, default=256)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--sample-tokens", type=int, default=256)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast for the training step")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--entity-fraction", type=float, default=0.73)
    parser.add_argument("--clock", choices=["wall", "process"], default="wall")
    parser.add_argument("--skip-sampling", action="store_true")
    parser.add_argument("--skip-training", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    global CLOCK
    CLOCK = time.process_time if args.clock == "process" else time.perf_counter

    figures: dict = {}
    n_eric, n_bart, ratio = parameter_ratio()
    figures.update(base_eric_params_m=round(n_eric / 1e6, 2), base_bart_params_m=round(n_bart / 1e6, 2),
                   base_param_ratio=round(ratio, 4), goal_param_ratio=1.05)
    print(f"parameters @ bart-base: ERIC {n_eric / 1e6:.2f}M (no sentence encoder) / BART {n_bart / 1e6:.2f}M "
          f"= {ratio:.4f}  (paper: ~1.03, limit 1.05)")
    counts = parameter_counts(BASELINES)  # every parameter, training-only modules included
    for name, n in counts.items():
        if name != "bart":
                print(f"parameters @ bart-base: {name} {n / 1e6:.2f}M / BART {counts['bart'] / 1e6:.2f}M "
                  f"= {n / counts['bart']:.4f}")

    torch.manual_seed(0)
    eric = EricForConditionalGeneration(eric_config(args.size, args.vocab))
    bart = BartForConditionalGeneration(bart_config(eric.config))
    n_sent = sum(p.numel() for n, p in eric.named_parameters() if n.startswith("sentence_encoder."))
    print(f"{args.size}: ERIC {sum(p.numel() for p in eric.parameters()) / 1e6:.2f}M "
          f"(sentence encoder {n_sent / 1e6:.2f}M), BART {sum(p.numel() for p in bart.parameters()) / 1e6:.2f}M")
    batch = synthetic_batch(args.batch, args.source, args.target, args.vocab, args.entity_fraction)
    if not args.skip_training:
        bart_batch = {k: batch[k] for k in ("input_ids", "attention_mask", "labels")}
        opt_e = torch.optim.AdamW(eric.parameters(), lr=1e-4)
        opt_b = torch.optim.AdamW(bart.parameters(), lr=1e-4)
        opt_s = torch.optim.AdamW(eric.sentence_encoder.parameters(), lr=1e-4)
        eric.train(), bart.train()
        t_e, t_b, t_s = alternate(lambda: train_step(eric, opt_e, batch, args.bf16),
                                  lambda: train_step(bart, opt_b, bart_batch, args.bf16),
                                  lambda: sentence_encoder_step(eric, opt_s, batch, args.bf16), runs=args.steps)
        t_pass = statistics.median(SENTENCE_ENCODER_PASS[1:])
        dtype = "bf16 autocast" if args.bf16 else "fp32"
        print(f"train step ({dtype}, batch {args.batch}, {args.source}+{args.target} tokens, "
              f"{torch.get_num_threads()} threads, {args.clock} clock): ERIC {t_e:.3f}s, BART {t_b:.3f}s, "
              f"ratio {t_e / t_b:.3f}; sentence encoder {t_s:.3f}s (forward + backward {t_pass:.3f}s + AdamW)")
        figures.update(train_step_eric_s=round(t_e, 4), train_step_bart_s=round(t_b, 4),
                       floor_ratio=round(t_e / (t_b + t_s), 3), goal_floor_ratio=1.10)
        print(f"floor ratio ERIC / (BART + sentence encoder): {t_e / (t_b + t_s):.3f} (goal <= 1.10); "
              f"without the sentence encoder's AdamW in the floor: {t_e / (t_b + t_pass):.3f}")
    if args.skip_sampling:
        record("bench_model", figures)
        return

    eric.eval(), bart.eval()
    bias = math.log(args.vocab / (UNIT_LENGTH - 2))  # p(<sent>) ~ 1/16 under near-uniform logits
    with torch.no_grad():
        eric.final_logits_bias[0, SENT] = bias
        bart.final_logits_bias[0, SENT] = bias
    source = batch["input_ids"]
    for size in (8, 1):
        runs = max(2, args.steps // 2)
        seed = iter(range(1000))
        s_e, s_b = alternate(lambda: sample(eric, size, args.sample_tokens, source, next(seed)),
                             lambda: sample(bart, size, args.sample_tokens, source, next(seed)), runs=runs)
        print(f"sampling batch {size} (top-p 0.9, {args.sample_tokens} tokens): ERIC {s_e:.0f} tok/s, "
              f"BART {s_b:.0f} tok/s, ratio {s_e / s_b:.3f} (goal >= 0.95)")
        figures[f"sample_ratio_batch{size}"] = round(s_e / s_b, 3)
    record("bench_model", figures)


if __name__ == "__main__":
    main()
