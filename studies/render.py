"""Every published number, rendered from committed outputs.

    python -m studies.render            # rewrite what changed
    python -m studies.render --check    # exit 1 when a generated block or page is stale

A generated block in README.md or docs/*.md sits between

    <!-- BEGIN generated: NAME -->
    <!-- END generated: NAME -->

and is rewritten from the function BLOCKS[NAME] (its source: the default pipeline's
committed metrics, a study's outputs, the benchmarks' JSON; studies/retired.py: what retired
runner scripts kept). Whole generated pages: each study's results.md; prose lives in the
Markdown files. tests/test_generated_docs.py fails when any of them differs from what the
committed outputs produce (the pipeline's own outputs read as git's HEAD has them, so a
user's `dvc repro` does not turn it red).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from eric.config import PROJECT_ROOT, Params
from eric.evaluate.report import ReportInputs, analysis_rows, display_name, table_rows, training_rows
from eric.evaluate.report import ANALYSIS_COLUMNS, TRAINING_COLUMNS
from eric.evaluate.report import markdown_table, number, text_table
from eric.evaluate.scoring import METRIC_NAMES
from eric.evaluate.headline import MATCHED
from eric.evaluate.readme_headline import readme_block
from eric.evaluate.intervals import seed_interval
from eric.evaluate.world_metrics import WORLD_HEADER, world_rows
from benchmarks.blocks import BLOCKS as BENCHMARK_BLOCKS
from studies.anonymization.render import table as anonymization_table
from studies.bounded import metric_interval
from studies.currency import older, retired_note, study_drift
from studies.retired import BLOCKS as RETIRED_BLOCKS
from studies.state_predictor_page import BLOCKS as STATE_PREDICTOR_BLOCKS
from studies.entityworld_page import BLOCKS as ENTITYWORLD_BLOCKS
from studies.spec import StudySpec, all_studies, load_study

BLOCK = re.compile(r"(<!-- BEGIN generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- END generated: (?P=name) -->)", re.S)
DOC_FILES = ("README.md", "docs/*.md")


# --- the default pipeline (committed dvc.lock + metrics/) ---------------------------------

def pipeline_text(rel: str) -> str | None:
    """What `dvc repro` reads and writes (params.yaml, metrics/, data/processed/stats.json), as
    the workspace has it; the docs test points this at git's HEAD (the committed run)."""
    path = PROJECT_ROOT / rel
    return path.read_text() if path.is_file() else None


def pipeline_json(rel: str) -> dict | None:
    text = pipeline_text(rel)
    return None if text is None else json.loads(text)


def _drift(spec: StudySpec, name: str):
    """A kept configuration's drift against the code and the pipeline's params.yaml and dvc.lock."""
    return study_drift(spec, name, PROJECT_ROOT, pipeline_text)


def pipeline_params():
    return Params.model_validate(yaml.safe_load(pipeline_text("params.yaml")) or {})


def pipeline_inputs(params) -> ReportInputs:
    """The committed metrics of `dvc repro` on params.yaml, as the report reads them (B-1 at
    equal length from the report's headline files: it needs every variant's samples)."""
    evaluate = {v: pipeline_json(f"metrics/evaluate/{v}.json") for v in params.variants}
    train = {v: pipeline_json(f"metrics/train/{v}.json") for v in params.variants}
    heads = {v: pipeline_json(f"{params.evaluate.headline_dir}/{v}.json") or {} for v in params.variants}
    return ReportInputs({v: m for v, m in evaluate.items() if m is not None},
                        training={v: t for v, t in train.items() if t is not None},
                        matched={v: h[MATCHED] for v, h in heads.items() if h.get(MATCHED) is not None})


def headline() -> str:
    params = pipeline_params()
    inputs = pipeline_inputs(params)
    if not inputs.metrics:
        return "_No committed run of the pipeline: `dvc repro` writes `metrics/`._\n"
    return readme_block(inputs, _pipeline_about(params, inputs))


