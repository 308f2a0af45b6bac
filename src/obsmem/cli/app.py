"""The ``obsmem`` Typer app: ``version`` here, and the commands of :mod:`obsmem.cli.demo`,
:mod:`obsmem.cli.worker` (``worker``, ``migrate``) and :mod:`obsmem.cli.bench` (``bench …``)."""

from __future__ import annotations

import typer
from rich.console import Console

from obsmem import __version__
from obsmem.cli import demo, worker
from obsmem.cli.bench import bench_app

__all__ = ["app", "main"]

app = typer.Typer(
    help="obsmem: observational memory for LLM agents.", no_args_is_help=True, add_completion=False
)
console = Console()
app.add_typer(bench_app, name="bench")
worker.register(app)


@app.callback()
def _root() -> None:
    """obsmem: observational memory for LLM agents."""


@app.command()
def version() -> None:
    """Print the installed obsmem version."""
    console.print(__version__)


demo.register(app)


def main() -> None:
    """The ``obsmem`` console script."""
    app()
