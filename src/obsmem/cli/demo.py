"""``obsmem demo``: replays the bundled conversation with :func:`obsmem.demo.runner.run_demo` and
draws the report; the replay and every number in it come from the library."""

from __future__ import annotations

import asyncio
import shlex
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from obsmem import ChatModel, ObsmemError
from obsmem.cli.render import escape, one_line, render_message, visible
from obsmem.cli.stores import err_console, fail
from obsmem.demo.conversation import DEMO_RESOURCE_ID, DEMO_THREAD_ID
from obsmem.demo.runner import DEMO_MESSAGE_TOKENS, DEMO_OBSERVATION_TOKENS, DemoReport, demo_config, run_demo
from obsmem.models import infer_model

__all__ = ["demo", "register"]


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command()(demo)


def demo(
    db: Annotated[
        Path | None,
        typer.Option(help="SQLite file to keep, for obsmem threads/show (default: a temporary one)."),
    ] = None,
    turns: Annotated[int | None, typer.Option(min=1, help="Replay only the first N turns.")] = None,
    message_tokens: Annotated[
        int, typer.Option(min=1, help="Observe when unobserved tokens reach this.")
    ] = DEMO_MESSAGE_TOKENS,
    observation_tokens: Annotated[
        int, typer.Option(min=1, help="Reflect when observations reach this.")
    ] = DEMO_OBSERVATION_TOKENS,
    show_context: Annotated[
        bool, typer.Option("--show-context/--no-context", help="Print the final context.")
    ] = True,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="SPEC",
            help="Observe and reflect with this model, e.g. openai:gpt-4o-mini, anthropic:claude-haiku-4-5, "
            "ollama:llama3.1, openai-compatible:NAME@http://host:port/v1 (default: the offline observer).",
        ),
    ] = None,
) -> None:
    """Replay a bundled 300+ turn conversation through memory and report compression (offline by default)."""
    try:
        config = demo_config(message_tokens, observation_tokens)
    except ObsmemError as exc:
        raise typer.BadParameter(str(exc)) from exc
    chat_model: ChatModel | None = None
    if model is not None and model != "offline":
        try:
            chat_model = infer_model(model)
        except ObsmemError as exc:  # a missing key or an unknown provider: one line, no traceback
            raise fail(str(exc)) from None  # the spec quoted as typed, what a terminal obeys spelled
    console = Console()  # made per run, so it measures this run's terminal (or COLUMNS)
    with tempfile.TemporaryDirectory(prefix="obsmem-demo-") as scratch:
        database = (db.expanduser() if db else Path(scratch) / "demo.db").absolute()
        where = "" if db else " (temporary, deleted at exit; --db PATH keeps it)"
        err_console.print(f"store: sqlite {database}{where}", markup=False, highlight=False, soft_wrap=True)
        with Progress(
            TextColumn("[bold]Replaying conversation"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, transient=False,
        ) as progress:
            task = progress.add_task("turns", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            try:
                report = asyncio.run(
                    run_demo(database, config=config, model=chat_model, turns=turns, on_turn=advance)
                )
            except ObsmemError as exc:
                raise fail(str(exc)) from exc
        _print_report(console, report, show_context=show_context, kept=db is not None)


def _print_report(console: Console, report: DemoReport, *, show_context: bool, kept: bool) -> None:
    if show_context:
        console.rule("Final context the model would see")
        for message in report.context.messages:
            title = Text(f"{message.role} · {one_line(message.id)}")
            # the observations are a model's text: its escapes and bidi controls are shown, not sent
            text = Text(visible(render_message(message)))
            console.print(Panel(text, title=title, title_align="left", expand=True))
    table = Table(title=f"obsmem demo ({report.model} observer, SQLite)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("turns replayed", str(report.turns))
    table.add_row("messages stored", str(report.messages))
    table.add_row("raw tokens", f"{report.raw_tokens:,}")
    table.add_row("context tokens", f"{report.context_tokens:,}")
    table.add_row("compression", f"{report.compression:.1f}×")
    table.add_row("observations (cycles)", str(report.observation_cycles))
    table.add_row("observation lines now", str(report.observation_lines))
    table.add_row("reflections", str(report.reflections))
    table.add_row("generations", str(report.generations))
    table.add_row("seconds", f"{report.seconds:.1f}")
    if kept:
        table.add_row("database", escape(str(report.database)))
    console.print(table)
    if kept:
        store = _store_argument(report.database)
        console.print(f"Look inside: obsmem threads --store {store} --resource {DEMO_RESOURCE_ID}\n"
                      f"             obsmem show {DEMO_THREAD_ID} --store {store}",
                      markup=False, highlight=False, soft_wrap=True)  # fmt: skip


def _store_argument(database: Path) -> str:
    """``--store`` for ``database`` as a shell takes it: a plain path only where ``--store`` reads
    one (``.db``, ``.sqlite``, ``.sqlite3``), else its ``sqlite:////abs`` URL; quoted when needed."""
    plain = database.suffix.lower() in (".db", ".sqlite", ".sqlite3")
    return shlex.quote(str(database) if plain else f"sqlite:///{database}")
