"""``obsmem worker`` and ``obsmem migrate``: thin shells over :class:`obsmem.worker.Worker` and the
store's migrations. ``register(app)`` adds them to the main ``obsmem`` command."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from obsmem import ChatModel, MemoryConfig, ObsmemError
from obsmem.embeddings import Embedder, LexicalHashEmbedder, MiniLMEmbedder, default_embedder
from obsmem.models import infer_model
from obsmem.storage import open_store
from obsmem.vectors import SQLiteVectorIndex, VectorIndex
from obsmem.worker import WORK_KINDS, Worker, WorkerStats

__all__ = ["migrate", "register", "worker"]

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add ``worker`` and ``migrate`` to ``app``."""
    app.command()(worker)
    app.command()(migrate)


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(1)


def _load_config(path: Path | None) -> MemoryConfig:
    if path is None:
        return MemoryConfig()
    try:
        return MemoryConfig.from_snapshot(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise _fail(
            f"cannot read the memory config {path}: {exc}. Write it with json.dumps(config.snapshot())."
        ) from exc


def worker(
    store: Annotated[str, typer.Option(help="The shared store, e.g. postgresql://user@host/obsmem.")],
    config: Annotated[
        Path | None, typer.Option(help="JSON of MemoryConfig.snapshot(): the applications' thresholds.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(metavar="SPEC", help="Observe and reflect with this model (default: offline)."),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Items this process works on at once.")] = 1,
    claim_ttl: Annotated[
        float, typer.Option(min=1.0, help="Seconds a claim lasts without a heartbeat.")
    ] = 60.0,
    poll: Annotated[float, typer.Option(min=0.01, help="Seconds between polls of an empty queue.")] = 1.0,
    max_items: Annotated[
        int | None, typer.Option(min=1, help="Stop after claiming this many items.")
    ] = None,
    exit_when_idle: Annotated[bool, typer.Option(help="Stop as soon as nothing is due.")] = False,
    kind: Annotated[
        list[str] | None, typer.Option(help=f"Only these kinds of work ({', '.join(WORK_KINDS)}).")
    ] = None,
    vectors: Annotated[
        str | None,
        typer.Option(help="Where retrieval groups are indexed (config retrieval.vector): a SQLite file "
                          "path or a postgresql:// URL."),  # fmt: skip
    ] = None,
    embedder: Annotated[
        str, typer.Option(help="Embedder for --vectors: default, minilm or lexical.")
    ] = "default",
) -> None:
    """Run buffering, reflection and group-indexing work for any thread of a shared store until
    stopped (Ctrl-C)."""
    memory_config = _load_config(config)
    chat_model: ChatModel | None = None
    if model is not None and model != "offline":
        try:
            chat_model = infer_model(model)
        except ObsmemError as exc:
            raise _fail(str(exc)) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        group_embedder, group_index = _group_vectors(memory_config, vectors, embedder)
        stats = asyncio.run(_run_worker(
            store, memory_config, chat_model, concurrency=concurrency, claim_ttl_s=claim_ttl, poll_s=poll,
            max_items=max_items, exit_when_idle=exit_when_idle, kinds=tuple(kind or WORK_KINDS),
            embedder=group_embedder, vector_index=group_index,
        ))
    except ObsmemError as exc:
        raise _fail(str(exc)) from exc
    console.print(
        f"worker done: {stats.claimed} claimed, {stats.completed} completed, {stats.released} given back, "
        f"{stats.abandoned} abandoned, {stats.lost_claims} lost claims"
    )


def _group_vectors(
    config: MemoryConfig, location: str | None, embedder_name: str
) -> tuple[Embedder | None, VectorIndex | None]:
    """The embedder and vector index the worker indexes retrieval groups with, or neither."""
    if location is None:
        if config.retrieval.enabled and config.retrieval.vector:
            raise _fail("the config asks for vector retrieval (retrieval.vector): pass --vectors PATH|URL")
        return None, None
    makers: dict[str, Callable[[], Embedder]] = {
        "default": default_embedder, "minilm": MiniLMEmbedder, "lexical": LexicalHashEmbedder,
    }
    if embedder_name not in makers:
        raise _fail(f"unknown embedder '{embedder_name}'; use one of {', '.join(makers)}")
    chosen: Embedder = makers[embedder_name]()
    index: VectorIndex
    if location.startswith(("postgresql://", "postgres://")):
        from obsmem.vectors import PostgresVectorIndex  # imports psycopg, an optional dependency

        index = PostgresVectorIndex(location, dimensions=chosen.dimensions, space=chosen.name)
    else:
        index = SQLiteVectorIndex(location.removeprefix("sqlite:///"), dimensions=chosen.dimensions,
                                  space=chosen.name)  # fmt: skip
    return chosen, index


async def _run_worker(
    url: str, config: MemoryConfig, model: ChatModel | None, *, concurrency: int, claim_ttl_s: float,
    poll_s: float, max_items: int | None, exit_when_idle: bool, kinds: tuple[str, ...],
    embedder: Embedder | None = None, vector_index: VectorIndex | None = None,
) -> WorkerStats:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)  # finish the current items, then exit
    async with open_store(url) as store:
        runner = Worker(store, config=config, model=model, concurrency=concurrency, claim_ttl_s=claim_ttl_s,
                        poll_interval_s=poll_s, kinds=kinds, embedder=embedder, vector_index=vector_index)
        console.print(f"obsmem worker {runner.owner} on {store!r}")
        try:
            return await runner.run(stop=stop, max_items=max_items, exit_when_idle=exit_when_idle)
        finally:
            if vector_index is not None:
                await vector_index.close()


