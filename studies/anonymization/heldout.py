"""Held-out texts for reading anonymization by eye: sets of 15 plots and 15 news-like texts.

    python -m studies.anonymization.heldout --wikibio PATH/wikibio.jsonl.gz

Writes outputs/<set>_<mode>.md (the anonymized targets, for reading) and
outputs/automated.json (the stage's own counts) for `preprocess.mentions` resolve and
paper, for three sets of 15 + 15 texts, none sharing a text: `dev` (seed 25), read while
the rules were written, `heldout` (seed 26), read once they were fixed (later rules came
from it), and `fresh` (seed 27), read once at the current rules and written from by none.
The by-eye counts are typed in outputs/by_eye.json; render.py makes the table.

Selection: plots from the shared wikiplots-mini corpus outside its first 40 stories,
which the tests read (every wikiplots-mini title is in the embedded corpus: the two
files are the same, so no plot is outside it); news from the shared wikibio-mini corpus
outside its first 25 lines (the embedded test fixture). Texts the stage would skip, or
with no tagged entity, are passed over.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from eric.config import PROJECT_ROOT, load_params
from eric.data.anonymize import anonymize
from eric.data.errors import SkipCounter
from eric.data.nlp import load_pipeline
from eric.data.pipeline import input_spans, segment, to_nlp_task
from eric.data.readers import read_corpus

HERE = Path(__file__).resolve().parent
OUTPUTS = HERE / "outputs"
SETS = {"dev": 25, "heldout": 26, "fresh": 27}  # seeds; issue 25
PER_DOMAIN = 15
SKIP_HEAD = {"plots": 40, "news": 25}
MODES = ("resolve", "paper")
DOMAINS = {"plots": ("wikiplots", "P"), "news": ("jsonl", "N")}


def candidates(domain: str, path: Path, seed: int) -> list:
    """The domain's stories past its skipped head, in a seeded order."""
    kind, _ = DOMAINS[domain]
    stories = list(read_corpus(kind, path, SkipCounter()))[SKIP_HEAD[domain]:]
    random.Random(seed).shuffle(stories)
    return stories


def segmented(domain: str, path: Path, pp, seed: int, exclude: set[str]) -> list[tuple[str, object, object]]:
    """(key, story, Segmented) for the first PER_DOMAIN usable stories, as preprocess cuts them."""
    kind, prefix = DOMAINS[domain]
    nlp = load_pipeline(split_sentences=kind != "wikiplots")
    chosen = []
    for story in candidates(domain, path, seed):
        if story.id in exclude:
            continue
        item = to_nlp_task(story, pp, SkipCounter())
        seg = item and segment(nlp(item[0]), item[1], pp, SkipCounter())
        if seg is not None and any(seg.spans):
            seg.input_spans = input_spans(nlp, seg, pp)
            chosen.append((f"{prefix}{len(chosen) + 1:02d}", story, seg))
        if len(chosen) == PER_DOMAIN:
            return chosen
    return chosen


def text_block(key: str, story, seg, anon) -> str:
    """One text for reading: its anonymized target, then each placeholder's surface forms."""
    forms: dict[str, list[str]] = {}
    for tag, mention in anon.mentions:
        forms.setdefault(tag, [])
        if mention not in forms[tag]:
            forms[tag].append(mention)
    units = "\n".join(f"{i}. {u}" for i, u in enumerate(anon.units, start=2))
    table = "; ".join(f"{tag} = {' / '.join(f)}" for tag, f in sorted(forms.items(), key=lambda t: int(t[0][2:-1])))
    return (f"## {key}: {story.title} (`{story.id}`)\n\n1. (input, not anonymized) {seg.input}\n{units}\n\n"
            f"Placeholders: {table or 'none'}. Automated: names_left {anon.names_left} "
            f"(ambiguous {anon.ambiguous}), replaced {len(anon.mentions)}.\n")


def run(paths: dict[str, Path]) -> dict:
    pp = load_params(PROJECT_ROOT / "params.yaml").preprocess
    automated: dict = {}
    seen: set[str] = set()
    for name, seed in SETS.items():
        texts = {domain: segmented(domain, path, pp, seed, seen) for domain, path in paths.items()}
        seen |= {story.id for chosen in texts.values() for _, story, _ in chosen}
        automated[name] = write_set(name, texts, pp)
    (OUTPUTS / "automated.json").write_text(json.dumps(automated, indent=2) + "\n")
    return automated


def write_set(name: str, texts: dict, pp) -> dict:
    """outputs/<name>_<mode>.md for each mode; the automated counts per mode and domain."""
    automated: dict = {}
    for mode in MODES:
        pages = [f"# Anonymization, {name} set, `preprocess.mentions: {mode}`\n"]
        for domain, chosen in texts.items():
            totals = {"replaced": 0, "names_left": 0, "ambiguous": 0}
            for key, story, seg in chosen:
                anon = anonymize(seg.units, seg.spans, pp.max_entities, mode=mode, known=seg.input_spans,
                                 other_names=seg.other_names)
                pages.append(text_block(key, story, seg, anon))
                totals["replaced"] += len(anon.mentions)
                totals["names_left"] += anon.names_left
                totals["ambiguous"] += anon.ambiguous
                automated.setdefault("texts", {})[key] = {"title": story.title, "id": story.id}
            totals["name_coverage"] = round(totals["replaced"] / max(1, totals["replaced"] + totals["names_left"]), 4)
            automated.setdefault(mode, {})[domain] = totals
        (OUTPUTS / f"{name}_{mode}.md").write_text("\n".join(pages))
    return automated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plots", type=Path, default=PROJECT_ROOT / "corpora" / "wikiplots-mini" / "plots.zip")
    parser.add_argument("--wikibio", type=Path, required=True, help="the shared wikibio-mini corpus (wikibio.jsonl.gz)")
    args = parser.parse_args()
    OUTPUTS.mkdir(exist_ok=True)
    automated = run({"plots": args.plots, "news": args.wikibio})
    print(json.dumps({s: {k: v for k, v in counts.items() if k != "texts"} for s, counts in automated.items()}, indent=2))


if __name__ == "__main__":
    main()
