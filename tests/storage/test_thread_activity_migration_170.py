"""A database made before threads had an activity (the newest-first listing's order) gets it on
open: existing threads ranked by their newest message (those without one below, newest created
first), new activity on top of them, and the index the listing reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from obsmem import Memory
from obsmem.storage import SQLiteStore, Store, migrations
from obsmem.storage.migrations import MIGRATIONS_TABLE, SQLITE, MigrationSet
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Message, Thread

pytestmark = pytest.mark.anyio


async def _fill(store: Store) -> None:
    """t0 .. t4 of r1 (t4 created last), other0 of r2; messages into t3, then t1, then other0."""
    for i in range(5):
        await store.create_thread(Thread(id=f"t{i}", resource_id="r1"))
    await store.create_thread(Thread(id="other0", resource_id="r2"))
    await store.save_messages("t3", [Message.user("first")])
    await store.save_messages("t1", [Message.user("second")])
    await store.save_messages("other0", [Message.user("elsewhere")])


# t1 and t3 by their newest message; the threads without one below them, newest created first
AFTER_MIGRATION = ["t1", "t3", "t4", "t2", "t0"]


async def _check_after(memory: Memory) -> None:
    page = await memory.list_threads("r1", newest_first=True)
    assert [t.id for t in page] == AFTER_MIGRATION
    assert [t.id for t in await memory.list_threads("r2", newest_first=True)] == ["other0"]
    # activity from now on lands above every migrated thread
    await memory.create_thread("fresh", "r1")
    await memory.save_messages("t0", [Message.user("back again")])
    assert [t.id for t in await memory.list_threads("r1", newest_first=True, limit=3)] == ["t0", "fresh", "t1"]


async def test_an_old_sqlite_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = MigrationSet(SQLITE)
    for step in migrations.SQLITE_MIGRATIONS.all():
        if step.name != "m008_thread_activity":
            before.register(step.apply)
    conn = sqlite3.connect(path, isolation_level=None)
    before.migrate(conn)
    conn.close()
    async with SQLiteStore(path, migrate="never") as old:  # the schema as an older obsmem left it
        await _fill(old)
    async with Memory(f"sqlite:///{path}") as memory:
        await _check_after(memory)
    with sqlite3.connect(path) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'threads_by_activity'").fetchone()
        assert "threads (resource_id, activity)" in sql
        assert conn.execute(f"SELECT 1 FROM {MIGRATIONS_TABLE} WHERE name = 'm008_thread_activity'").fetchone() == (1,)
        plan = " ".join(
            str(row[3]) for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT * FROM threads WHERE resource_id = 'r1' AND activity < 5 "
                "ORDER BY activity DESC LIMIT 3"
            )
        )
        assert "threads_by_activity" in plan and "TEMP B-TREE" not in plan, plan


async def test_an_old_postgres_database_is_migrated(postgres_url: str) -> None:
    async with PostgresStore(postgres_url) as store:
        await _fill(store)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # back to the schema before the step
        conn.execute("DROP INDEX threads_by_activity")
        conn.execute("ALTER TABLE threads DROP COLUMN activity")
        conn.execute("DROP SEQUENCE thread_activity_seq")
        conn.execute(f"DELETE FROM {MIGRATIONS_TABLE} WHERE name = 'm006_thread_activity'")
    async with Memory(postgres_url) as memory:
        await _check_after(memory)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'threads_by_activity'").fetchone()
    assert row is not None and "(resource_id, activity)" in row[0]
