"""Codebook usage of a latent-code model (DiscoDVT) on the training split: the posterior's code
for every span of every training target, counted. Reported beside ERIC's states used.

    usage = training_code_usage(model, tokenizer, rows, batch_size=16)
    usage["codes_used"], usage["num_codes"]       # e.g. 37 of 256
"""

from __future__ import annotations

from collections import Counter

import torch
from tqdm.auto import tqdm

from eric.data.collate import StageOneCollator
from eric.model.state_space import usage_perplexity


def has_codes(model) -> bool:
    return hasattr(model, "posterior") and hasattr(model.config, "num_codes")


@torch.no_grad()
def training_code_usage(model, tokenizer, rows: list[dict], *, batch_size: int = 16, max_source_length: int = 128,
                        max_target_length: int = 512, progress: bool = True) -> dict:
    """codes_used / num_codes, the spans counted, usage perplexity (exp entropy) and the top code."""
    model.eval()
    collator = StageOneCollator(tokenizer, max_source_length, max_target_length, max_entities=model.config.max_entities)
    counts: Counter = Counter()
    starts = range(0, len(rows), batch_size)
    for start in tqdm(starts, desc="code usage", disable=not progress, unit="batch", leave=False):
        labels = collator(rows[start : start + batch_size])["labels"].to(model.device)
        codes = model.posterior(labels).indices
        counts.update(codes[codes >= 0].tolist())
    return code_summary(counts, model.config.num_codes)


def code_summary(counts: Counter, num_codes: int) -> dict:
    total = sum(counts.values())
    top = counts.most_common(1)
    perplexity = usage_perplexity(torch.tensor(list(counts.values()))) if total else 1.0  # exp(0), as before
    return {"codes_used": len(counts), "num_codes": num_codes, "code_spans": total,
            "code_perplexity": round(perplexity, 2),
            "top_code": {"code": top[0][0], "share": top[0][1] / total} if top else None}
