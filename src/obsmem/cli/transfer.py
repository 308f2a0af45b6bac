"""``obsmem export`` and ``obsmem import``: one resource as versioned JSON lines, over :mod:`obsmem.transfer`.

``export`` writes to a file or to stdout (``-o -``, the default); the ``store: …`` line and the
summary go to stderr, so stdout is the export alone. ``import`` validates the whole file before
it writes anything and refuses a store that already holds the resource.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from obsmem import ObsmemError
from obsmem.cli.render import counted, escape, escape_id
from obsmem.cli.stores import (
    database_file,
    describe_store,
    err_console,
    fail,
    open_for_reading,
    open_knowledge,
    open_reported,
)
from obsmem.storage import Store, default_store_path
from obsmem.transfer import export_resource, import_resource

__all__ = ["export", "import_", "register"]

StoreOption = Annotated[
    str | None,
    typer.Option(help="The store: a SQLite file (path.db, sqlite:///rel.db, sqlite:////abs.db) or "
                      "postgresql://user@host/db. Default: the default SQLite file."),  # fmt: skip
]
KnowledgeOption = Annotated[
    str | None,
    typer.Option(help="The knowledge store: a SQLite file or a postgresql:// URL (often the same as --store)."),
]


def register(app: typer.Typer) -> None:
    """Add ``export`` and ``import`` to ``app``."""
    app.command("export")(export)
    app.command("import")(import_)


def _store_url(store: str | None) -> str:
    return store if store is not None else str(default_store_path())


def export(
    resource: Annotated[str, typer.Option("--resource", "-r", help="The resource (user) to export.")],
    store: StoreOption = None,
    knowledge: KnowledgeOption = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="The file to write, or - for stdout.")
    ] = "-",
) -> None:
    """Export one resource (threads, messages, every observation generation, working memory,
    and its knowledge with --knowledge) as versioned JSON lines. -o never writes over a SQLite
    database (the store itself, a slip between --store and -o, or another)."""
    if output != "-":
        _not_over_a_database(Path(output))
        _writable(Path(output))
    opened = open_for_reading(_store_url(store))
    graph = open_knowledge(knowledge, existing=True) if knowledge is not None else None

    async def run(target: Store) -> dict[str, int]:
        async with target:
            try:
                if output == "-":
                    summary = await export_resource(target, resource, sys.stdout, knowledge=graph)
                    sys.stdout.flush()
                else:
                    summary = await export_resource(target, resource, Path(output), knowledge=graph)
            finally:
                if graph is not None:
                    await graph.close()
        return summary.counts

    try:
        counts = asyncio.run(run(opened))
    except BrokenPipeError:
        raise _reader_gone() from None
    except (ObsmemError, OSError) as exc:
        raise fail(str(exc)) from None
    where = "stdout" if output == "-" else str(Path(output).resolve())
    err_console.print(
        f"exported resource '{escape_id(resource)}' from {escape(describe_store(opened))} to {escape(where)}: "
        + ", ".join(counted(n, kind) for kind, n in counts.items()),
        soft_wrap=True, highlight=False,
    )  # fmt: skip


def _not_over_a_database(path: Path) -> None:
    """Refuse ``-o`` naming a SQLite database, or its write-ahead log, shared memory or journal:
    the export would replace it (a store, every resource in it) by one resource's JSON lines."""
    problem = database_file(path)
    if problem is not None:
        raise fail(f"{path.resolve()} {problem}; the export would overwrite it. Pass a new file (-o alice.jsonl).",
                   argument="--output")  # fmt: skip


def _writable(path: Path) -> None:
    """Refuse ``-o`` naming a folder, or a file in a folder that does not exist, before the store
    is opened (the write failed with Python's errno text, ``[Errno 21] Is a directory``)."""
    if path.is_dir():
        raise fail(f"-o {path.resolve()} is a folder; pass the file to write in it (-o {path / 'export.jsonl'})",
                   argument="--output")  # fmt: skip
    if not path.parent.is_dir():
        raise fail(f"-o {path}: no folder {path.parent.resolve()} to write it in; create it first, or pass "
                   "another path", argument="--output")  # fmt: skip


def _reader_gone() -> typer.Exit:
    """The reader of stdout stopped early (``obsmem export | head``): no error of the export's, so
    nothing is said; stdout goes to the null device, so the interpreter's last flush at exit does
    not fail again, and the command ends with status 1 (as click's commands do there)."""
    with open(os.devnull, "w") as null:  # noqa: PTH123 (a descriptor to dup, not a path to read)
        os.dup2(null.fileno(), sys.stdout.fileno())
    return typer.Exit(1)


def import_(
    file: Annotated[str, typer.Argument(metavar="FILE", help="The export file, or - for stdin.")],
    store: StoreOption = None,
    knowledge: KnowledgeOption = None,
    into_resource: Annotated[
        str | None, typer.Option(help="Import under this resource id instead of the exported one.")
    ] = None,
) -> None:
    """Import an export into a store that does not hold its resource (validated first; all or nothing)."""
    if file != "-" and Path(file).is_dir():
        raise fail(f"{Path(file).resolve()} is a folder; pass the export file itself (obsmem export -o FILE wrote one)")
    if file != "-" and not Path(file).is_file():
        raise fail(f"no export file at {Path(file).resolve()}")
    opened = open_reported(_store_url(store))
    graph = open_knowledge(knowledge) if knowledge is not None else None

    async def run(target: Store) -> str:
        async with target:
            try:
                source = sys.stdin if file == "-" else Path(file)
                summary = await import_resource(target, source, knowledge=graph, into_resource=into_resource)
            finally:
                if graph is not None:
                    await graph.close()
        counts = ", ".join(counted(n, kind) for kind, n in summary.counts.items())
        line = f"imported resource '{summary.resource_id}' into {describe_store(target)}: {counts}"
        if not summary.seqs_preserved:
            line += " (message seqs renumbered in order; references mapped)"
        if summary.skipped:
            line += "; skipped (no --knowledge): " + ", ".join(counted(n, k) for k, n in summary.skipped.items())
        if summary.forgotten:
            line += "; left out (forgotten since the export): " + ", ".join(
                counted(n, k) for k, n in summary.forgotten.items()
            )
        return line

    try:
        line = asyncio.run(run(opened))
    except (ObsmemError, OSError) as exc:
        raise fail(str(exc)) from None
    # one line, whatever the ids hold
    Console(emoji=False).print(escape_id(line), soft_wrap=True, highlight=False)
