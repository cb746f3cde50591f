"""The `eric` console script: ad-hoc entry points to the library.

Each command imports its subsystem lazily so `eric --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.callback()
def main() -> None:
    """ERIC pipeline tools (preprocess, evaluate, ...)."""


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=2)


@app.command()
def preprocess(
    params: Path = typer.Option(Path("params.yaml"), help="params.yaml to read"),
    corpus: Optional[str] = typer.Option(None, help="override corpus.path"),
    kind: Optional[str] = typer.Option(None, help="override corpus.kind (wikiplots|cnn|jsonl)"),
    name: Optional[str] = typer.Option(None, help="override corpus.name (labels stats and runs)"),
    out_dir: Optional[str] = typer.Option(None, help="override preprocess.out_dir"),
    max_stories: Optional[int] = typer.Option(None, help="only the first N stories"),
) -> None:
    """Corpus -> units -> anonymized stage-one/stage-two examples in Parquet."""
    from eric.config import ParamsError, load_params
    from eric.data.errors import CorpusError
    from eric.data.pipeline import run_preprocess

    overrides = {
        k: v
        for k, v in {
            "corpus.path": corpus,
            "corpus.kind": kind,
            "corpus.name": name,
            "preprocess.out_dir": out_dir,
            "preprocess.max_stories": max_stories,
        }.items()
        if v is not None
    }
    try:
        cfg = load_params(params, overrides)
        stats = run_preprocess(cfg)
    except (ParamsError, CorpusError) as exc:
        _fail(str(exc))
    typer.echo(stats.summary())


if __name__ == "__main__":
    app()
