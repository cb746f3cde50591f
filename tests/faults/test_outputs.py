"""Faults a new user hits, each reproduced in a temporary folder: nothing lost, no traceback.

Outputs: where a relative path writes, what `eric sample --out` may replace, look-alike
out-dirs, concurrent runs, a full disk, and what killed runs leave behind."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from eric.cli import app
from eric.data.errors import OutputError
from eric.data.outdir import MARKER, output_lock
from eric.data.pipeline import run_preprocess
from eric.generate.command import check_out
from eric.generate.errors import SampleError
from eric.generate.schema import write_samples
from tests.conftest import STORY_A, STORY_B


@pytest.fixture
def corpus(write_wikiplots):
    return write_wikiplots([STORY_A, STORY_B])


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_a_relative_out_dir_writes_beside_the_params_file_not_into_the_installed_checkout(tmp_path, corpus, monkeypatch):
    """A second checkout (or any folder) with its own params.yaml: its relative paths are its own."""
    other = tmp_path / "second-checkout"
    other.mkdir()
    (other / "params.yaml").write_text(yaml.safe_dump({"corpus": {"path": "../plots.zip", "kind": "wikiplots"},
                                                       "preprocess": {"out_dir": "data/processed"}}))
    monkeypatch.chdir(other)
    result = invoke("preprocess")
    assert result.exit_code == 0, result.output
    assert (other / "data" / "processed" / "stats.json").is_file()
    assert f"wrote {other / 'data' / 'processed'}" in result.stdout  # says where it wrote


def test_a_linked_params_file_writes_where_the_link_is_not_into_the_checkout_it_points_at(tmp_path, corpus,
                                                                                          monkeypatch):
    """The relative out-dir of a symlinked params.yaml resolved into the link target's checkout
    and replaced that checkout's data/processed (at exit 0)."""
    first, second = tmp_path / "first-checkout", tmp_path / "second-checkout"
    for folder in (first, second):
        folder.mkdir()
    (first / "params.yaml").write_text(yaml.safe_dump({"corpus": {"path": "../plots.zip", "kind": "wikiplots"},
                                                       "preprocess": {"out_dir": "data/processed"}}))
    (second / "params.yaml").symlink_to(first / "params.yaml")
    monkeypatch.chdir(second)
    result = invoke("preprocess")
    assert result.exit_code == 0, result.output
    assert (second / "data" / "processed" / "stats.json").is_file() and not (first / "data").exists()


def test_a_look_alike_out_dir_with_a_users_files_inside_is_refused(params_for, corpus, tmp_path):
    mine = tmp_path / "out"
    for stage in ("stage_one", "stage_two"):
        (mine / stage).mkdir(parents=True)
    (mine / "stage_one" / "my-notes.txt").write_text("keep me")
    with pytest.raises(OutputError, match=r"it holds stage_one/my-notes.txt, which eric preprocess did not write"):
        run_preprocess(params_for(corpus, "wikiplots"), progress=False)
    assert (mine / "stage_one" / "my-notes.txt").read_text() == "keep me"


def test_a_dvc_checkout_of_the_stage_folders_is_still_replaced(params_for, corpus, tmp_path):
    out = tmp_path / "out"
    run_preprocess(params_for(corpus, "wikiplots"), progress=False)
    (out / MARKER).unlink()  # DVC restores the outputs without the marker
    run_preprocess(params_for(corpus, "wikiplots"), progress=False)
    assert (out / MARKER).is_file()


def test_a_second_run_into_the_same_out_dir_refuses_in_one_line(params_for, corpus, tmp_path):
    out = tmp_path / "out"
    with output_lock(out):  # a run still writing there
        with pytest.raises(OutputError, match=r"another run is writing it now .*wait for it to end") as info:
            run_preprocess(params_for(corpus, "wikiplots"), progress=False)
    assert "\n" not in str(info.value) and not out.exists()
    run_preprocess(params_for(corpus, "wikiplots"), progress=False)  # once it ended: the lock is gone
    assert (out / "stats.json").is_file() and not list(tmp_path.glob(".out.lock"))


def test_a_run_through_a_linked_spelling_of_a_locked_output_refuses_too(tmp_path):
    """The lock was per spelling: a run through a symlink to the same out-dir raced the first."""
    real = tmp_path / "out"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)  # the out-dir itself under another name
    with output_lock(real):
        with pytest.raises(OutputError, match="another run is writing it now"):
            with output_lock(tmp_path / "alias"):
                pass


def _preprocess_with_file_limit(tmp_path, corpus, out, limit: int) -> subprocess.CompletedProcess:
    def small_files():  # files larger than `limit` bytes fail with EFBIG (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-m", "eric.cli", "preprocess", "--corpus", str(corpus), "--kind", "wikiplots",
                           "--out-dir", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          preexec_fn=small_files)  # fmt: skip


