"""A pairwise study: N shared inputs sampled with a seed, both systems' texts, and per
item which system sits on the left, balanced (half each way) and shuffled.

The public items carry no system names; the key (private) maps each item back to its
sample id and the left system, and is what `eric humaneval score` needs.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eric.humaneval.errors import HumanEvalError
from eric.humaneval.systems import System

KEY_FORMAT = "eric-humaneval-key"


@dataclass
class Item:
    item_id: str
    input: str
    left: str
    right: str


@dataclass
class Key:
    study_id: str
    systems: dict[str, dict]  # "a"/"b" -> name, source, sha256
    seed: int
    annotators: int
    items: list[dict]  # item_id, sample_id, left ("a" or "b")
    corpus: str = ""  # the MLflow experiment the scores go to
    format: str = KEY_FORMAT
    version: int = 1
    notes: list[str] = field(default_factory=list)

    def name(self, side: str) -> str:
        return self.systems[side]["name"]

    def left_of(self) -> dict[str, str]:
        return {item["item_id"]: item["left"] for item in self.items}


@dataclass
class Study:
    key: Key
    items: list[Item]


def build_study(a: System, b: System, n: int = 200, seed: int = 42, annotators: int = 3,
                inputs: dict[str, str] | None = None, corpus: str = "") -> Study:
    """Sample `n` inputs both systems wrote for (all of them when fewer), deterministic
    given the seed; inputs come from `inputs`, else from either system's file."""
    if n < 1 or annotators < 1:
        raise HumanEvalError("--n and --annotators must be at least 1")
    shared = sorted(set(a.texts) & set(b.texts), key=_natural)
    if not shared:
        raise HumanEvalError(f"{a.name} and {b.name} share no input ids (a file without ids pairs by line number)")
    sources = inputs or {**b.inputs, **a.inputs}
    missing = [i for i in shared if not sources.get(i)]
    if len(missing) == len(shared):
        raise HumanEvalError("no inputs to show: neither system's file has them; pass --inputs")
    notes = []
    if missing:
        notes.append(f"{len(missing)} shared ids have no input and were left out")
        shared = [i for i in shared if sources.get(i)]
    rng = random.Random(seed)
    chosen = rng.sample(shared, min(n, len(shared)))
    if len(chosen) < n:
        notes.append(f"only {len(chosen)} inputs in common: the study has {len(chosen)} items, not {n}")
    sides = ["a"] * ((len(chosen) + 1) // 2) + ["b"] * (len(chosen) // 2)
    rng.shuffle(sides)
    width = max(3, len(str(len(chosen))))
    items, key_items = [], []
    for number, (sample_id, left) in enumerate(zip(chosen, sides), start=1):
        item_id = f"{number:0{width}d}"
        texts = {"a": a.texts[sample_id], "b": b.texts[sample_id]}
        right = "b" if left == "a" else "a"
        items.append(Item(item_id, sources[sample_id], texts[left], texts[right]))
        key_items.append({"item_id": item_id, "sample_id": sample_id, "left": left})
    systems = {side: {"name": s.name, "source": s.source, "sha256": s.sha256} for side, s in (("a", a), ("b", b))}
    study_id = _study_id(systems, seed, key_items)
    return Study(Key(study_id, systems, seed, annotators, key_items, corpus=corpus, notes=notes), items)


def _natural(sample_id: str):
    return (0, int(sample_id), "") if sample_id.isdigit() else (1, 0, sample_id)


def _study_id(systems: dict, seed: int, key_items: list[dict]) -> str:
    """Short, stable and name-free: a hash of what the study contains."""
    blob = json.dumps([[s["sha256"] for s in systems.values()], seed, key_items], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def write_key(key: Key, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(key), indent=1, ensure_ascii=False) + "\n")
    return path


def read_key(path: str | Path) -> Key:
    path = Path(path)
    if not path.is_file():
        raise HumanEvalError(f"{path}: key file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise HumanEvalError(f"{path}: not a JSON key file") from None
    if not isinstance(data, dict) or data.get("format") != KEY_FORMAT:
        raise HumanEvalError(f"{path}: not a study key (written by `eric humaneval prepare` as key.json)")
    try:
        return Key(**data)
    except TypeError as exc:
        raise HumanEvalError(f"{path}: damaged key ({exc})") from None


def public_items(study: Study) -> list[dict]:
    """What annotators may see: ids, input and the two texts, no names."""
    return [{"study_id": study.key.study_id, **asdict(item)} for item in study.items]
