"""PostgreSQL specifics: migrations (concurrent and refused), connection errors, CLI.

Vector search in PostgreSQL is :class:`obsmem.vectors.PostgresVectorIndex`, tested in ``tests/vectors``.

Behaviour shared with other adapters is tested in ``tests/conformance``.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
import typer
from typer.testing import CliRunner

from obsmem.errors import MigrationError, StorageError
from obsmem.storage.postgres.store import PostgresStore, migrate_database, pending_migrations
from obsmem.storage.postgres.migrations import POSTGRES_MIGRATIONS
from obsmem.types import Message, TextPart, Thread
from obsmem.worker import enqueue_thread_work
from obsmem.cli.worker import register

from ..pg_cluster import free_port
from ..postgres_fixtures import PostgresServer, database_url, postgres_server  # noqa: F401

ALL = POSTGRES_MIGRATIONS.names()
TABLES = {"_obsmem_migrations", "threads", "messages", "observation_records", "working_memory", "leases",
          "lease_tokens", "work_items", "vectors", "dead_work", "model_calls", "forgotten_ids"}


@pytest.fixture
def blank_url(postgres_server: PostgresServer) -> Iterator[str]:  # noqa: F811
    """An empty database (not copied from the migrated template)."""
    name = f"obsmem_blank_{random.randrange(10**9)}"
    with postgres_server.admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    try:
        yield database_url(postgres_server.url, name)
    finally:
        postgres_server.drop_database(name)


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {row[0] for row in rows}


def test_blank_database_is_migrated_once(blank_url: str) -> None:
    assert ALL == ["m001_initial", "m002_vectors", "m003_dead_work", "m004_model_calls", "m005_threads_by_creation", "m006_thread_activity", "m007_forgotten_ids"]
    assert pending_migrations(blank_url) == ALL
    assert tables(blank_url) == set()  # pending() only reads
    assert migrate_database(blank_url) == ALL
    assert tables(blank_url) == TABLES
    assert pending_migrations(blank_url) == [] and migrate_database(blank_url) == []


@pytest.mark.anyio
async def test_store_migrate_lists_then_applies(blank_url: str) -> None:
    async with PostgresStore(blank_url, migrate=False) as store:
        assert await store.migrate(dry_run=True) == ALL
        assert tables(blank_url) == set()  # only read
        assert await store.migrate() == ALL
        assert await store.migrate() == [] and await store.migrate(dry_run=True) == []


def test_concurrent_migrators_apply_each_step_exactly_once(blank_url: str) -> None:
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: migrate_database(blank_url), range(6)))
    applied = [name for result in results for name in result]
    assert sorted(applied) == sorted(ALL)  # each step by exactly one migrator; nobody failed
    with psycopg.connect(blank_url) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM _obsmem_migrations ORDER BY name")]
    assert names == ALL


@pytest.mark.anyio
async def test_a_newer_schema_is_refused(blank_url: str) -> None:
    migrate_database(blank_url)
    with psycopg.connect(blank_url, autocommit=True) as conn:
        conn.execute("INSERT INTO _obsmem_migrations (name, applied_at) VALUES ('m999_from_the_future', now())")
    async with PostgresStore(blank_url) as store:
        with pytest.raises(MigrationError, match="newer obsmem.*m999_from_the_future"):
            await store.get_thread("t1")


@pytest.mark.anyio
async def test_an_unreachable_server_is_a_clear_error() -> None:
    url = f"postgresql://postgres:secret@127.0.0.1:{free_port()}/nowhere"
    async with PostgresStore(url, connect_timeout_s=2) as store:
        with pytest.raises(StorageError, match="server is running") as info:
            await store.get_thread("t1")
    assert "secret" not in str(info.value)  # the password never reaches a message


# -- the CLI ---------------------------------------------------------------------------------------


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """obsmem"""

    register(app)
    return app


def test_migrate_command(blank_url: str) -> None:
    runner = CliRunner()
    dry = runner.invoke(cli(), ["migrate", "--store", blank_url, "--dry-run"])
    assert dry.exit_code == 0
    assert "11 migrations pending: m001_initial, m002_vectors, m003_dead_work, m004_model_calls, m005_threads_by_creation, m006_thread_activity, m007_forgotten_ids, m001_knowledge_initial, m002_knowledge_pages_by_node, m003_knowledge_unowned_speaker_facts, m004_knowledge_search_index" in dry.output
    done = runner.invoke(cli(), ["migrate", "--store", blank_url])
    assert done.exit_code == 0 and "11 migrations applied" in done.output
    again = runner.invoke(cli(), ["migrate", "--store", blank_url])
    assert again.exit_code == 0 and "0 migrations applied" in again.output


def test_worker_command_drains_the_queue(blank_url: str) -> None:
    async def seed() -> None:
        async with PostgresStore(blank_url) as store:
            await store.create_thread(Thread(id="t1", resource_id="u1"))
            await store.save_messages("t1", [
                Message(id=f"m{i}", role="user" if i % 2 == 0 else "assistant",
                        parts=(TextPart(text=f"I moved to Lisbon in {2000 + i} with my partner Alex."),))
                for i in range(6)
            ])
            from obsmem.clock import SystemClock

            await enqueue_thread_work(store, "t1", now=SystemClock().now())

    async def inspect() -> tuple[int, int]:
        async with PostgresStore(blank_url) as store:
            head = await store.get_head("thread:t1")
            assert head is not None
            return len(await store.list_work()), sum(len(c.message_ids) for c in head.buffered_chunks)

    asyncio.run(seed())
    result = CliRunner().invoke(cli(), ["worker", "--store", blank_url, "--exit-when-idle", "--poll", "0.05"])
    assert result.exit_code == 0, result.output
    assert "2 claimed, 2 completed" in result.output
    assert asyncio.run(inspect()) == (0, 6)


def test_worker_command_reads_a_config_snapshot(blank_url: str, tmp_path: object) -> None:
    from pathlib import Path

    from obsmem import MemoryConfig

    path = Path(str(tmp_path)) / "config.json"
    path.write_text(json.dumps(MemoryConfig().snapshot()))
    result = CliRunner().invoke(cli(), ["worker", "--store", blank_url, "--config", str(path), "--exit-when-idle"])
    assert result.exit_code == 0, result.output
    bad = CliRunner().invoke(cli(), ["worker", "--store", blank_url, "--config", str(path) + ".missing"])
    assert bad.exit_code == 1 and "cannot read the memory config" in bad.output