def migrate(
    store: Annotated[
        str, typer.Option(help="The store to bring up to date (sqlite:///… or postgresql://…).")
    ],
    dry_run: Annotated[bool, typer.Option(help="Only list the migrations that would run.")] = False,
) -> None:
    """Apply pending schema migrations, the knowledge store's included (safe to run from several
    machines at once)."""
    try:
        names = _migrate(store, dry_run=dry_run)
    except ObsmemError as exc:
        raise _fail(str(exc)) from exc
    verb = "pending" if dry_run else "applied"
    typer.echo(f"{len(names)} migration(s) {verb}" + (": " + ", ".join(names) if names else ""))


# -- INTERIM (issue 11): the one place the CLI still knows storage dialects ------------------------
# The target is dialect-free and lives on the public faces:
#
#     async def _migrate(url: str, *, dry_run: bool) -> list[str]:
#         store = open_store(url)
#         return await store.migrate(dry_run=dry_run) + await migrate_knowledge(store.url, dry_run=dry_run)
#
# It needs ``Store.migrate`` (obsmem/storage/contract.py and each adapter) and
# ``obsmem.knowledge.migrate_knowledge``. Until they exist, this function imports the SQLite migration
# list and the PostgreSQL and knowledge adapters, and the import-linter contract "The CLI uses public
# faces only" reports exactly these imports.


def _migrate(url: str, *, dry_run: bool) -> list[str]:
    target = open_store(url)  # builds the store without I/O: it names the dialect and the place
    if target.url.startswith("sqlite:///"):
        from obsmem.knowledge.store.sqlite import KNOWLEDGE_MIGRATIONS as SQLITE_KNOWLEDGE
        from obsmem.storage import migrations

        path = Path(target.url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            if dry_run:
                return migrations.pending(conn) + [m.name for m in SQLITE_KNOWLEDGE.pending(conn)]
            return migrations.migrate(conn) + SQLITE_KNOWLEDGE.migrate(conn)
    if target.url.startswith("postgresql://"):
        import psycopg

        from obsmem.knowledge.store.postgres_schema import KNOWLEDGE_MIGRATIONS as PG_KNOWLEDGE
        from obsmem.storage.postgres.store import migrate_database, pending_migrations, redact_url

        names = pending_migrations(target.url) if dry_run else migrate_database(target.url)
        try:
            with psycopg.connect(target.url, autocommit=True) as conn:
                if dry_run:
                    knowledge = [m.name for m in PG_KNOWLEDGE.pending(conn)]
                else:
                    knowledge = PG_KNOWLEDGE.migrate(conn)
        except psycopg.Error as exc:
            raise _fail(f"cannot migrate the knowledge tables at {redact_url(target.url)}: {exc}") from exc
        return names + knowledge
    raise _fail(f"'{url}' has no schema to migrate (only SQLite and PostgreSQL stores have one).")
