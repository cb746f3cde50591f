"""JSON for metrics files: `json.dumps(tree, indent=2)`, except that a list of plain values
is written on one line.

EntityWorld's per-story counts are lists of a hundred numbers or more; indented, each would
take a line and a metrics file thousands of them. A tree without such lists (every metrics
file of a non-world corpus) comes out byte for byte as `json.dumps(tree, indent=2)`.
"""

from __future__ import annotations

import json

_SCALARS = (str, int, float, bool, type(None))


def dumps(tree, indent: int = 2, _level: int = 0) -> str:
    pad, inner = " " * (indent * _level), " " * (indent * (_level + 1))
    if isinstance(tree, dict) and tree:
        items = [f"{inner}{json.dumps(str(k))}: {dumps(v, indent, _level + 1)}" for k, v in tree.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(tree, (list, tuple)) and tree:
        if all(isinstance(v, _SCALARS) for v in tree):
            return "[" + ", ".join(json.dumps(v) for v in tree) + "]"
        return "[\n" + ",\n".join(f"{inner}{dumps(v, indent, _level + 1)}" for v in tree) + f"\n{pad}]"
    return json.dumps(tree)
