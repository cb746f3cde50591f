"""Load the trained models from local folders (HF format, safetensors), with one-line errors.

    model, tokenizer = load_stage_one("models/stage_one/eric")   # ERIC or a baseline
    mentions, mention_tokenizer = load_mentions("models/mentions")  # BartForConditionalGeneration

Both training stages save the tokenizer beside the weights, so each folder is complete.
"""

from __future__ import annotations

from pathlib import Path

from safetensors import SafetensorError

from eric.generate.errors import SampleError


def _check_folder(path: Path, what: str, stage: str) -> None:
    if not (path / "config.json").is_file():
        raise SampleError(f"{path}: no {what} here (expected config.json + model.safetensors; run `{stage}`)")
    if not any((path / name).is_file() for name in ("model.safetensors", "model.safetensors.index.json")):
        raise SampleError(f"{path}: no model.safetensors beside config.json (run `{stage}` again)")
    missing = [name for name in ("tokenizer_config.json", "tokenizer.json") if not (path / name).is_file()]
    if missing:
        raise SampleError(f"{path}: the tokenizer beside the {what} lacks {' and '.join(missing)} (run `{stage}` again)")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def _load(path: Path, what: str, stage: str, model_class, device: str):
    """(model in eval mode, tokenizer) from a folder checked first; a failure in one line with
    what to do, damaged weights named as such. `model_class(path)` picks the class."""
    from transformers import AutoTokenizer

    _check_folder(path, what, stage)
    try:
        model = model_class(path).from_pretrained(path, local_files_only=True, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except SafetensorError as exc:
        raise SampleError(f"{path / 'model.safetensors'} is damaged ({_first_line(exc)}); "
                          f"restore it (`dvc checkout`) or run `{stage}` again") from None
    except (OSError, ValueError) as exc:
        raise SampleError(f"{path}: cannot load the {what} ({_first_line(exc)})") from None
    return model.to(device).eval(), tokenizer


def load_stage_one(model_dir: str | Path, device: str = "cpu"):
    """(the variant's model in eval mode, tokenizer) from a train_stage_one output folder; the class
    (ERIC or a baseline, all EricForConditionalGeneration subclasses) is read from config.json."""
    from eric.model.registry import architecture_of

    return _load(Path(model_dir), "stage-one model", "dvc repro train_stage_one", architecture_of, device)


def load_mentions(model_dir: str | Path, device: str = "cpu"):
    """(BartForConditionalGeneration in eval mode, tokenizer) from the train_mentions output folder."""
    from transformers import BartForConditionalGeneration

    return _load(Path(model_dir), "mention model", "dvc repro train_mentions",
                 lambda path: BartForConditionalGeneration, device)
