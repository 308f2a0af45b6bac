"""Paging through threads with a cursor: every thread once, in the listing's order, each page at the
cost of a page.

The storage audit's finding: ``list_all_threads(limit, offset)`` had no index on its order
(``created_us, pk``), so every page scanned and sorted the whole table and then skipped
``offset`` rows: paging 100k threads took 7 s on SQLite, 12 s on PostgreSQL (``forget`` and
``obsmem threads`` page through them all). ``list_threads(resource_id, …)`` skipped ``offset`` rows
too. Both now take ``after``, the id of the last thread of the previous page, and start there
from an index; and a thread deleted between two offset pages no longer shifts the next page (the
first thread of it was skipped).
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest

from obsmem.errors import ThreadNotFoundError
from obsmem.storage import SQLiteStore, Store, migrations
from obsmem.storage.migrations import MIGRATIONS_TABLE, SQLITE, MigrationSet
from obsmem.storage.paging import all_threads
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Thread

from tests.conformance.conftest import store  # noqa: F401 - the three stores, one fixture

from .plans import SentToPostgres, SentToSQLite, pg_nodes, pg_outline, pg_plan, pg_rows_read, sqlite_plan

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


async def _page_with_cursor(store: Store, resource_id: str | None, limit: int) -> list[str]:
    ids: list[str] = []
    while True:
        after = ids[-1] if ids else None
        if resource_id is None:
            page = await store.list_all_threads(limit=limit, after=after)
        else:
            page = await store.list_threads(resource_id, limit=limit, after=after)
        ids += [t.id for t in page]
        if len(page) < limit:
            return ids


async def _make_threads(store: Store) -> None:
    """Two resources, created out of time order, with ties that insertion order breaks and an
    instant written with another offset."""
    minute = timedelta(minutes=1)
    plan = [
        ("late", "r2", T0 + 9 * minute), ("first", "r1", T0), ("tie-a", "r1", T0 + minute),
        ("tie-b", "r2", T0 + minute), ("tie-c", "r1", T0 + minute), ("tie-d", "r1", T0 + minute),
        ("mid", "r2", (T0 + 4 * minute).astimezone(timezone(timedelta(hours=-7)))),
        ("tie-e", "r2", T0 + minute), ("second", "r1", T0 + 30 * timedelta(seconds=1)),
        ("later", "r1", T0 + 8 * minute), ("mid-2", "r1", T0 + 4 * minute),
    ]
    for thread_id, resource_id, created_at in plan:
        await store.create_thread(Thread(id=thread_id, resource_id=resource_id, created_at=created_at))


async def test_paging_with_the_cursor_returns_every_thread_once_in_the_listing_order(store: Store) -> None:
    await _make_threads(store)
    listing = [t.id for t in await store.list_all_threads()]
    assert listing == [
        "first", "second", "tie-a", "tie-b", "tie-c", "tie-d", "tie-e", "mid", "mid-2", "later", "late",
    ]
    for limit in (1, 2, 3, 5, 11, 12):
        assert await _page_with_cursor(store, None, limit) == listing
        for resource in ("r1", "r2"):
            in_resource = [t.id for t in await store.list_threads(resource)]
            assert await _page_with_cursor(store, resource, limit) == in_resource
    # The page after a thread is what follows it in the listing; offset counts from there.
    assert [t.id for t in await store.list_all_threads(after="tie-b", limit=3)] == ["tie-c", "tie-d", "tie-e"]
    assert [t.id for t in await store.list_all_threads(after="tie-b", limit=2, offset=2)] == ["tie-e", "mid"]
    assert [t.id for t in await store.list_threads("r1", after="tie-a", limit=2)] == ["tie-c", "tie-d"]
    assert await store.list_all_threads(after="late") == []
    whole = await store.list_all_threads(after="first", limit=1)
    assert whole == [await store.get_thread("second")]  # whole threads, as stored
    with pytest.raises(ThreadNotFoundError):
        await store.list_all_threads(after="no-such-thread")
    with pytest.raises(ThreadNotFoundError):
        await store.list_threads("r1", after="no-such-thread")


async def test_threads_created_or_deleted_between_pages_neither_hide_nor_repeat_the_others(store: Store) -> None:
    for i in range(10):
        await store.create_thread(Thread(id=f"t{i}", resource_id="r1", created_at=T0 + timedelta(minutes=i)))
    first = [t.id for t in await store.list_all_threads(limit=4)]
    assert first == ["t0", "t1", "t2", "t3"]
    # Meanwhile: a thread already read and one not yet read go, a thread is created.
    assert await store.delete_thread("t1") and await store.delete_thread("t6")
    await store.create_thread(Thread(id="new", resource_id="r1", created_at=T0 + timedelta(days=1)))
    rest = [t.id for t in await store.list_all_threads(limit=4, after=first[-1])]
    rest += [t.id for t in await store.list_all_threads(limit=4, after=rest[-1])]
    assert first + rest == ["t0", "t1", "t2", "t3", "t4", "t5", "t7", "t8", "t9", "new"]
    # The same, by resource.
    first = [t.id for t in await store.list_threads("r1", limit=3)]
    assert await store.delete_thread("t0")
    rest = [t.id for t in await store.list_threads("r1", limit=10, after=first[-1])]
    assert first + rest == ["t0", "t2", "t3", "t4", "t5", "t7", "t8", "t9", "new"]


class _Meanwhile:
    """A store whose thread listings are followed by another writer's changes, once per page."""

    def __init__(self, store: Store, changes: list[Any]) -> None:
        self.store = store
        self.changes = changes

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def list_all_threads(self, **kwargs: Any) -> list[Thread]:
        page = await self.store.list_all_threads(**kwargs)
        if page and self.changes:
            await self.changes.pop(0)(page)
        return page

    async def list_threads(self, resource_id: str, **kwargs: Any) -> list[Thread]:
        page = await self.store.list_threads(resource_id, **kwargs)
        if page and self.changes:
            await self.changes.pop(0)(page)
        return page