def test_a_full_disk_is_one_line_the_previous_output_intact_and_no_staging_left(params_for, corpus, tmp_path):
    out = tmp_path / "out"
    run_preprocess(params_for(corpus, "wikiplots"), progress=False)
    before = (out / "stats.json").read_text()
    done = _preprocess_with_file_limit(tmp_path, corpus, out, limit=1500)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: out-dir {out}: cannot write (") and "File too large" in line
    assert line.endswith("); the previous output is unchanged and the partial one removed")
    assert (out / "stats.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")) == []  # staging removed


def test_folders_that_killed_runs_left_are_removed_and_named_by_the_next_run(params_for, corpus, tmp_path, capsys):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # a process that has ended
    leftover = tmp_path / f".out.{pid}-abcd1234.partial"
    (leftover / "stage_one").mkdir(parents=True)
    running = tmp_path / f".out.{os.getpid()}-00000000.partial"  # a live run's: kept
    running.mkdir()
    run_preprocess(params_for(corpus, "wikiplots"), progress=False)
    assert not leftover.exists() and running.exists()
    assert f"removed 1 folder(s) that interrupted runs left beside {tmp_path / 'out'}: {leftover.name}" in capsys.readouterr().err


def _samples(path, rows=1):
    row = {"id": "s1", "input": "x", "stage_one": "<sent> y", "mentions_text": "", "mentions": [], "final_text": "y",
           "reference": None, "unit_entities": [], "unit_states": [], "stage_one_tokens": 2,
           "fallback_generated": 0, "fallback_reused_last": 0, "fallback_random_name": 0}
    return write_samples([row] * rows, path, {"model_dir": "m"})


def test_sample_out_replaces_only_its_own_earlier_output(tmp_path):
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("Ash drives to a cabin.\n")
    earlier = _samples(tmp_path / "earlier.parquet")
    assert check_out(earlier, inputs) == earlier  # an earlier `eric sample` output: replaced
    mine = tmp_path / "thesis.parquet"
    mine.write_text("a user's file")
    with pytest.raises(SampleError, match=r"thesis.parquet exists and `eric sample` did not write it.*--overwrite"):
        check_out(mine, inputs)
    assert check_out(mine, inputs, overwrite=True) == mine
    with pytest.raises(SampleError, match=r"is the --inputs file"):
        check_out(inputs, inputs, overwrite=True)
    with pytest.raises(SampleError, match=r"is a folder; give a file"):
        check_out(tmp_path, inputs, overwrite=True)
    assert mine.read_text() == "a user's file"


def test_eric_sample_refuses_before_loading_any_model(tmp_path):
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("Ash drives to a cabin.\n")
    mine = tmp_path / "notes.parquet"
    mine.write_text("keep")
    result = invoke("sample", str(tmp_path / "no-model"), "--inputs", str(inputs), "--out", str(mine),
                    "--params", str(tmp_path / "none.yaml"))  # fmt: skip
    assert result.exit_code == 2 and "did not write it" in result.output and mine.read_text() == "keep"


