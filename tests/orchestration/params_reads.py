"""Which params.yaml settings a piece of code reads, recorded as it runs.

    with ParamsReads() as reads:
        stage.run.fn("eric", params_path)
    reads.keys   # {"seed", "model.max_source_length", "model.variants.eric.kind", ...}

While recording, every `eric.config.Params` that is validated (`load_params` and its kin) is
walked, and each of its sections (a pydantic `Section`, frozen) is known by its dotted place in
params.yaml. A read is then:
- an attribute of a section that is a setting (`params.train.lr`, `m.max_source_length` after
  `m = params.model`, `self.settings.lr` deep in the training loop: the object is the same);
- every setting a `model_dump` of a section returns (a dump is read whole: it is logged,
  hashed or written as it is);
- a section's own methods (`resolved()`, `effective_recipe()`, `form`) read through the two above.
A section built from another's settings is its view: `TrainParams.loop()` returns the loop's
settings of `train` (overridden ones excepted: `train_mentions` hands the mention writer's own),
so `settings.lr` in the loop is `train.lr`; `model_copy(update=...)` likewise (the updated
settings are not the file's). A setting read while a function of `IGNORED_FRAMES`
runs is not recorded (the resume fingerprint: it decides whether a checkpoint may be resumed,
not what a run computes).

Settings read on a branch the driven configuration does not take are not seen: the test that
uses this drives each stage on the configurations that take them (tests/orchestration/
test_dvc_params.py)."""

from __future__ import annotations

import sys
from typing import Any, Self

from pydantic import BaseModel

from eric.config import Params, Section, TrainParams

IGNORED_FRAMES = {("eric/train/job.py", "fingerprint")}


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def leaves(tree: dict, prefix: str = "") -> list[str]:
    """Dotted names of a nested dict's leaves (an empty mapping is a leaf: `options: {}`)."""
    found = []
    for key, value in tree.items():
        name = _join(prefix, str(key))
        found.extend(leaves(value, name) if isinstance(value, dict) and value else [name])
    return found


class ParamsReads:
    def __init__(self) -> None:
        self.keys: set[str] = set()
        self._places: dict[int, tuple[str, frozenset[str]]] = {}  # id(section) -> (dotted place, fields not its)
        self._alive: list[Any] = []  # the sections known, kept so that their ids are not reused
        self._paused = 0
        self._saved: dict[str, Any] = {}

    # ---- what is known -------------------------------------------------------------------
    def know(self, section: BaseModel, place: str, foreign: frozenset[str] = frozenset()) -> None:
        self._places[id(section)] = (place, foreign)
        self._alive.append(section)
        for name in type(section).model_fields:
            value = section.__dict__.get(name)
            if isinstance(value, BaseModel):
                self.know(value, _join(place, name))
            elif isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(item, BaseModel):
                        self.know(item, _join(place, name, str(key)))

    def _ignored(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if any(code.co_filename.endswith(path) and code.co_name == name for path, name in IGNORED_FRAMES):
                return True
            frame = frame.f_back
        return False

    def _record(self, section: BaseModel, names: list[str]) -> None:
        known = self._places.get(id(section))
        if known is None or self._paused or not names:
            return
        if self._ignored():
            return
        place, foreign = known
        self.keys.update(_join(place, name) for name in names if name.split(".")[0] not in foreign)

    # ---- the hooks ----------------------------------------------------------------------
    def __enter__(self) -> Self:
        reads = self
        plain_getattribute = Section.__getattribute__
        plain_dump = Section.model_dump
        plain_validate = Params.model_validate.__func__
        plain_loop = TrainParams.loop
        plain_copy = Section.model_copy

        def getattribute(section, name):
            value = plain_getattribute(section, name)
            if name.startswith("_") or name not in type(section).model_fields:
                return value
            if not isinstance(value, BaseModel) and not (
                    isinstance(value, dict) and any(isinstance(v, BaseModel) for v in value.values())):
                reads._record(section, [name])
            return value

        def model_dump(section, *args, **kwargs):
            dumped = plain_dump(section, *args, **kwargs)
            if isinstance(dumped, dict):
                reads._record(section, leaves(dumped))
            return dumped

        def model_validate(cls, *args, **kwargs):
            params = plain_validate(cls, *args, **kwargs)
            reads.know(params, "")
            return params

        def view(make, section, updated: dict):
            """`make()` builds a section from `section`'s settings and `updated`: the same place."""
            reads._paused += 1
            try:
                built = make()
            finally:
                reads._paused -= 1
            known = reads._places.get(id(section))
            if known is not None:
                reads.know(built, known[0], known[1] | frozenset(updated))
            return built

        def loop(section, **overrides):
            return view(lambda: plain_loop(section, **overrides), section, overrides)

        def model_copy(section, *, update=None, deep=False):
            return view(lambda: plain_copy(section, update=update, deep=deep), section, update or {})

        self._hooks = [(Section, "__getattribute__", getattribute), (Section, "model_dump", model_dump),
                       (Params, "model_validate", classmethod(model_validate)), (TrainParams, "loop", loop),
                       (Section, "model_copy", model_copy)]
        for owner, name, hook in self._hooks:
            self._saved[(owner, name)] = owner.__dict__.get(name)
            setattr(owner, name, hook)
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, _ in self._hooks:
            saved = self._saved.pop((owner, name))
            if saved is None:
                delattr(owner, name)
            else:
                setattr(owner, name, saved)
