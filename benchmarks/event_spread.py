"""How spread out the sentence encoder's event vectors e_n are before any training
(docs/state-space.md): random init vs a pretrained BART encoder.

    python benchmarks/event_spread.py [--init PATH_TO_BART_DIR] [--batches 20]

Builds the `eric` variant as the training stage does (params.yaml, the project's tokenizer,
or with --init the checkpoint's own tokenizer), encodes the gold units of the first
training batches, and prints the mean pairwise cosine and effective rank of e_n, how many
distinct states the random codebook gives them, and that count's usage perplexity.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def embedding_gradients(model, batch) -> None:
    """Where L_CL and L_LM send gradient at init: the LM's token embeddings (model.shared),
    the sentence encoder's layers, and (own embeddings) the sentence encoder's copy."""
    model.train()
    out = model(**batch)
    for name in ("lm_loss", "contrastive_loss"):
        model.zero_grad(set_to_none=True)
        getattr(out, name).backward(retain_graph=True)
        norms = {}
        for label, prefix in (("lm embeddings", "model.shared"), ("sentence encoder layers", "sentence_encoder.layers"),
                              ("sentence encoder embeddings", "sentence_encoder.embed_tokens")):
            grads = [p.grad for n, p in model.named_parameters() if n.startswith(prefix) and p.grad is not None]
            norms[label] = sum(float(g.norm()) ** 2 for g in grads) ** 0.5
        print(f"{name}: gradient norm " + ", ".join(f"{k} {v:.3g}" for k, v in norms.items()))
    model.eval()


def main() -> None:
    from eric.config import load_params, resolve_path
    from eric.data.collate import StageOneCollator
    from eric.data.tokenizer import build_tokenizer, load_tokenizer
    from eric.evaluate.state_analysis import gold_states
    from eric.model.losses import event_spread
    from eric.model.state_space import usage_perplexity
    from eric.model.variants import build_model

    parser = argparse.ArgumentParser()
    parser.add_argument("--init", default=None, help="a local BART checkpoint (also its tokenizer)")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--recipe", default="paper")
    args = parser.parse_args()

    overrides = {"model.state_space.recipe": args.recipe}
    if args.init:
        overrides.update({"model.init": args.init, "tokenizer.pretrained": args.init})
    params = load_params(ROOT / "params.yaml", overrides)
    m = params.model
    if args.init:
        tokenizer = build_tokenizer(None, pretrained=resolve_path(args.init), max_entities=m.max_entities)
    else:
        tokenizer = load_tokenizer(resolve_path(params.tokenizer.out_dir), m.max_entities)
    torch.manual_seed(params.seed)
    model = build_model(m, "eric", tokenizer).eval()
    import pyarrow.parquet as pq

    rows = pq.read_table(resolve_path(params.preprocess.out_dir) / "stage_one" / "train.parquet").to_pylist()
    collator = StageOneCollator(tokenizer, m.max_source_length, m.max_target_length, m.max_entities,
                                hard_negatives=False, seed=params.seed)
    ids, events = [], []
    for start in range(0, 8 * args.batches, 8):
        batch = collator(rows[start:start + 8])
        state_ids, e = gold_states(model, batch)
        ids.append(state_ids[state_ids >= 0])
        events.append(e[state_ids >= 0])
    ids, events = torch.cat(ids), torch.cat(events)
    embedding_gradients(model, collator(rows[:8]))
    cosine, rank = event_spread(events)
    counts = torch.bincount(ids, minlength=m.num_states)
    print(f"init={args.init or 'random'} units={events.shape[0]} e_n mean cosine={float(cosine):.3f} "
          f"effective rank={float(rank):.1f}/{m.state_dim} states={int((counts > 0).sum())}/{m.num_states} "
          f"usage perplexity={usage_perplexity(counts):.1f}")


if __name__ == "__main__":
    main()
