"""`corpus.kind: world`: EntityWorld stories written as the preprocess stage's outputs.

The same stage_one/ and stage_two/ Parquet files and stats.json as any corpus
(eric/data/schema.py), split by the same title hash, plus the ground truth in extra
stage-one columns (WORLD_COLUMNS). Placeholders come from the generator's own spans
(no NER): <ek> is the k-th character of the scene sentence, so a stage-one text can
be checked without its mentions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
from tqdm import tqdm

from eric.data.examples import stage_one_target, stage_two_row
from eric.data.outdir import Staging
from eric.data.parquet_io import SplitWriter
from eric.data.schema import STAGE_ONE, STAGE_TWO
from eric.data.split import assign_split
from eric.data.stats import PreprocessStats
from eric.data.anonymize import deanonymize
from eric.world.generate import Story, generate_stories
from eric.world.phrasings import PLACEHOLDER

STATE = pa.struct([
    ("location", pa.string()),
    ("condition", pa.string()),
    ("holds", pa.string()),  # null: nothing
    ("knows", pa.list_(pa.string())),  # placeholders
    ("spouse", pa.string()),
])
WORLD_COLUMNS = [
    ("world_cast", pa.list_(pa.string())),  # full names; index k is <ek>
    ("world_events", pa.list_(pa.string())),  # event type of each target unit
    ("world_focal", pa.list_(pa.string())),  # each unit's actor (the entity the planner should pick)
    ("world_states", pa.list_(pa.list_(STATE))),  # after each unit: every character's state, cast order
]
WORLD_STAGE_ONE = pa.schema(list(STAGE_ONE) + [pa.field(n, t) for n, t in WORLD_COLUMNS])


def stage_one_row(story: Story) -> dict:
    mentions = story.mentions()
    placeholders = {tag for tag, _ in mentions}
    return {
        "id": story.id,
        "title": story.id,
        "source": story.scene,
        "target": stage_one_target(story.units),
        "units": story.units,
        "unit_entities": [[f"<e{k}>" for k in _indices(unit)] for unit in story.units],
        "n_entities": len(placeholders),
        "mentions": [{"placeholder": t, "mention": m} for t, m in mentions],
        "world_cast": story.cast,
        "world_events": [e.kind for e in story.events],
        "world_focal": story.focal,
        "world_states": story.states,
    }


def _indices(unit: str) -> list[int]:
    return [int(m.group(1)) for m in PLACEHOLDER.finditer(unit)]


def named_text(row: dict) -> str:
    """The target units with names (for the Table-1 token counts)."""
    return deanonymize(" ".join(row["units"]), row["mentions"])


def write_world_corpus(cfg, out_dir: Path, progress: bool = True) -> PreprocessStats:
    """Generate `corpus.world.stories` stories into `out_dir` (checked by the preprocess
    entry point; built beside it and swapped in whole, as for any corpus)."""
    corpus, pp, world = cfg.corpus, cfg.preprocess, cfg.corpus.world
    started = time.perf_counter()
    staging = Staging(out_dir)
    tmp = staging.path
    one, two = SplitWriter(tmp / "stage_one", WORLD_STAGE_ONE), SplitWriter(tmp / "stage_two", STAGE_TWO)
    stats = PreprocessStats(corpus=corpus.name)
    stories = generate_stories(world.seed, world.stories, tuple(world.cast), pp.max_target_units, workers=pp.n_process)
    try:
        for story in tqdm(stories, total=world.stories, desc=f"generate {corpus.name}", disable=not progress):
            row = stage_one_row(story)
            split = assign_split(row["title"], pp.split_ratio)
            one.write(split, row)
            two_row = stage_two_row(row, pp.stage_two_separator)
            if two_row is not None:
                two.write(split, two_row)
            stats.splits[split].add(row["source"], named_text(row), len(row["units"]), row["n_entities"],
                                    mentions=len(row["mentions"]))  # every name is a generator span
        one.close()
        two.close()
        stats.seconds = time.perf_counter() - started
        summary = stats.to_dict()
        summary["world"] = {"seed": world.seed, "stories": world.stories, "cast": list(world.cast)}
        (tmp / "stats.json").write_text(json.dumps(summary, indent=2) + "\n")
    except BaseException:
        staging.abort()
        raise
    staging.commit()
    return stats
