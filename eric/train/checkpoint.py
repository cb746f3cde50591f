"""Resumable DeepSpeed checkpoints, written atomically, and the final HF-format model.

Layout of a checkpoint root:
    step00000120/          a complete DeepSpeed checkpoint + trainer_state.json + rng_rank<r>.pt
    latest                 the tag to resume from (replaced atomically)
    .partial/              where a checkpoint is written before its rename; stale on a crash

A checkpoint only becomes visible through a directory rename and the `latest` file is
replaced with os.replace, so a `kill -9` at any moment leaves either the previous
checkpoint or the new one, never a half-written one. Each checkpoint's manifest.json,
written last, lists its files' sizes and hashes: a checkpoint damaged later on disk
(truncated, a file lost) is skipped on resume for the newest intact one, and the run says
so. Ranks must share the filesystem.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist

from eric.data.outdir import WRITE_FAILURES
from eric.train.errors import TrainError
from eric.train.runtime import Rank

STATE_FILE = "trainer_state.json"
MANIFEST = "manifest.json"  # every file's size and hash, written last (verify() checks it on resume)
LATEST = "latest"
PARTIAL = ".partial"


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if torch.cuda.is_available() and "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def safe_globals() -> list:
    """The only non-tensor classes DeepSpeed's ZeRO 0-2 checkpoints hold."""
    from deepspeed.runtime.fp16.loss_scaler import LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [LossScaler, ZeroStageEnum, fragment_address]


def use_safe_loading(engine) -> None:
    """DeepSpeed loads its own files with weights_only=False; swap in a loader that uses
    weights_only=True with the classes above allow-listed."""
    from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine

    if type(engine.checkpoint_engine) is not TorchCheckpointEngine:
        return  # a decoupled/fast engine was configured on purpose: keep it

    class WeightsOnlyCheckpointEngine(TorchCheckpointEngine):
        def load(self, path: str, map_location=None):
            with torch.serialization.safe_globals(safe_globals()):
                return torch.load(path, map_location=map_location, weights_only=True)

    engine.checkpoint_engine = WeightsOnlyCheckpointEngine(engine._config)


class CheckpointManager:
    def __init__(self, root: str | Path, rank: Rank, keep: int = 2, fingerprint: str = ""):
        self.root = Path(root)
        self.rank = rank
        self.keep = max(1, keep)
        self.fingerprint = fingerprint
        self._found: tuple[str | None] | None = None  # latest_tag's answer, checked once until a write

    # ---- reading -------------------------------------------------------------------
    def latest_tag(self) -> str | None:
        """The newest intact checkpoint: `latest` if its manifest checks, else the newest older
        one that does (a checkpoint damaged on disk after its save is skipped, and said so,
        once: the files are hashed once per run, not at every question)."""
        if self._found is None:
            self._found = (self._newest_intact(),)
        return self._found[0]

    def _newest_intact(self) -> str | None:
        pointer = self.root / LATEST
        if not pointer.is_file():
            return None
        latest = pointer.read_text().strip()
        tags = [latest, *sorted((p.name for p in self.root.glob("step*") if p.is_dir() and p.name < latest), reverse=True)]
        for tag in tags:
            problem = verify(self.root / tag)
            if problem is None:
                if tag != latest and self.rank.is_main:
                    _say_once(f"checkpoint {self.root / latest} is damaged; resuming from {self.root / tag}")
                return tag
            if self.rank.is_main and (self.root / tag).exists():
                _say_once(f"checkpoint {self.root / tag}: {problem}")
        if self.rank.is_main:
            _say_once(f"no intact checkpoint under {self.root}: training starts from step 0")
        return None

    def peek(self) -> dict | None:
        """The trainer state of the checkpoint a run would resume from, or None when there
        is none or it was written for other settings (different fingerprint)."""
        tag = self.latest_tag()
        if tag is None:
            return None
        state = json.loads((self.root / tag / STATE_FILE).read_text())
        if state.get("fingerprint") != self.fingerprint:
            return None
        if state.get("world_size") != self.rank.world_size:
            raise TrainError(
                f"checkpoint {self.root / tag} was written by {state.get('world_size')} ranks; "
                f"resume with the same number of ranks or delete {self.root}"
            )
        return state

    def load(self, engine) -> dict | None:
        """Restore engine (weights, optimizer, scheduler), RNG; return the trainer state."""
        state = self.peek()
        if state is None:
            return None
        tag = state["tag"]
        path, _ = engine.load_checkpoint(str(self.root), tag=tag)
        if path is None:
            raise TrainError(f"could not load DeepSpeed checkpoint {self.root / tag}")
        rng_file = self.root / tag / f"rng_rank{self.rank.rank}.pt"
        restore_rng(torch.load(rng_file, weights_only=True))
        return state

    # ---- writing -------------------------------------------------------------------
    def prepare(self) -> None:
        """Drop what a killed save left behind, and checkpoints of other settings."""
        if self.rank.is_main:
            shutil.rmtree(self.root / PARTIAL, ignore_errors=True)
            if self.latest_tag() is not None and self.peek() is None:
                self.clear()
            self.root.mkdir(parents=True, exist_ok=True)
        barrier()

    def save(self, engine, step: int, trainer_state: dict) -> Path:
        """All ranks call this. Writes under .partial/, then renames into place; a write that
        cannot succeed (disk full) is a TrainError with the previous checkpoint kept."""
        tag = f"step{step:08d}"
        partial = self.root / PARTIAL
        with _failed_write(partial, "the checkpoint", "the previous checkpoint is kept"):
            engine.save_checkpoint(str(partial), tag=tag, save_latest=False)
            torch.save(rng_state(), partial / tag / f"rng_rank{self.rank.rank}.pt")
        barrier()
        if self.rank.is_main:
            state = dict(trainer_state, tag=tag, fingerprint=self.fingerprint,
                         world_size=self.rank.world_size)
            with _failed_write(partial, "the checkpoint", "the previous checkpoint is kept"):
                write_atomic(partial / tag / STATE_FILE, json.dumps(state))
                write_manifest(partial / tag)  # last: what a later resume checks the files against
            final = self.root / tag
            shutil.rmtree(final, ignore_errors=True)
            os.replace(partial / tag, final)
            write_atomic(self.root / LATEST, tag)
            shutil.rmtree(partial, ignore_errors=True)  # DeepSpeed also drops a script there
            self._prune()
        self._found = None
        barrier()
        return self.root / tag

    def _prune(self) -> None:
        tags = sorted(p.name for p in self.root.glob("step*") if p.is_dir())
        for old in tags[: -self.keep]:
            shutil.rmtree(self.root / old, ignore_errors=True)

    def clear(self) -> None:
        self._found = None
        if self.rank.is_main:
            shutil.rmtree(self.root, ignore_errors=True)