def _pipeline_about(params, inputs: ReportInputs) -> str:
    first = next(iter(inputs.metrics.values()), {})
    size = f"{params.model.size} preset" if params.model.init is None else "from model.init"
    parts = [params.corpus.name, size, f"{params.train.max_steps} optimizer steps per model"]
    if first.get("n_texts"):
        parts.append(f"{first['n_texts']} test inputs")
    return ", ".join(parts)


def corpus_stats() -> str:
    stats = pipeline_json("data/processed/stats.json")
    if not stats:
        return "_No committed `data/processed/stats.json`: `dvc repro preprocess` writes it._\n"
    splits = [s for s in ("train", "val", "test") if isinstance(stats.get(s), dict)]
    keys = [k for k, v in stats[splits[0]].items() if isinstance(v, (int, float))] if splits else []
    rows = [[split, *(number(stats[split].get(k)) for k in keys)] for split in splits]
    skipped = ", ".join(f"{k} {number(v)}" for k, v in sorted((stats.get("skipped") or {}).items())) or "none"
    counts = (f"{stats.get('corpus', 'corpus')}: {number(stats.get('stories_in'))} stories in = "
              f"{number(stats.get('examples_out'))} examples out + {number(stats.get('skipped_total'))} skipped ({skipped}).")
    return markdown_table(["split", *keys], rows) + "\n\n" + counts + "\n"


# --- studies ---------------------------------------------------------------------------

def study_inputs(spec: StudySpec, configuration: str) -> ReportInputs:
    """A kept configuration's metrics, its variants in the order its params.yaml lists them."""
    files = spec.metrics(configuration)
    evaluate = {Path(p).stem: m for p, m in files.items() if p.startswith("metrics/evaluate/")}
    train = {Path(p).stem: m for p, m in files.items() if p.startswith("metrics/train/") and Path(p).stem != "mentions"}
    order = spec.variants(configuration) or sorted(evaluate)
    return ReportInputs({v: evaluate[v] for v in order if v in evaluate},
                        training={v: train[v] for v in order if v in train})


def study_tables(spec: StudySpec) -> str:
    """Every configuration of a study: Table 2, the analyses, the training budget."""
    parts, missing = [], [name for name in spec.configurations if not spec.is_done(name)]
    for name in spec.configurations:
        run = spec.run(name)
        if run is None:
            continue
        inputs = study_inputs(spec, name)
        parts += [f"**{name}** ({_provenance(spec, name, run)})", "", *_older_code(spec, name),
                  markdown_table(["Model", *METRIC_NAMES], table_rows(inputs)), "",
                  markdown_table(["Model", *ANALYSIS_COLUMNS], analysis_rows(inputs)), "",
                  markdown_table(["Model", *TRAINING_COLUMNS], training_rows(inputs)), ""]
        world = world_rows(inputs.metrics, display_name)
        if world:
            parts += [markdown_table(WORLD_HEADER, world), ""]
    if missing:
        folder = spec.folder.relative_to(PROJECT_ROOT)
        parts.append(f"**Not run at this commit** ({len(missing)} of {len(spec.configurations)}): "
                     f"{', '.join(f'`{n}`' for n in missing)}; `python flows/study.py {folder}` runs them.\n")
    if (note := retired_note(spec)) is not None:
        parts.append(f"_Also kept: {note} (tables from them: the docs page named above)._\n")
    return "\n".join(parts)


def _provenance(spec: StudySpec, name: str, run: dict) -> str:
    folder = (spec.outputs / name).relative_to(PROJECT_ROOT)
    dirty = ", uncommitted changes" if run.get("dirty") else ""
    return f"`{folder}`, commit {run['commit'][:7]}{dirty}, {run['finished'][:10]}"


