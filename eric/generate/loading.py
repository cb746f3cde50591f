"""Load the trained models from local folders (HF format, safetensors), with one-line errors.

    model, tokenizer = load_stage_one("models/stage_one/eric")   # ERIC or a baseline
    mentions, mention_tokenizer = load_mentions("models/mentions")  # BartForConditionalGeneration
    model, tokenizer, mentions, mention_tokenizer = load_for_sampling(model_dir, mentions_dir)

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


def _check_kind(path: Path, what: str, stage: str, is_expected, variant: str | None = None) -> None:
    """config.json's model_type must be the expected kind, and its variant (recorded since the
    variant name is saved) the one asked for: a folder of another model fails in one line."""
    import json

    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise SampleError(f"{path / 'config.json'}: unreadable ({_first_line(exc)}); run `{stage}` again") from None
    model_type = config.get("model_type", "?")
    if not is_expected(model_type):
        raise SampleError(f"{path / 'config.json'}: a {model_type!r} model, not a {what}; give the folder "
                          f"`{stage}` wrote")
    saved = config.get("variant")
    if variant is not None and saved is not None and saved != variant:
        raise SampleError(f"{path / 'config.json'}: the model of variant {saved!r}, not {variant!r}; give "
                          f"{variant}'s folder (`dvc repro train_stage_one@{variant}`)")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def _load(path: Path, what: str, stage: str, model_class, device: str, is_expected, variant: str | None = None):
    """(model in eval mode, tokenizer) from a folder checked first; a failure in one line with
    what to do, damaged weights named as such. `model_class(path)` picks the class."""
    from transformers import AutoTokenizer

    _check_folder(path, what, stage)
    _check_kind(path, what, stage, is_expected, variant)
    _check_written(path, stage)
    try:
        model = model_class(path).from_pretrained(path, local_files_only=True, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except SafetensorError as exc:
        raise SampleError(f"{path / 'model.safetensors'} is damaged ({_first_line(exc)}); "
                          f"restore it (`dvc checkout`) or run `{stage}` again") from None
    except (OSError, ValueError) as exc:
        raise SampleError(f"{path}: cannot load the {what} ({_first_line(exc)})") from None
    _check_finite(model, path, stage)
    return model.to(device).eval(), tokenizer


def _check_written(path: Path, stage: str) -> None:
    """The folder's files as the training stage wrote them (its manifest: sizes and hashes), so
    bytes changed inside intact weights are named before they reach sampling as NaN."""
    from eric.train.checkpoint import MANIFEST, verify_files

    if (path / MANIFEST).is_file() and (problem := verify_files(path)):
        raise SampleError(f"{path}: {problem} (damaged since it was saved); restore it (`dvc checkout`) "
                          f"or run `{stage}` again")


def _check_finite(model, path: Path, stage: str) -> None:
    """A folder without a manifest (saved before there was one, or by other code): NaN or
    infinite weights are named here rather than failing inside sampling."""
    import torch

    bad = [name for name, p in model.named_parameters() if p.is_floating_point() and not torch.isfinite(p).all()]
    if bad:
        raise SampleError(f"{path / 'model.safetensors'} holds NaN or infinite weights ({len(bad)} tensor(s), "
                          f"first {bad[0]}); restore it (`dvc checkout`) or run `{stage}` again")


def load_stage_one(model_dir: str | Path, device: str = "cpu", variant: str | None = None):
    """(the variant's model in eval mode, tokenizer) from a train_stage_one output folder; the class
    (ERIC or a baseline, all EricForConditionalGeneration subclasses) is read from config.json.
    With `variant`, a folder that holds another variant's model is refused."""
    from eric.model.registry import architecture_of

    return _load(Path(model_dir), "stage-one model", "dvc repro train_stage_one", architecture_of, device,
                 lambda model_type: model_type.startswith("eric"), variant)


def load_mentions(model_dir: str | Path, device: str = "cpu"):
    """(BartForConditionalGeneration in eval mode, tokenizer) from the train_mentions output folder."""
    from transformers import BartForConditionalGeneration

    return _load(Path(model_dir), "mention model", "dvc repro train_mentions",
                 lambda path: BartForConditionalGeneration, device, lambda model_type: model_type == "bart")


def is_two_stage(model) -> bool:
    """Whether `model` writes placeholders for a mention model (models saved before the
    setting existed were all two-stage)."""
    return getattr(model.config, "two_stage", True)


def load_for_sampling(model_dir: str | Path, mentions_dir: str | Path | None, device: str = "cpu",
                      variant: str | None = None):
    """(stage-one model, tokenizer, mention model, its tokenizer) for `sample_stories`; the mention
    model is loaded only for a two-stage model and a given folder (a one-stage model writes the
    names itself), else (None, None)."""
    model, tokenizer = load_stage_one(model_dir, device, variant)
    wanted = mentions_dir is not None and is_two_stage(model)
    return (model, tokenizer, *(load_mentions(mentions_dir, device) if wanted else (None, None)))
