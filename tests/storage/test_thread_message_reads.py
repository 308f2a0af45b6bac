"""A thread's messages are read from the (thread, seq) index, however large a share of the table it holds.

The storage audit's finding: with ``WHERE thread_id = … ORDER BY seq DESC LIMIT n``, PostgreSQL
walked the primary key (seq) backwards and filtered out other threads' messages whenever the
thread held more than ~5% of the table (it assumes a thread's rows are spread evenly over seq):
the newest 10 of a thread whose messages are older than everyone else's read every newer message
(4 ms with 30k others, 40 ms with 300k). The window read (the messages after the head's cursor)
did the same. These tests build such a table and count, from ``EXPLAIN ANALYZE`` of the exact
statement the store sent, the rows of ``messages`` it read: bounded by what it returns, not by
the other threads' messages. SQLite's plans for the same reads are checked too.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from obsmem.storage import ObservationRecord, SQLiteStore, ThreadState, lineage_key
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Thread

from .plans import SentToPostgres, SentToSQLite, pg_outline, pg_plan, pg_rows_read, sqlite_plan

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
LONG = 4_000  # the thread under test: 10% of the table, and older than every other message
OTHERS = 36_000  # three other threads' messages, all newer
LINEAGE = lineage_key("thread", "long", "r1")


def _fill_postgres(url: str) -> None:
    """The documents save_messages would write, inserted in bulk (the reads under test go through
    the store); then ANALYZE, as autovacuum would, so the planner knows the thread's share."""
    document = (
        "json_build_object('id', %s || g, 'role', 'user', 'parts', json_build_array(json_build_object("
        "'type', 'text', 'text', %s || g)), 'created_at', '2025-03-01T09:00:00Z', 'metadata', '{}'::json)::text"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO messages (seq, id, thread_id, doc) "
            f"SELECT nextval('messages_seq'), 'long-' || g, 'long', {document} FROM generate_series(1, %s) g",
            ("long-", "long ", LONG),
        )
        conn.execute(
            "INSERT INTO messages (seq, id, thread_id, doc) "
            f"SELECT nextval('messages_seq'), 'other-' || g, 'other-' || (g %% 3), {document} "
            "FROM generate_series(1, %s) g",
            ("other-", "other ", OTHERS),
        )
        conn.execute("ANALYZE")


async def _postgres_store_with_a_long_old_thread(url: str) -> None:
    async with PostgresStore(url) as store:
        await store.create_thread(Thread(id="long", resource_id="r1", created_at=T0))
        for i in range(3):
            await store.create_thread(Thread(id=f"other-{i}", resource_id="r2", created_at=T0))
    _fill_postgres(url)


@pytest.mark.parametrize("generic", [False, True], ids=["plan-for-the-values", "cached-generic-plan"])
async def test_newest_messages_of_a_large_old_thread_read_only_that_thread(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, generic: bool
) -> None:
    await _postgres_store_with_a_long_old_thread(postgres_url)
    sent = SentToPostgres(monkeypatch)
    async with PostgresStore(postgres_url) as store:
        newest = await store.list_messages("long", newest_first=True, limit=10)
        assert [m.text for m in newest] == [f"long {i}" for i in range(LONG, LONG - 10, -1)]
        assert {m.thread_id for m in newest} == {"long"} and {m.resource_id for m in newest} == {"r1"}
        query, params = sent.only(" messages")
        plan = pg_plan(postgres_url, query, params, generic=generic)
        assert pg_rows_read(plan, "messages") <= 10, pg_outline(plan)

        # A page in the middle, each way: bounded by the page too.
        middle = newest[5].seq
        assert middle is not None
        for newest_first in (True, False):
            sent.clear()
            page = await store.list_messages(
                "long", after_seq=middle - 500, before_seq=middle, limit=20, newest_first=newest_first
            )
            expected = [m for m in range(LONG - 5 - 499, LONG - 5)]  # long-i has seq i (inserted first)
            wanted = expected[::-1][:20] if newest_first else expected[:20]
            assert [m.text for m in page] == [f"long {i}" for i in wanted]
            query, params = sent.only(" messages")
            plan = pg_plan(postgres_url, query, params, generic=generic)
            assert pg_rows_read(plan, "messages") <= 20, pg_outline(plan)


async def test_the_window_of_a_large_thread_reads_only_the_messages_after_its_cursor(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _postgres_store_with_a_long_old_thread(postgres_url)
    sent = SentToPostgres(monkeypatch)
    async with PostgresStore(postgres_url) as store:
        head = ObservationRecord(  # the thread's messages are seqs 1..LONG: six after the cursor
            id="om-long", lineage=LINEAGE, scope="thread", thread_id="long", resource_id="r1",
            created_at=T0, updated_at=T0, threads={"long": ThreadState(cursor=LONG - 6)},
        )
        assert (await store.create_record(head)).applied
        sent.clear()
        record, messages = await store.read_window(LINEAGE, "long")
        assert record is not None and record.id == "om-long"
        assert [m.text for m in messages] == [f"long {i}" for i in range(LONG - 5, LONG + 1)]
        query, params = sent.only(" messages")
        plan = pg_plan(postgres_url, query, params)
        assert pg_rows_read(plan, "messages") <= len(messages), pg_outline(plan)


def _fill_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    with conn:
        insert = (
            "INSERT INTO messages (id, thread_id, role, parts, created_at, metadata) "
            "VALUES (?, ?, 'user', ?, '2025-03-01T09:00:00+00:00', '{}')"
        )
        parts = '[{"type": "text", "text": "%s"}]'
        conn.executemany(insert, ((f"long-{i}", "long", parts % f"long {i}") for i in range(1, LONG + 1)))
        conn.executemany(
            insert, ((f"other-{i}", f"other-{i % 3}", parts % f"other {i}") for i in range(1, OTHERS + 1))
        )
        conn.execute("ANALYZE")  # as PRAGMA optimize would: the planner knows the thread's share
    conn.close()


async def _sqlite_store_with_a_long_old_thread(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.create_thread(Thread(id="long", resource_id="r1", created_at=T0))
        for i in range(3):
            await store.create_thread(Thread(id=f"other-{i}", resource_id="r2", created_at=T0))
    _fill_sqlite(path)


async def test_sqlite_reads_a_large_old_threads_messages_from_its_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "om.db"
    await _sqlite_store_with_a_long_old_thread(path)
    sent = SentToSQLite(monkeypatch)
    async with SQLiteStore(path) as store:
        newest = await store.list_messages("long", newest_first=True, limit=10)
        assert [m.text for m in newest] == [f"long {i}" for i in range(LONG, LONG - 10, -1)]
        head = ObservationRecord(
            id="om-long", lineage=LINEAGE, scope="thread", thread_id="long", resource_id="r1",
            created_at=T0, updated_at=T0, threads={"long": ThreadState(cursor=LONG - 5)},
        )
        assert (await store.create_record(head)).applied
        _, window = await store.read_window(LINEAGE, "long")
        assert [m.text for m in window] == [f"long {i}" for i in range(LONG - 4, LONG + 1)]
    reads = [s for s in sent.matching("SELECT m.seq") if "FROM messages" in s]
    assert len(reads) == 2, sent.log
    for statement in reads:
        plan = sqlite_plan(path, statement)
        assert any("SEARCH m USING INDEX messages_by_thread (thread_id=? AND seq>?)" in line for line in plan), plan
        assert not any("TEMP B-TREE" in line or line.startswith("SCAN") for line in plan), plan