def _older_code(spec: StudySpec, name: str) -> list[str]:
    """A warning paragraph when the kept run's inputs differ from the current code and params."""
    drift = _drift(spec, name)
    if not older(drift):
        return []
    return [f"> **Ran at older code.** {drift.describe()}. Rerun: {_rerun(spec, name, '--stale')}.", ""]


def _rerun(spec: StudySpec, name: str, flag: str = "") -> str:
    folder = spec.folder.relative_to(PROJECT_ROOT)
    return f"`python flows/study.py {folder} --only {name}{' ' + flag if flag else ''}`"


def study_page(spec: StudySpec) -> str:
    folder = spec.folder.relative_to(PROJECT_ROOT)
    head = [f"# {spec.title}", "", spec.about.strip(), "",
            f"Rerun what is missing: `python flows/study.py {folder}` (`--force` reruns everything). "
            "Rendered by `python -m studies.render` from `outputs/`.", "", ""]
    return "\n".join(head) + study_tables(spec) + (seeds_table(spec) if spec.across_seeds else "")


def seeds_table(spec: StudySpec, first: str = "eric", second: str = "bart", metrics=METRIC_NAMES) -> str:
    """Per Table-2 metric: each variant's mean over the kept configurations (one seed each) with
    its 95% t interval (stopped at the metric's range, studies/bounded.py), and `first` minus
    `second` per seed (paired: the same test inputs), whose interval is never stopped."""
    kept = {name: study_inputs(spec, name).metrics for name in spec.configurations if spec.is_done(name)}
    kept = {name: run for name, run in kept.items() if first in run and second in run}
    runs = list(kept.values())
    if len(runs) < 2:
        return "\n**Across seeds**: needs two kept configurations with both models.\n"
    a, b = display_name(first), display_name(second)
    rows = []
    for metric in metrics:
        pairs = [(run[first].get(metric), run[second].get(metric)) for run in runs]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        if not pairs:
            continue
        differences = [x - y for x, y in pairs]
        rows.append([metric, metric_interval(metric, [x for x, _ in pairs]).format(2),
                     metric_interval(metric, [y for _, y in pairs]).format(2), seed_interval(differences).format(2),
                     ", ".join(f"{d:+.2f}" for d in differences)])
    header = ["metric", f"{a}: mean [95% interval]", f"{b}: mean [95% interval]", f"{a} - {b}: mean [95% interval]",
              f"{a} - {b} per seed"]
    late = [n for n in kept if older(_drift(spec, n))]
    note = (f"\n_Ran at older code: {', '.join(late)} ({spec.folder.relative_to(PROJECT_ROOT)}/results.md says "
            "what changed since)._\n") if late else ""
    return (f"\n**Across seeds** ({len(runs)} seeds: {', '.join(kept)}; a model's interval stops at its "
            "metric's range, the difference's never does):"
            "\n\n" + markdown_table(header, rows) + "\n" + note)


def studies_index() -> str:
    rows = []
    for spec in all_studies(PROJECT_ROOT):
        done = [n for n in spec.configurations if spec.is_done(n)]
        current = sum(1 for n in done if (d := _drift(spec, n)) is not None and d.current)
        state = f"{len(done)}/{len(spec.configurations)} configurations kept, {current} at this code"
        if retired_note(spec):
            state += f"; outputs of the retired runner `{spec.retired.runner}` in `retired/`"
        rows.append([f"`studies/{spec.name}`", spec.title, state, f"`python flows/study.py studies/{spec.name}`"])
    return text_table(["study", "what", "outputs", "rerun"], rows)


def _study_block(name: str) -> Callable[[], str]:
    return lambda: study_tables(load_study(PROJECT_ROOT / "studies" / name))


# --- the registry and the files ---------------------------------------------------------

# --- EntityWorld's sample story (generated, so it always matches the generator) -----------

def world_sample(seed: int = 42, gap: int = 4) -> str:
    """The first story of the seed's corpus where a captive escapes `gap`+ units after the capture."""
    from eric.world.generate import generate_stories

    for story in generate_stories(seed, 2000):
        units = _escape_after_capture(story, gap)
        if units:
            return _sample_story(story, *units)
    return "_No story of the first 2,000 has a late escape._\n"


