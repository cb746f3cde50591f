"""Load the trained models from local folders (HF format, safetensors), with one-line errors.

    model, tokenizer = load_stage_one("models/stage_one/eric")   # ERIC or a baseline
    mentions, mention_tokenizer = load_mentions("models/mentions")  # BartForConditionalGeneration

Both training stages save the tokenizer beside the weights, so each folder is complete.
"""

from __future__ import annotations

from pathlib import Path

from eric.generate.errors import SampleError


def _check_folder(path: Path, what: str, stage: str) -> None:
    if not (path / "config.json").is_file():
        raise SampleError(f"{path}: no {what} here (expected config.json + model.safetensors; run `{stage}`)")
    if not (path / "tokenizer_config.json").is_file():
        raise SampleError(f"{path}: no tokenizer beside the {what} (run `{stage}` again)")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def load_stage_one(model_dir: str | Path, device: str = "cpu"):
    """(the variant's model in eval mode, tokenizer) from a train_stage_one output folder; the class
    (ERIC or a baseline, all EricForConditionalGeneration subclasses) is read from config.json."""
    from transformers import AutoTokenizer

    from eric.model.registry import architecture_of

    path = Path(model_dir)
    _check_folder(path, "stage-one model", "dvc repro train_stage_one")
    try:
        model = architecture_of(path).from_pretrained(path, local_files_only=True, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise SampleError(f"{path}: cannot load the stage-one model ({_first_line(exc)})") from None
    return model.to(device).eval(), tokenizer


def load_mentions(model_dir: str | Path, device: str = "cpu"):
    """(BartForConditionalGeneration in eval mode, tokenizer) from the train_mentions output folder."""
    from transformers import AutoTokenizer, BartForConditionalGeneration

    path = Path(model_dir)
    _check_folder(path, "mention model", "dvc repro train_mentions")
    try:
        model = BartForConditionalGeneration.from_pretrained(path, local_files_only=True, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise SampleError(f"{path}: cannot load the mention model ({_first_line(exc)})") from None
    return model.to(device).eval(), tokenizer
