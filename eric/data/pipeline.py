"""The preprocess stage: corpus -> units -> anonymized examples -> Parquet + stats.

    check out_dir  ->  read_corpus  ->  to_nlp_task (clean, pre-checks)  ->  skip
    duplicates  ->  spaCy nlp.pipe (batched, n_process)  ->  segment (units + entity
    spans)  ->  skip duplicate examples  ->  anonymize  ->  examples  ->  split by
    title hash  ->  Parquet writers, stats.json  ->  swap into out_dir

Units are sentences, or with `preprocess.unit: edu` elementary discourse units
(eric/data/edu.py): then the whole story, unit 1 included, is parsed, and input =
EDU 1, target = EDUs 2..16, as in the paper (which regards EDUs as its sentences).

Every story either becomes an example or is skipped with a reason.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path

from tqdm import tqdm

from eric.config import Params, PreprocessParams, resolve_path
from eric.data.anonymize import anonymize
from eric.data.clean import clean_markup
from eric.data.dedupe import Deduper
from eric.data.edu import presplit_doc, unit_offsets
from eric.data.errors import SkipCounter
from eric.data.examples import stage_one_row, stage_two_row
from eric.data.nlp import load_pipeline
from eric.data.outdir import WRITE_FAILURES, check_out_dir, output_lock, write_error
from eric.data.parquet_io import DatasetWriter
from eric.data.readers import RawStory, read_corpus
from eric.data.segment import Segmented, clean_units, join_units, other_names, sentence_offsets, spans_by_unit
from eric.data.split import assign_split
from eric.data.stats import PreprocessStats

ERIC_PACKAGE = Path(__file__).resolve().parent.parent


# Raw text is cut to this many times the character budget BEFORE markup cleaning:
# cleaning stays bounded per story, and markup rarely shrinks a text 8-fold.
MARKUP_HEADROOM = 8


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
        if len(units) - 1 < pp.min_target_units and (pp.unit == "sentence" or not units):
            return skips.skip("too_few_units")  # EDUs: counted after the parse
        units = units[: 1 + pp.max_target_units]  # a sentence holds at least one EDU
        if any(len(u) > pp.max_unit_chars for u in units):
            return skips.skip("unit_too_long")
        text, _ = join_units(units[1:] if pp.unit == "sentence" else units)
        return text, Task(story, tuple(units))
    raw = story.text or ""
    headroom = pp.raw_char_budget * MARKUP_HEADROOM
    text = clean_markup(raw[:headroom])
    if not text:
        return skips.skip("empty_text")
    truncated = len(raw) > headroom or len(text) > pp.raw_char_budget
    return text[: pp.raw_char_budget], Task(story, None, truncated)


def segment(doc, task: Task, pp: PreprocessParams, skips: SkipCounter) -> Segmented | None:
    labels = set(pp.entity_labels)
    if pp.unit == "edu":
        offsets = unit_offsets(
            doc, 1 + pp.max_target_units, pp.edu_rules, pp.edu_min_words, drop_last_sentence=task.truncated
        )
        return _from_offsets(doc, offsets, pp, skips, labels)
    if task.units is not None:
        _, offsets = join_units(list(task.units[1:]))
        return Segmented(task.units[0], list(task.units[1:]), spans_by_unit(doc, offsets, labels),
                         other_names=other_names(doc, labels))
    wanted = 1 + pp.max_target_units
    offsets = sentence_offsets(doc, wanted + 1)
    if task.truncated and len(offsets) <= wanted:
        offsets = offsets[:-1]  # the last sentence may be cut by the character budget
    return _from_offsets(doc, offsets[:wanted], pp, skips, labels)


def _from_offsets(doc, offsets, pp: PreprocessParams, skips: SkipCounter, labels: set[str]) -> Segmented | None:
    """Unit 1 is the input, the rest the target; too few or too long units skip the story."""
    if len(offsets) - 1 < pp.min_target_units:
        return skips.skip("too_few_units")
    if any(end - start > pp.max_unit_chars for start, end in offsets):
        return skips.skip("unit_too_long")
    units = [doc.text[s:e] for s, e in offsets]
    spans = spans_by_unit(doc, offsets, labels)
    return Segmented(units[0], units[1:], spans[1:], spans[0], other_names(doc, labels))


def _tasks(stories: Iterator[RawStory], pp: PreprocessParams, skips: SkipCounter, dedupe: Deduper, nlp=None):
    """(text or Doc, Task) pairs for nlp.pipe; `nlp` (its tokenizer) is needed for EDUs."""
    for story in stories:
        item = to_nlp_task(story, pp, skips)
        if item is None:
            continue
        text, task = item
        kept_id = dedupe.story(story.id, "\n".join(task.units) if task.units else text)
        if kept_id is None:
            skips.skip("duplicate")
            continue
        if kept_id != story.id:  # another story has this id: kept under a derived one (counted)
            task = replace(task, story=replace(story, id=kept_id))
            item = text, task
        if pp.unit == "edu" and task.units is not None:
            item = presplit_doc(nlp, task.units), task  # the parser keeps the given sentences
        yield item


# EntityWorld's writer (eric.world.corpus.write_world_corpus): its sets are generated, not read
WorldWriter = Callable[[Params, Path, bool], PreprocessStats]


def run_preprocess(
    cfg: Params, progress: bool = True, overwrite: bool = False, protect: dict[str, Path] | None = None,
    world: WorldWriter | None = None,
) -> PreprocessStats:
    """Write the example sets; `overwrite` allows replacing an out-dir eric did not
    write; `protect` names more paths the out-dir must not hold (the params file); `world`
    writes a `corpus.kind: world` corpus (given by the caller: eric.data sits below
    eric.world). A second run into the same out-dir meanwhile refuses in one line."""
    if cfg.corpus.kind == "world" and world is None:
        raise ValueError("corpus.kind world: pass world=eric.world.corpus.write_world_corpus")
    with output_lock(resolve_path(cfg.preprocess.out_dir)):
        return _preprocess(cfg, progress, overwrite, protect, world)


def _preprocess(cfg: Params, progress: bool, overwrite: bool, protect: dict[str, Path] | None,
                world: WorldWriter | None) -> PreprocessStats:
    corpus, pp = cfg.corpus, cfg.preprocess
    started = time.perf_counter()
    skips = SkipCounter()
    corpus_path = resolve_path(corpus.path)
    protected = {"the corpus": corpus_path, "the current folder": Path.cwd(), "the eric package": ERIC_PACKAGE}
    if corpus.kind == "world":  # generated, not read: EntityWorld writes its own sets
        out_dir = check_out_dir(resolve_path(pp.out_dir), overwrite, {**protected, **(protect or {})})
        return world(cfg, out_dir, progress)
    stories = read_corpus(corpus.kind, corpus_path, skips)  # a bad input is named before the out-dir
    out_dir = check_out_dir(resolve_path(pp.out_dir), overwrite, {**protected, **(protect or {})})
    if pp.max_stories:
        stories = islice(stories, pp.max_stories)
    nlp = load_pipeline(split_sentences=corpus.kind != "wikiplots", parse=pp.unit == "edu", model=pp.spacy_model)
    dedupe = Deduper()
    tasks = _tasks(stories, pp, skips, dedupe, nlp)
    docs = nlp.pipe(tasks, as_tuples=True, n_process=pp.n_process, batch_size=pp.batch_size)
    stats = PreprocessStats(corpus=corpus.name, mentions_mode=pp.mentions,
                            stop_words=frozenset(nlp.Defaults.stop_words))  # the tagger check's language
    writer = DatasetWriter(out_dir)
    try:
        for doc, task in tqdm(docs, desc=f"preprocess {corpus.name}", unit="story", disable=not progress):
            _write_example(doc, task, pp, skips, dedupe, writer, stats, nlp)
        stats.skipped = skips.as_dict()
        stats.id_collisions = dedupe.id_collisions
        stats.seconds = time.perf_counter() - started
        stats.write(writer.folder / "stats.json")
    except OSError as exc:
        writer.abort()
        if exc.errno in WRITE_FAILURES:  # disk full, a file-size limit: one line, nothing half-written left
            raise write_error(out_dir, exc) from None
        raise
    except BaseException:
        writer.abort()
        raise
    writer.commit()  # removes its staging and says why in one line when the final writes fail
    for line in stats.warnings():  # once per run (stats.json's tagger_check holds them too)
        print(f"warning: {line}", file=sys.stderr)
    return stats


def input_spans(nlp, seg: Segmented, pp: PreprocessParams) -> list:
    """Unit 1's entity spans: names it introduces are names in the target too (not replaced in it)."""
    if seg.input_spans is None:
        return spans_by_unit(nlp(seg.input), [(0, len(seg.input))], set(pp.entity_labels))[0]
    return seg.input_spans


def _write_example(doc, task: Task, pp: PreprocessParams, skips, dedupe: Deduper, writer: DatasetWriter, stats,
                   nlp) -> None:
    seg = segment(doc, task, pp, skips)
    if seg is None:
        return
    if dedupe.example(seg.input, *seg.units):
        return skips.skip("duplicate")
    anon = anonymize(seg.units, seg.spans, pp.max_entities, mode=pp.mentions, known=input_spans(nlp, seg, pp),
                     other_names=seg.other_names)
    story = task.story
    split = assign_split(story.title or story.id, pp.split_ratio)
    row = stage_one_row(story.id, story.title, seg.input, anon)
    writer.stage_one.write(split, row)
    two = stage_two_row(row, pp.stage_two_separator)
    if two is not None:
        writer.stage_two.write(split, two)
    stats.splits[split].add(
        seg.input, " ".join(seg.units), len(seg.units), anon.n_entities,
        mentions=len(anon.mentions), propagated=anon.propagated, names_left=anon.names_left,
        ambiguous=anon.ambiguous,
    )
    stats.add_capitals(split, seg.units, seg.spans, anon.units)
    stats.over_cap_mentions += anon.over_cap_mentions
    stats.stories_over_cap += anon.over_cap_mentions > 0
