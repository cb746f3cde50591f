"""The preprocess stage: corpus -> units -> anonymized examples -> Parquet + stats.

    read_corpus  ->  to_nlp_task (clean, pre-checks)  ->  spaCy nlp.pipe (batched,
    n_process)  ->  segment (units + entity spans)  ->  anonymize  ->  examples
    ->  split by title hash  ->  Parquet writers, stats.json

Every story either becomes an example or is skipped with a reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from tqdm import tqdm

from eric.config import Params, PreprocessParams, resolve_path
from eric.data.anonymize import anonymize
from eric.data.clean import clean_markup
from eric.data.errors import SkipCounter
from eric.data.examples import stage_one_row, stage_two_row
from eric.data.nlp import load_pipeline
from eric.data.parquet_io import DatasetWriter
from eric.data.readers import RawStory, read_corpus
from eric.data.segment import Segmented, clean_units, join_units, sentence_offsets, spans_by_unit
from eric.data.split import assign_split
from eric.data.stats import PreprocessStats


@dataclass(frozen=True)
class Task:
    """A story on its way through spaCy; `units` is None for raw text."""

    story: RawStory
    units: tuple[str, ...] | None
    truncated: bool = False


def to_nlp_task(story: RawStory, pp: PreprocessParams, skips: SkipCounter) -> tuple[str, Task] | None:
    """The text spaCy must read for `story`, or None (counted) if it cannot be used."""
    if story.units is not None:
        units = clean_units(story.units)
        if len(units) > pp.max_units_per_story:
            return skips.skip("too_many_units")
        if len(units) - 1 < pp.min_target_units:
            return skips.skip("too_few_units")
        units = units[: 1 + pp.max_target_units]
        if any(len(u) > pp.max_unit_chars for u in units):
            return skips.skip("unit_too_long")
        text, _ = join_units(units[1:])
        return text, Task(story, tuple(units))
    text = clean_markup(story.text or "")
    if not text:
        return skips.skip("empty_text")
    truncated = len(text) > pp.raw_char_budget
    return text[: pp.raw_char_budget], Task(story, None, truncated)


def segment(doc, task: Task, pp: PreprocessParams, skips: SkipCounter) -> Segmented | None:
    labels = set(pp.entity_labels)
    if task.units is not None:
        _, offsets = join_units(list(task.units[1:]))
        return Segmented(task.units[0], list(task.units[1:]), spans_by_unit(doc, offsets, labels))
    wanted = 1 + pp.max_target_units
    offsets = sentence_offsets(doc, wanted + 1)
    if task.truncated and len(offsets) <= wanted:
        offsets = offsets[:-1]  # the last sentence may be cut by the character budget
    offsets = offsets[:wanted]
    if len(offsets) - 1 < pp.min_target_units:
        return skips.skip("too_few_units")
    if any(end - start > pp.max_unit_chars for start, end in offsets):
        return skips.skip("unit_too_long")
    units = [doc.text[s:e] for s, e in offsets]
    return Segmented(units[0], units[1:], spans_by_unit(doc, offsets[1:], labels))


def _tasks(stories: Iterator[RawStory], pp: PreprocessParams, skips: SkipCounter):
    for story in stories:
        item = to_nlp_task(story, pp, skips)
        if item is not None:
            yield item


def run_preprocess(cfg: Params, progress: bool = True) -> PreprocessStats:
    corpus, pp = cfg.corpus, cfg.preprocess
    if corpus.kind == "world":  # generated, not read: EntityWorld writes its own sets
        from eric.world.corpus import write_world_corpus

        return write_world_corpus(cfg, progress)
    started = time.perf_counter()
    skips = SkipCounter()
    stories = read_corpus(corpus.kind, resolve_path(corpus.path), skips)
    if pp.max_stories:
        stories = islice(stories, pp.max_stories)
    nlp = load_pipeline(split_sentences=corpus.kind != "wikiplots")
    docs = nlp.pipe(_tasks(stories, pp, skips), as_tuples=True, n_process=pp.n_process, batch_size=pp.batch_size)
    stats = PreprocessStats(corpus=corpus.name)
    out_dir = resolve_path(pp.out_dir)
    writer = DatasetWriter(out_dir)
    try:
        for doc, task in tqdm(docs, desc=f"preprocess {corpus.name}", unit="story", disable=not progress):
            _write_example(doc, task, pp, skips, writer, stats)
    except BaseException:
        writer.abort()
        raise
    writer.commit()
    stats.skipped = skips.as_dict()
    stats.seconds = time.perf_counter() - started
    stats.write(out_dir / "stats.json")
    return stats


def _write_example(doc, task: Task, pp: PreprocessParams, skips, writer: DatasetWriter, stats) -> None:
    seg = segment(doc, task, pp, skips)
    if seg is None:
        return
    anon = anonymize(seg.units, seg.spans, pp.max_entities)
    story = task.story
    split = assign_split(story.title or story.id, pp.split_ratio)
    row = stage_one_row(story.id, story.title, seg.input, anon)
    writer.stage_one.write(split, row)
    two = stage_two_row(row, pp.stage_two_separator)
    if two is not None:
        writer.stage_two.write(split, two)
    stats.splits[split].add(seg.input, " ".join(seg.units), len(seg.units), anon.n_entities)
    stats.over_cap_mentions += anon.over_cap_mentions
    stats.stories_over_cap += anon.over_cap_mentions > 0
