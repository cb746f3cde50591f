"""DVC stage `tokenizer`: the tokenizer every model reads (HF format, loads with AutoTokenizer).

    python stages/tokenizer.py [params.yaml]

With `tokenizer.pretrained` (a local tokenizer directory, e.g. a downloaded
facebook/bart-base): that tokenizer plus <sent> and <e0>..<eK-1>. By default: a
byte-level BPE of `tokenizer.vocab_size` trained on the training split (stage-one
sources and targets, stage-two mention sequences), with BART's special tokens and
the same ERIC tokens. Outputs: `tokenizer.out_dir` and `tokenizer.metrics_path`
(vocabulary size, tokens per text, the share of texts longer than the model's
maximum lengths). A Prefect flow (`stage-tokenizer`) of three tasks.
"""

from __future__ import annotations

import json
import statistics

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, load_params, resolve_path
from eric.data.tokenizer import TokenizerError, build_tokenizer, special_token_ids, training_texts

SAMPLE = 2000  # texts measured for the length statistics


@stage_task
def read_params(params_path: str) -> Params:
    return load_params(params_path)


@stage_task
def build(params: Params):
    """Load-and-extend or train, then save in HF format."""
    t = params.tokenizer
    processed = resolve_path(params.preprocess.out_dir)
    texts = None if t.pretrained else training_texts(processed)
    pretrained = resolve_path(t.pretrained) if t.pretrained else None
    tokenizer = build_tokenizer(
        texts, pretrained=pretrained, vocab_size=t.vocab_size,
        max_entities=params.model.max_entities, min_frequency=t.min_frequency,
    )
    out_dir = resolve_path(t.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    return tokenizer


@stage_task
def measure(params: Params, tokenizer) -> dict:
    """How long the training texts are in tokens, against the model's limits."""
    import pyarrow.parquet as pq

    m = params.model
    table = pq.read_table(resolve_path(params.preprocess.out_dir) / "stage_one" / "train.parquet",
                          columns=["source", "target"]).slice(0, SAMPLE)
    sources = [len(ids) for ids in tokenizer(table.column("source").to_pylist())["input_ids"]]
    targets = [len(ids) + 2 for ids in tokenizer(table.column("target").to_pylist(),
                                                 add_special_tokens=False)["input_ids"]]
    ids = special_token_ids(tokenizer, m.max_entities)
    stats = {
        "vocab_size": len(tokenizer),
        "trained": params.tokenizer.pretrained is None,
        "sent_token_id": ids.sent,
        "texts_measured": len(targets),
        "target_tokens_mean": round(statistics.fmean(targets), 1) if targets else 0.0,
        "target_tokens_max": max(targets, default=0),
        "targets_over_max_length": _share(targets, m.max_target_length),
        "sources_over_max_length": _share(sources, m.max_source_length),
    }
    path = resolve_path(params.tokenizer.metrics_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stats, indent=2) + "\n")
    print(f"tokenizer: {stats['vocab_size']} tokens, targets {stats['target_tokens_mean']} tokens on average, "
          f"{stats['targets_over_max_length']:.1%} over {m.max_target_length}")
    return stats


def _share(lengths: list[int], limit: int) -> float:
    return round(sum(n > limit for n in lengths) / len(lengths), 4) if lengths else 0.0


@stage_flow("tokenizer")
def run(params_path: str = "params.yaml") -> dict:
    params = read_params(params_path)
    return measure(params, build(params))


if __name__ == "__main__":
    run_stage(run, ParamsError, TokenizerError)
