"""Every stage-one architecture of the registry runs the shared suite (tests/model/architecture_suite.py)."""

from __future__ import annotations

import importlib
import pkgutil

import tests.model
from eric.model.registry import builtin_kinds
from tests.model.architecture_suite import ArchitectureTests


def _subclasses(cls) -> set[type]:
    return {c for s in cls.__subclasses__() for c in {s, *_subclasses(s)}}


def test_every_registered_kind_has_a_collected_subclass_of_the_suite():
    for info in pkgutil.iter_modules(tests.model.__path__):
        if info.name.startswith("test_"):
            importlib.import_module(f"tests.model.{info.name}")
    suites = {c for c in _subclasses(ArchitectureTests)
              if c.__name__.startswith("Test") and c.__module__.startswith("tests.model.test_")}
    kinds = set(builtin_kinds())
    assert kinds == {"eric", "simctg", "hint", "plan_ahead", "discodvt"}  # the registry finds every module
    assert kinds <= {c.kind for c in suites}, f"kinds without an ArchitectureTests subclass: " \
        f"{sorted(kinds - {c.kind for c in suites})}"
    assert all(c.kind in kinds for c in suites), {c.__name__: c.kind for c in suites}