async def test_all_threads_reads_each_thread_once_while_others_come_and_go(store: Store) -> None:
    for i in range(12):
        await store.create_thread(Thread(id=f"t{i:02d}", resource_id="r1", created_at=T0 + timedelta(minutes=i // 2)))

    async def delete_the_last_read(page: list[Thread]) -> None:  # the next page's cursor
        assert await store.delete_thread(page[-1].id)

    async def delete_a_whole_page_and_add_one(page: list[Thread]) -> None:  # every cursor of the page
        for thread in page:
            assert await store.delete_thread(thread.id)
        await store.create_thread(Thread(id="new", resource_id="r1", created_at=T0 + timedelta(days=1)))

    async def delete_one_not_yet_read(page: list[Thread]) -> None:
        assert await store.delete_thread("t11")

    changes = [delete_the_last_read, delete_a_whole_page_and_add_one, delete_one_not_yet_read]
    read = await all_threads(_Meanwhile(store, changes), page=3)
    assert [t.id for t in read] == [f"t{i:02d}" for i in range(11)] + ["new"]
    assert changes == []
    left = ["t00", "t01", "t06", "t07", "t08", "t09", "t10", "new"]
    assert [t.id for t in await all_threads(store, "r1", page=2)] == left
    assert [t.id for t in await all_threads(store)] == left
    assert await all_threads(store, "nobody") == []


# -- the work of a page --------------------------------------------------------------------------

THREADS = 3_000


def _fill_sqlite(path: Path) -> None:
    """THREADS threads in three resources, inserted in bulk, newest first; every tenth shares its
    instant with the next (ties broken by insertion order)."""
    at = T0.isoformat()
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO threads (id, resource_id, metadata, created_at, created_us, updated_at, version) "
            "VALUES (?, ?, '{}', ?, ?, ?, 1)",
            ((f"t{i:05d}", f"r{i % 3}", at, (THREADS - i) - (i % 10 == 0), at) for i in range(THREADS)),
        )
    conn.close()


async def test_sqlite_pages_every_thread_from_an_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "om.db"
    async with SQLiteStore(path) as store:
        await store.migrate()
    _fill_sqlite(path)
    with sqlite3.connect(path) as conn:
        listing = [row[0] for row in conn.execute("SELECT id FROM threads ORDER BY created_us, pk")]
        by_resource = [row[0] for row in conn.execute("SELECT id FROM threads WHERE resource_id = 'r1' "
                                                      "ORDER BY created_us, pk")]
    sent = SentToSQLite(monkeypatch)
    async with SQLiteStore(path) as store:
        assert await _page_with_cursor(store, None, 500) == listing
        assert await _page_with_cursor(store, "r1", 300) == by_resource
    pages = [statement for statement in sent.matching("SELECT * FROM threads") if "ORDER BY" in statement]
    assert len(pages) == THREADS // 500 + 1 + len(by_resource) // 300 + 1, sent.log
    for statement in pages:
        plan = sqlite_plan(path, statement)
        assert not any("TEMP B-TREE" in line for line in plan), (statement, plan)
        assert all("USING INDEX" in line or "USING COVERING INDEX" in line
                   for line in plan if line.startswith(("SCAN", "SEARCH"))), (statement, plan)
    # Each page costs what a page costs, wherever it starts: the last as the second.
    costs = sent.steps_per_statement("SELECT * FROM threads")
    assert max(costs[1:6]) < 2 * min(costs[1:6]), costs


def _fill_postgres(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO threads (id, resource_id, created_us, version, doc) "
            "SELECT 't' || lpad(g::text, 5, '0'), 'r' || (g %% 3), (%(n)s - g) - (g %% 10 = 0)::int, 1, "
            "json_build_object('id', 't' || lpad(g::text, 5, '0'), 'resource_id', 'r' || (g %% 3), "
            "'created_at', '2025-03-01T09:00:00Z', 'updated_at', '2025-03-01T09:00:00Z')::text "
            "FROM generate_series(0, %(n)s - 1) AS g",
            {"n": THREADS},
        )
        conn.execute("ANALYZE threads")


async def test_postgres_pages_every_thread_from_an_index(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill_postgres(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        listing = [row[0] for row in conn.execute("SELECT id FROM threads ORDER BY created_us, pk")]
    sent = SentToPostgres(monkeypatch)
    async with PostgresStore(postgres_url) as store:
        assert await _page_with_cursor(store, None, 500) == listing
    pages = [entry for entry in sent.log if "FROM threads" in entry[0] and "ORDER BY" in entry[0]]
    assert len(pages) == THREADS // 500 + 1
    for query, params in pages:
        plan = pg_plan(postgres_url, query, params)
        scans = [node for node in pg_nodes(plan) if node.get("Relation Name") == "threads"]
        assert all(node["Node Type"] == "Index Scan" for node in scans), pg_outline(plan)
        assert any(node.get("Index Name") == "threads_by_creation" for node in scans), pg_outline(plan)
        assert pg_rows_read(plan, "threads") <= 500 + 1, pg_outline(plan)  # the page, and its cursor's row


# -- an existing database gets the index ---------------------------------------------------------


async def test_a_sqlite_database_made_before_the_index_gets_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = MigrationSet(SQLITE)
    for step in migrations.SQLITE_MIGRATIONS.all():
        if step.name != "m007_threads_by_creation":
            before.register(step.apply)
    conn = sqlite3.connect(path, isolation_level=None)
    before.migrate(conn)
    conn.close()
    async with SQLiteStore(path) as store:
        await _make_threads(store)
        assert len(await _page_with_cursor(store, None, 2)) == 11
    with sqlite3.connect(path) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'threads_by_creation'").fetchone()
        assert "threads (created_us, pk)" in sql
        assert conn.execute(
            f"SELECT 1 FROM {MIGRATIONS_TABLE} WHERE name = 'm007_threads_by_creation'"
        ).fetchone() == (1,)


async def test_a_postgres_database_made_before_the_index_gets_it(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # back to the schema before the step
        conn.execute("DROP INDEX IF EXISTS threads_by_creation")
        conn.execute(f"DELETE FROM {MIGRATIONS_TABLE} WHERE name = 'm005_threads_by_creation'")
    async with PostgresStore(postgres_url) as store:
        await _make_threads(store)
        assert len(await _page_with_cursor(store, None, 2)) == 11
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'threads_by_creation'").fetchone()
    assert row is not None and "(created_us, pk)" in row[0]
