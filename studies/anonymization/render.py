"""The anonymization table in docs/pipeline.md, from the committed by-eye counts.

    python -m studies.render    # refills the `anonymization` block (every generated block)

Reads outputs/by_eye.json (counted by reading outputs/<set>_<mode>.md) and
outputs/automated.json (heldout.py: the stage's own coverage figure on the same texts).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUTPUTS = HERE / "outputs"
DOMAINS = {"P": "plots", "N": "news"}
HEADER = ["set", "domain", "`mentions`", "texts", "name mentions", "left as text", "left %", "wrong merges",
          "automated `name_coverage`"]


def rows(by_eye: dict, automated: dict) -> list[list[str]]:
    out = []
    for set_name, texts in by_eye["sets"].items():
        for prefix, domain in DOMAINS.items():
            chosen = {k: v for k, v in texts.items() if k.startswith(prefix)}
            for mode in ("resolve", "paper"):
                counted = [v for v in chosen.values() if mode in v]
                if not counted:
                    continue
                mentions = sum(v["mentions"] for v in counted)
                left = sum(v[mode]["left"] for v in counted)
                merges = sum(v[mode]["wrong_merges"] for v in counted)
                coverage = automated.get(set_name, {}).get(mode, {}).get(domain, {}).get("name_coverage")
                out.append([set_name, domain, mode, str(len(counted)), str(mentions), str(left),
                            f"{100 * left / max(mentions, 1):.1f}", str(merges),
                            "–" if coverage is None else f"{100 * coverage:.1f}%"])
    return out


def table() -> str:
    by_eye = json.loads((OUTPUTS / "by_eye.json").read_text())
    automated = json.loads((OUTPUTS / "automated.json").read_text())
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---|---|" + "---:|" * (len(HEADER) - 3)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(by_eye, automated)]
    return ("\n".join(lines) + "\n\nCounted by eye from `studies/anonymization/outputs/by_eye.json` (per text, with a note "
            "for each miss); the automated column is `outputs/automated.json`, at the current rules for every set. dev: "
            "read at the rules' first version, resolve only; heldout: read once the rules stood, the texts later rules "
            "change re-read; fresh: read once at the rules before the last (the bracket rule came after it, the texts it "
            "changes re-read), resolve only.\n")


if __name__ == "__main__":
    print(table())
