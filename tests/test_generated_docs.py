"""Published numbers come from committed outputs: every generated block and page matches
what `python -m studies.render` makes of them, the docs site builds strictly, README is a
front page, and nothing in the repository points outside it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from eric.config import PROJECT_ROOT
from studies import render
from studies.spec import RUN_FILE, load_study


def _at_head(rel: str) -> str | None:
    """A file as git's HEAD has it (the committed run), None when HEAD has no such file."""
    done = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else None


@pytest.fixture
def committed_run(monkeypatch):
    """The pipeline's own outputs (and params.yaml) read as committed: a user's `dvc repro`
    rewrites metrics/ in the workspace, and the pages still show the committed run."""
    monkeypatch.setattr(render, "pipeline_text", _at_head)


def test_every_generated_block_and_page_matches_the_committed_outputs(committed_run):
    late = [str(p.relative_to(PROJECT_ROOT)) for p in render.stale()]
    assert late == [], f"stale (run `python -m studies.render` and commit): {late}"


def test_the_headline_reads_the_committed_run_not_the_workspace(committed_run, monkeypatch, tmp_path):
    readme = (PROJECT_ROOT / "README.md").read_text()
    block = render.BLOCK.search(readme[readme.index("<!-- BEGIN generated: headline"):])
    monkeypatch.setattr(render, "PROJECT_ROOT", tmp_path)  # no workspace outputs at all
    assert render.headline() == block["body"]


def test_the_docs_site_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    assert (site / "results.html").is_file()
    # opened from files (no server), a nav link must name a page, not a folder the browser lists
    home = (site / "index.html").read_text()
    assert 'href="results.html"' in home and 'href="results/"' not in home


def test_readme_is_a_front_page_with_a_generated_headline():
    text = (PROJECT_ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "<!-- BEGIN generated: headline -->" in text


def test_nothing_in_the_repository_points_outside_it():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    outside = "../" + "shared"  # spelled in two parts so this file does not match itself
    hits = []
    for name in filter(None, files):
        path = PROJECT_ROOT / name
        if path.is_file() and path.stat().st_size < 2_000_000:
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            hits += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1) if outside in line]
    assert hits == []


def test_a_block_is_replaced_between_its_markers_only(monkeypatch):
    monkeypatch.setitem(render.BLOCKS, "demo", lambda: "| a |\n|---|\n| 1 |\n")
    text = "intro\n<!-- BEGIN generated: demo -->\nold 9.99\n<!-- END generated: demo -->\noutro 3.5\n"
    assert render.render_text(text) == (
        "intro\n<!-- BEGIN generated: demo -->\n| a |\n|---|\n| 1 |\n<!-- END generated: demo -->\noutro 3.5\n"
    )


def test_an_unknown_block_is_an_error_naming_the_file():
    with pytest.raises(KeyError, match="page.md: unknown generated block 'nope'"):
        render.render_text("<!-- BEGIN generated: nope -->\n<!-- END generated: nope -->\n", "page.md")


def _study(tmp_path, body: str):
    folder = tmp_path / "studies" / "demo"
    folder.mkdir(parents=True)
    (folder / "study.yaml").write_text(body)
    return folder


def test_a_study_spec_is_validated_with_a_one_line_error(tmp_path):
    folder = _study(tmp_path, "title: t\nconfigurations: {a: {variant: [eric]}}\n")
    with pytest.raises(ValueError, match=r"study.yaml: configurations\.a\.variant: Extra inputs"):
        load_study(folder)
    with pytest.raises(ValueError, match="no study.yaml"):
        load_study(tmp_path)


def test_a_study_page_shows_kept_runs_and_says_which_are_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr(render, "PROJECT_ROOT", tmp_path)
    folder = _study(tmp_path, "title: Demo\nabout: Two runs.\nconfigurations:\n  done: {variants: [eric]}\n"
                              "  missing: {variants: [bart]}\n")
    kept = folder / "outputs" / "done"
    (kept / "metrics" / "evaluate").mkdir(parents=True)
    (kept / "metrics" / "evaluate" / "eric.json").write_text(json.dumps({"B-1": 21.456, "Len": 250.4}))
    (kept / RUN_FILE).write_text(json.dumps({"commit": "abcdef123456", "dirty": False, "finished": "2026-11-26T00:00"}))
    page = render.study_page(load_study(folder))
    assert page.startswith("# Demo\n\nTwo runs.")
    assert "| ERIC | 21.46 |" in page and "| 250 |" in page
    assert "`studies/demo/outputs/done`, commit abcdef1, 2026-11-26" in page
    assert "**Not run at this commit** (1 of 2): `missing`; `python flows/study.py studies/demo` runs them." in page


