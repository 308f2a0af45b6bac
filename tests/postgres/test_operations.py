"""Issue 22 §3, §5 on a real server: migrate modes, reconnecting pooled connections, timeouts
that name their cause."""

from __future__ import annotations

import random
from collections.abc import Iterator

import psycopg
import pytest

from obsmem.errors import MigrationError, StorageError
from obsmem.storage import open_store
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Thread

from ..postgres_fixtures import PostgresServer, database_url, postgres_server, postgres_url  # noqa: F401

pytestmark = pytest.mark.anyio


@pytest.fixture
def blank_url(postgres_server: PostgresServer) -> Iterator[str]:  # noqa: F811
    name = f"obsmem_ops_blank_{random.randrange(10**9)}"
    with postgres_server.admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    try:
        yield database_url(postgres_server.url, name)
    finally:
        postgres_server.drop_database(name)


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


async def test_check_mode_refuses_a_schema_that_is_behind_and_runs_no_ddl(blank_url: str) -> None:
    async with open_store(blank_url + "?migrate=check") as store:
        with pytest.raises(MigrationError, match="obsmem migrate") as info:
            await store.get_thread("t1")
        assert "m001_initial" in str(info.value)
    assert tables(blank_url) == set()  # nothing was created
    async with PostgresStore(blank_url, migrate="never") as store:
        with pytest.raises(StorageError):
            await store.get_thread("t1")  # no tables, and no DDL either
    assert tables(blank_url) == set()
    async with PostgresStore(blank_url) as store:  # "auto" (the default) migrates
        assert await store.get_thread("t1") is None
    async with open_store(blank_url, migrate="check") as store:  # up to date: check passes
        await store.create_thread(Thread(id="t1", resource_id="u1"))


async def test_pooled_connections_killed_by_the_server_are_replaced(postgres_url: str) -> None:  # noqa: F811
    async with PostgresStore(postgres_url, min_size=3, max_size=3) as store:
        await store.create_thread(Thread(id="t1", resource_id="u1"))
        with psycopg.connect(postgres_url, autocommit=True) as admin:  # what a server restart does to them
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        for _ in range(6):  # every pooled connection was dead; none of them surfaces as an error
            thread = await store.get_thread("t1")
            assert thread is not None and thread.id == "t1"


async def test_a_held_lock_fails_the_call_with_lock_timeout_named(postgres_url: str) -> None:  # noqa: F811
    async with PostgresStore(postgres_url, lock_timeout_s=0.2, statement_timeout_s=30) as store:
        await store.create_thread(Thread(id="t1", resource_id="u1"))
        with psycopg.connect(postgres_url) as locker:
            locker.execute("LOCK TABLE threads IN ACCESS EXCLUSIVE MODE")  # held until the block ends
            with pytest.raises(StorageError, match="lock_timeout"):
                await store.get_thread("t1")
            locker.rollback()
        assert await store.get_thread("t1") is not None


async def test_a_slow_statement_fails_with_statement_timeout_named(postgres_url: str) -> None:  # noqa: F811
    async with PostgresStore(postgres_url, statement_timeout_s=0.2) as store:
        async def slow(conn: psycopg.AsyncConnection[object]) -> None:
            await conn.execute("SELECT pg_sleep(5)")

        with pytest.raises(StorageError, match="statement_timeout"):
            await store._run(slow, transaction=False)


async def test_an_unreachable_server_is_named_as_the_cause(postgres_server: PostgresServer) -> None:  # noqa: F811
    from ..pg_cluster import free_port

    url = f"postgresql://obsmem:Sent1nel@127.0.0.1:{free_port()}/obsmem?connect_timeout=1"
    async with PostgresStore(url, migrate="never", connect_timeout_s=1, retry_s=0.5) as store:
        with pytest.raises(StorageError) as info:
            await store.get_thread("t1")
    message = str(info.value)
    assert "Cannot connect" in message or "Cannot reach" in message
    assert "max_size" not in message and "Sent1nel" not in message