def _digest(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path) -> None:
    """Every file of a checkpoint with its size and hash, written after all of them."""
    files = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "blake2b": _digest(p)}
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    write_atomic(folder / MANIFEST, json.dumps(files, indent=1))


def verify(folder: Path) -> str | None:
    """None when the checkpoint in `folder` is whole; else what is wrong with it, in words."""
    if not (folder / STATE_FILE).is_file() or not (folder / MANIFEST).is_file():
        return "incomplete (no trainer state or manifest)"
    return verify_files(folder)


def verify_files(folder: Path) -> str | None:
    """None when every file `folder`'s manifest lists has the size and hash it was written
    with (a checkpoint, or a saved model: save_pretrained_atomic writes one); else what differs."""
    manifest = folder / MANIFEST
    try:
        files = json.loads(manifest.read_text())
    except ValueError:
        return "its manifest is not readable"
    for rel, expected in files.items():
        path = folder / rel
        if not path.is_file():
            return f"{rel} is missing"
        if path.stat().st_size != expected["size"]:
            return f"{rel} has {path.stat().st_size} bytes, {expected['size']} were written"
        if _digest(path) != expected["blake2b"]:
            return f"{rel} differs from what was written"
    return None


def full_precision_state_dict(module, engine=None) -> dict:
    """The module's state dict with every parameter at its fp32 master value (ZeRO 1-3 and
    bf16 optimizers keep those apart from the low-precision module weights).
    Tied parameters stay one tensor, so save_pretrained still sees the tie."""
    from deepspeed.utils import safe_get_full_fp32_param

    state = module.state_dict()
    master: dict[int, torch.Tensor] = {}
    for name, param in module.named_parameters(remove_duplicate=False):
        if id(param) not in master:
            full = safe_get_full_fp32_param(param)
            value = full if full is not None else param.detach()
            master[id(param)] = value.float().cpu() if value.is_floating_point() else value.cpu()
        state[name] = master[id(param)]
    return state


_SAID: set[str] = set()


def _say_once(message: str) -> None:
    """A checkpoint problem on stderr once per process (the job and the trainer both ask)."""
    if message not in _SAID:
        _SAID.add(message)
        print(message, file=sys.stderr)


@contextmanager
def _failed_write(partial: Path, what: str, kept: str) -> Iterator[None]:
    """A write that cannot succeed here (disk full, a file-size limit, a read-only file system)
    as one line: the partial files removed, what was there before untouched."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in WRITE_FAILURES:
            raise
        shutil.rmtree(partial, ignore_errors=True)
        raise TrainError(f"cannot write {what} ({exc.strerror or exc}); {kept}, the partial files removed") from None


def save_pretrained_atomic(module, out_dir: str | Path, rank: Rank, tokenizer=None,
                           state_dict: dict | None = None) -> Path:
    """Final model (safetensors) + tokenizer in HF format, swapped in as a whole."""
    out_dir = Path(out_dir)
    if rank.is_main:
        tmp = out_dir.with_name(out_dir.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        with _failed_write(tmp, f"the model to {out_dir}", "an earlier model there is unchanged"):
            module.save_pretrained(tmp, state_dict=state_dict)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
            write_manifest(tmp)  # loading checks the weights against it (eric/generate/loading.py)
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out_dir)
    barrier()
    return out_dir