def test_a_failed_samples_write_keeps_the_earlier_file_and_leaves_no_partial(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    path = _samples(tmp_path / "s.parquet", rows=2)

    def full_disk(table, where, **kw):
        open(where, "wb").write(b"PAR1")  # a partial file, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full_disk)
    with pytest.raises(SampleError, match=r"s.parquet: cannot write the samples \(No space left on device\); "
                                          r"an earlier file there is unchanged"):
        _samples(path, rows=5)
    monkeypatch.undo()
    assert pq.read_table(path).num_rows == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["s.parquet"]


def test_eric_evaluate_and_sample_settings_resolve_beside_their_params_file(tmp_path, monkeypatch):
    """`eric evaluate --params elsewhere/params.yaml`: the file's relative paths are its own, as
    for preprocess and sample (one body: eric.config.params_here_or_defaults)."""
    from eric.evaluate.command import load_settings as evaluate_settings
    from eric.generate.command import load_settings as sample_settings

    project = tmp_path / "project"
    project.mkdir()
    (project / "params.yaml").write_text(yaml.safe_dump({"evaluate": {"feature_cache": "cache/features"},
                                                         "preprocess": {"out_dir": "data/processed"}}))
    monkeypatch.chdir(tmp_path)
    settings = evaluate_settings(Path("project/params.yaml"), {"max_units": 7})
    assert settings.feature_cache == str(project / "cache" / "features") and settings.max_units == 7
    assert sample_settings(Path("project/params.yaml"), {}).preprocess.out_dir == str(project / "data" / "processed")
    assert evaluate_settings(tmp_path / "none.yaml", {"seed": 3}).seed == 3  # no file: the built-in defaults


def _generations(tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("Ash drives to a cabin. Ash finds a key.\nBo walks home. Bo sleeps.\n")
    return texts


def _evaluate(texts, out, *extra):
    return invoke("evaluate", str(texts), "--no-mauve", "--out", str(out), "--params", str(texts.parent / "none.yaml"),
                  *extra)


def test_evaluate_out_never_replaces_its_inputs_or_a_users_file(tmp_path):
    """Each was lost at exit 0: the generations file (and any user file) replaced by the metrics."""
    texts = _generations(tmp_path)
    original = texts.read_text()
    link = tmp_path / "link.txt"
    link.symlink_to(texts)
    for target, extra in ((texts, ()), (texts, ("--overwrite",)), (link, ("--overwrite",))):
        result = _evaluate(texts, target, *extra)
        assert result.exit_code == 2 and "is the generations file" in result.output, (target, extra)
    assert texts.read_text() == original
    mine = tmp_path / "thesis.json"
    mine.write_text("a user's file")
    result = _evaluate(texts, mine)
    assert result.exit_code == 2 and "exists and `eric evaluate` did not write it" in result.output
    assert mine.read_text() == "a user's file"
    result = _evaluate(texts, tmp_path)  # a folder: one line, no traceback
    assert result.exit_code == 2 and "is a folder" in result.output and result.exception.__class__ is SystemExit


def test_evaluate_out_replaces_its_own_earlier_metrics_whole(tmp_path):
    texts = _generations(tmp_path)
    out = tmp_path / "metrics.json"
    for _ in range(2):  # the second run replaces the first's file
        result = _evaluate(texts, out)
        assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert written["written_by"] == "eric evaluate" and written["n_texts"] == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary or lock left
    mine = tmp_path / "mine.json"
    mine.write_text("{}")
    assert _evaluate(texts, mine, "--overwrite").exit_code == 0 and json.loads(mine.read_text())["n_texts"] == 2


def test_a_samples_out_through_a_link_to_its_inputs_is_refused(tmp_path):
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("Ash drives to a cabin.\n")
    link = tmp_path / "out.parquet"
    link.symlink_to(inputs)
    with pytest.raises(SampleError, match=r"is the --inputs file"):
        check_out(link, inputs, overwrite=True)


def test_an_output_name_longer_than_the_file_system_allows_is_one_line(corpus, tmp_path, monkeypatch):
    """Both were OSError tracebacks (File name too long)."""
    monkeypatch.chdir(tmp_path)  # no params.yaml here: the built-in defaults
    long = tmp_path / ("o" * 300)
    result = invoke("preprocess", "--corpus", str(corpus), "--kind", "wikiplots", "--out-dir", str(long))
    assert result.exit_code == 2 and "not a usable path (File name too long)" in result.output, result.output
    texts = _generations(tmp_path)
    result = _evaluate(texts, long / "metrics.json")
    assert result.exit_code == 2 and "not a usable path (File name too long)" in result.output, result.output


def test_a_previous_output_that_cannot_be_removed_does_not_turn_a_written_run_into_a_failure(
        params_for, corpus, tmp_path, monkeypatch, capsys):
    """With a read-only earlier output the run swapped the new one in, then failed deleting the
    old one and said 'the previous output is unchanged' (rc 2): false on both counts."""
    import shutil as shutil_module

    import eric.data.outdir as outdir

    run_preprocess(params_for(corpus, "wikiplots"), progress=False)
    out = tmp_path / "out"
    (out / "stats.json").write_text('{"earlier": true}')  # tells the earlier output from the new one
    real_rmtree = shutil_module.rmtree

    def read_only(path, *args, **kwargs):
        if ".partial" in str(path) or ".old" in str(path):
            if not kwargs.get("ignore_errors"):
                raise PermissionError(13, "Permission denied", str(path))
            return None
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(outdir.shutil, "rmtree", read_only)
    run_preprocess(params_for(corpus, "wikiplots"), progress=False)  # no error: the output is written
    assert "earlier" not in (out / "stats.json").read_text()
    assert "the new output is in place, but the previous one could not be removed (Permission denied)" in \
        capsys.readouterr().err


def test_a_second_report_run_refuses_in_one_line_and_a_full_disk_keeps_the_earlier_figures(tmp_path, monkeypatch):
    import report as report_stage

    from eric.config import load_params
    from eric.evaluate.headline import write_headlines

    params = load_params(None, {"evaluate.report_dir": str(tmp_path / "reports"),
                                "evaluate.headline_dir": str(tmp_path / "metrics" / "headline")})
    with output_lock(tmp_path / "metrics" / "headline"):  # another report run writing the headline figures
        with pytest.raises(OutputError, match=r"headline: another run is writing it now"):
            report_stage.write.fn(params, inputs=None)
    assert not (tmp_path / "reports").exists()  # refused before anything was written
    folder = tmp_path / "metrics" / "headline"
    write_headlines(folder, {"eric": {}}, {})
    before = (folder / "eric.json").read_text()
    monkeypatch.setattr(Path, "write_bytes", lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OutputError, match=r"eric.json: cannot write \(No space left on device\)"):
        write_headlines(folder, {"eric": {"b1": 1.0}}, {})
    assert (folder / "eric.json").read_text() == before and sorted(p.name for p in folder.iterdir()) == ["eric.json"]