def _escape_after_capture(story, gap: int) -> tuple[int, int] | None:
    for i, event in enumerate(story.events):
        if event.kind == "capture":
            for j in range(i + gap, len(story.events)):
                if story.events[j].kind == "escape" and story.events[j].a == event.b:
                    return i, j
    return None


def _sample_story(story, capture: int, escape: int) -> str:
    from eric.world.phrasings import tag

    cast = ", ".join(f"`{tag(k)}` {name.split()[0]}" for k, name in enumerate(story.cast))
    rows = []
    for n, (unit, event, states) in enumerate(zip(story.units, story.events, story.states)):
        s = states[event.a]
        held = f", holds the {s['holds']}" if s["holds"] else ""
        rows.append([str(n + 2), f"`{unit}`", event.kind, f"`{tag(event.a)}` {s['location']}, {s['condition']}{held}"])
    who = tag(story.events[escape].a)
    return (f"Story `{story.id}`. Input: `{story.scene}` ({cast}.)\n\n"
            + text_table(["#", "stage-one unit", "event", "focal: state after"], rows) + "\n"
            + text_table(["captive", "captured at unit", "escapes at unit", "units later"],
                         [[f"`{who}`", str(capture + 2), str(escape + 2), str(escape - capture)]]))


BLOCKS: dict[str, Callable[[], str]] = {
    "headline": headline,
    "corpus-stats": corpus_stats,
    "studies": studies_index,
    "ablations": _study_block("ablations"),
    "baselines": _study_block("baselines"),
    "world-sample": world_sample,
    "anonymization": anonymization_table,
    "seeds-headline": lambda: seeds_table(load_study(PROJECT_ROOT / "studies" / "seeds"),
                                          metrics=("B-1", "MSJ-2", "MAUVE")).lstrip("\n"),
    **BENCHMARK_BLOCKS,
    **RETIRED_BLOCKS,
    **STATE_PREDICTOR_BLOCKS,
    **ENTITYWORLD_BLOCKS,
}


def render_text(text: str, where: str = "", rendered: dict[str, str] | None = None) -> str:
    """`text` with every generated block refilled; `rendered` caches blocks across files."""
    rendered = {} if rendered is None else rendered

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise KeyError(f"{where}: unknown generated block {name!r} (known: {', '.join(BLOCKS)})")
        if name not in rendered:
            body = BLOCKS[name]()
            rendered[name] = body if not body or body.endswith("\n") else body + "\n"  # the END marker on a line of its own
        return match.group(1) + rendered[name] + match.group(4)

    return BLOCK.sub(fill, text)


def expected_files() -> dict[Path, str]:
    """Every generated file and every file with generated blocks -> its rendered text."""
    out, rendered = {}, {}
    for pattern in DOC_FILES:
        for path in sorted(PROJECT_ROOT.glob(pattern)):
            text = path.read_text()
            if BLOCK.search(text):
                out[path] = render_text(text, str(path.relative_to(PROJECT_ROOT)), rendered)
    for spec in all_studies(PROJECT_ROOT):
        out[spec.folder / "results.md"] = study_page(spec)
    return out


def _differing() -> dict[Path, str]:
    return {p: text for p, text in expected_files().items() if not p.is_file() or p.read_text() != text}


def stale() -> list[Path]:
    return list(_differing())


def render_all() -> list[Path]:
    """Write what differs from its rendering; returns the paths written."""
    written = _differing()
    for path, text in written.items():
        path.write_text(text)
    return list(written)


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        late = stale()
        for path in late:
            print(f"stale: {path.relative_to(PROJECT_ROOT)} (python -m studies.render)")
        return 1 if late else 0
    for path in render_all():
        print(f"wrote {path.relative_to(PROJECT_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
