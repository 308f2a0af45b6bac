"""The ``obsmem`` Typer app: ``--version``/``version`` here, and the commands of :mod:`obsmem.cli.demo`,
:mod:`obsmem.cli.threads` (``threads``, ``show``),
:mod:`obsmem.cli.transfer` (``export``, ``import``), :mod:`obsmem.cli.usage` (``usage``), :mod:`obsmem.cli.worker` (``worker``, ``migrate``)
and :mod:`obsmem.cli.bench` (``bench …``).

``-h`` is ``--help`` everywhere (subcommands inherit the context setting), and a bare group
(``obsmem``, ``obsmem bench``) prints its help and succeeds.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from obsmem import __version__
from obsmem.cli.render import escape
from obsmem.cli import demo, forget, queue, threads, transfer, usage, worker
from obsmem.cli import keys as keys_commands
from obsmem.cli import serve as serve_commands
from obsmem.cli.bench import bench_app
from obsmem.cli.knowledge import knowledge_app
from obsmem.cli.groups import HELP_OPTIONS, one_line_summaries, print_help_when_bare

__all__ = ["app", "main"]

app = typer.Typer(
    help="obsmem: observational memory for LLM agents.", context_settings=HELP_OPTIONS,
    invoke_without_command=True, add_completion=False,
)  # fmt: skip
console = Console()


def _print_version(value: bool) -> None:
    if value:
        console.print(f"obsmem {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """obsmem: observational memory for LLM agents."""
    print_help_when_bare(ctx)


@app.command()
def version() -> None:
    """Print the installed obsmem version."""
    console.print(__version__, highlight=False)


demo.register(app)
threads.register(app)
transfer.register(app)
forget.register(app)
worker.register(app)
queue.register(app)
usage.register(app)
serve_commands.register(app)
keys_commands.register(app)
app.add_typer(bench_app, name="bench")
app.add_typer(knowledge_app, name="knowledge")
one_line_summaries(app)


def main() -> None:
    """The ``obsmem`` console script (also ``python -m obsmem``). An argument that is not UTF-8
    (bytes a shell passed as they were) is refused in one line, before any command runs: ids,
    values and paths are read as UTF-8 text, and such an argument would fail deep inside."""
    for index, argument in enumerate(sys.argv[1:], start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            shown = argument.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            Console(stderr=True).print(
                f"[red]error:[/red] argument {index} ({escape(shown)}) is not UTF-8 text; obsmem reads ids, "
                "values and paths as UTF-8.", soft_wrap=True, highlight=False,
            )
            raise SystemExit(2) from None
    app()