def test_a_seeds_study_gives_means_intervals_and_the_paired_difference_per_seed(tmp_path, monkeypatch):
    monkeypatch.setattr(render, "PROJECT_ROOT", tmp_path)
    folder = _study(tmp_path, "title: Seeds\nacross_seeds: true\nconfigurations:\n  s1: {variants: [eric, bart]}\n"
                              "  s2: {variants: [eric, bart], set: {seed: 2}}\n  s3: {variants: [eric, bart], set: {seed: 3}}\n")
    scores = {"s1": (20.0, 15.0), "s2": (22.0, 15.5), "s3": (18.0, 16.0)}  # B-1 of ERIC, BART per seed
    for name, (eric, bart) in scores.items():
        kept = folder / "outputs" / name
        (kept / "metrics" / "evaluate").mkdir(parents=True)
        for variant, value in (("eric", eric), ("bart", bart)):
            (kept / "metrics" / "evaluate" / f"{variant}.json").write_text(json.dumps({"B-1": value}))
        (kept / RUN_FILE).write_text(json.dumps({"commit": "abcdef123456", "finished": "2026-11-27T00:00"}))
    page = render.study_page(load_study(folder))
    # ERIC: mean 20, sd 2, t(0.975, 2) = 4.303 -> half 4.97; differences +5, +6.5, +2: mean 4.5, sd 2.29 -> half 5.69
    assert "**Across seeds** (3 seeds: s1, s2, s3;" in page
    assert "| B-1 | 20.00 [15.03, 24.97] | 15.50 [14.26, 16.74] | 4.50 [-1.19, 10.19] | +5.00, +6.50, +2.00 |" in page
    (folder / "outputs" / "s2" / RUN_FILE).unlink()
    (folder / "outputs" / "s3" / RUN_FILE).unlink()
    assert "needs two kept configurations" in render.study_page(load_study(folder))


def test_a_grid_declares_arm_by_seed_configurations_with_its_settings(tmp_path):
    folder = _study(tmp_path, "title: Grid\ngrids:\n  world:\n    profile: world\n"
                              "    set: {train.max_steps: 9}\n    seeds: [1, 2]\n    arms:\n"
                              "      eric: {variants: [eric], set: {model.state_space.recipe: paper}}\n"
                              "      bart: {variants: [bart], seeds: [7]}\n")
    spec = load_study(folder)
    assert list(spec.configurations) == ["world-eric-seed1", "world-eric-seed2", "world-bart-seed7"]
    second = spec.configurations["world-eric-seed2"]
    assert second.profile == "world"
    assert second.overrides() == {"train.max_steps": 9, "model.state_space.recipe": "paper", "seed": 2,
                                  "variants": ["eric"]}


def test_retired_runner_outputs_are_named_on_the_page_and_by_the_currency_check(tmp_path, monkeypatch, capsys):
    from studies import currency

    monkeypatch.setattr(render, "PROJECT_ROOT", tmp_path)
    folder = _study(tmp_path, "title: Old\nconfigurations: {a: {variants: [eric]}}\n"
                              "retired: {runner: studies/demo/run.py, commit: abc1234}\n")
    (folder / "retired").mkdir()
    (tmp_path / "params.yaml").write_text("seed: 42\n")
    page = render.study_page(load_study(folder))
    assert "retired runner studies/demo/run.py (last at abc1234)" in page
    assert currency.main(tmp_path) == 0
    out = capsys.readouterr().out
    assert "studies/demo: 1 of 1 configurations not run" in out
    assert "studies/demo: outputs kept from the retired runner studies/demo/run.py (last at abc1234)" in out
