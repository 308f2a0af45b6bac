"""retry_s bounds how long a call waits for a server that refuses connections: the pool's own wait
(connect_timeout_s, for a pool whose connections are all busy) is not what an outage costs."""

from __future__ import annotations

import asyncio

import anyio
import psycopg
from psycopg import sql
import pytest

from obsmem.errors import StorageError
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Thread

from ..postgres_fixtures import PostgresServer

pytestmark = pytest.mark.anyio

PATIENT_POOL_S = 3600.0  # the pool's wait for a busy connection: no call here may come near it


def refuse_connections(server: PostgresServer, database: str, *, refuse: bool) -> None:
    """The database stops (or starts again) taking connections, and loses those it has: what a
    server that went down does to the store's pool, without stopping the shared server."""
    with server.admin() as admin:
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
            sql.Identifier(database), sql.SQL("false" if refuse else "true")))
        if refuse:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))


async def test_a_server_that_refuses_connections_fails_the_call_after_retry_s(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    database = postgres_url.rsplit("/", 1)[1]
    async with PostgresStore(postgres_url, retry_s=0.5, connect_timeout_s=PATIENT_POOL_S) as store:
        await store.create_thread(Thread(id="t1", resource_id="u1"))
        refuse_connections(postgres_server, database, refuse=True)
        try:
            with anyio.fail_after(60):  # before: the call waited connect_timeout_s (an hour here)
                with pytest.raises(StorageError, match="Cannot reach PostgreSQL"):
                    await store.get_thread("t1")
        finally:
            refuse_connections(postgres_server, database, refuse=False)
        thread = await store.get_thread("t1")  # back: the same store goes on
        assert thread is not None and thread.id == "t1"


async def test_a_busy_pool_still_waits_for_a_free_connection(postgres_url: str) -> None:
    """retry_s=0 and one pooled connection, held by a call that waits on a row lock: a second call
    waits for that connection (the server answers) instead of failing as if it were down."""
    async with PostgresStore(postgres_url, max_size=1, retry_s=0, lock_timeout_s=60,
                             connect_timeout_s=PATIENT_POOL_S) as store:
        made = await store.create_thread(Thread(id="t1", resource_id="u1"))
        await store.create_thread(Thread(id="t2", resource_id="u1"))
        with psycopg.connect(postgres_url) as locker:
            locker.execute("SELECT 1 FROM threads WHERE id = 't1' FOR UPDATE")
            update = asyncio.ensure_future(
                store.update_thread(made.model_copy(update={"title": "x"}), expected_version=made.version))
            while not locker.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone()[0]:  # type: ignore[index]
                await asyncio.sleep(0.05)
            read = asyncio.ensure_future(store.get_thread("t2"))
            await asyncio.sleep(1.5)  # longer than any short first wait for the pool
            assert not read.done()  # waiting for the connection, not failed
            locker.rollback()
        with anyio.fail_after(120):
            assert (await update) is not None
            found = await read
        assert found is not None and found.id == "t2"
