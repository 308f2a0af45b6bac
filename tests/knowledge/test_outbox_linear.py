"""Draining the semantic outbox is linear in its entries (the project rule: no input makes a code
path superlinear).

Every appended record queues an outbox entry that an index worker claims and completes in
batches. Before the fix each claim and each completion read and decoded every open entry, and
completed entries stayed in the open-entry index's way, so draining a backlog of n entries (a
worker that was down for a day, a bulk import) cost n² / batch: 20,000 entries took 56 s on
SQLite. Work is counted, not timed (:mod:`tests.integrity.work_count`); the store is opened
inside the counted run so its connection thread is counted too.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from obsmem.knowledge import SQLiteKnowledgeStore
from obsmem.knowledge.store.contract import RecordDraft
from obsmem.knowledge.store.sql_tables import OPEN_OUTBOX
from obsmem.knowledge.store.sqlite import KNOWLEDGE_MIGRATIONS_TABLE

from tests.integrity.work_count import GROWTH_BOUND, work

RES = "org:acme/resource:alice"


def _fill(path: Path, n: int, drained: int) -> None:
    """A store at ``path`` with ``n`` queued entries, the oldest ``drained`` of them completed."""

    async def fill() -> None:
        async with SQLiteKnowledgeStore(path) as store:
            node = await store.create_node("User", "person", RES, actor="t", reason="r")
            for i in range(n):
                await store.append_record(RecordDraft(node.id, f"fact {i}", RES), actor="t", reason="r")
            left = drained
            while left > 0:
                batch = await store.claim_outbox("setup", limit=min(left, 100))
                await store.complete_outbox("setup", [e.id for e in batch])
                left -= len(batch)

    asyncio.run(fill())


def _drain(path: Path) -> tuple[int, int]:
    """The work of draining the store at ``path`` in batches of 25, and how many entries it took."""
    taken: list[int] = []

    def drain(_: str) -> None:
        async def run() -> None:
            async with SQLiteKnowledgeStore(path) as store:
                while batch := await store.claim_outbox("indexer", limit=25):
                    await store.complete_outbox("indexer", [e.id for e in batch])
                    taken.append(len(batch))
                assert await store.list_outbox() == []

        asyncio.run(run())

    return work(drain, ""), sum(taken)


def test_draining_a_backlog_is_linear_in_its_entries(tmp_path: Path) -> None:
    for n in (50, 200, 800):
        _fill(tmp_path / f"{n}.db", n, drained=0)
    _drain(tmp_path / "50.db")
    small, taken = _drain(tmp_path / "200.db")
    assert taken == 200
    large, taken = _drain(tmp_path / "800.db")
    assert taken == 800
    assert large / small < GROWTH_BOUND, f"4x the entries took {large / small:.1f}x the work"


def test_completed_entries_are_not_read_again_by_a_claim(tmp_path: Path) -> None:
    """A store that has indexed a long history: the next claim reads the open entries, not the
    completed ones before them (which are kept: their keys make enqueueing idempotent)."""
    for done in (200, 800):
        _fill(tmp_path / f"{done}.db", done + 25, drained=done)
    small, taken = _drain(tmp_path / "200.db")
    assert taken == 25
    large, taken = _drain(tmp_path / "800.db")
    assert taken == 25
    assert large / small < 1.5, f"4x the completed history took {large / small:.1f}x the work"
    query = "EXPLAIN QUERY PLAN " + OPEN_OUTBOX + " LIMIT ?"
    plan = " ".join(row[3] for row in sqlite3.connect(tmp_path / "800.db").execute(query, ("", 50)))
    assert "knowledge_outbox_open" in plan and "TEMP B-TREE" not in plan, plan


def test_a_file_made_before_the_open_outbox_index_gets_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _fill(path, 30, drained=10)
    with sqlite3.connect(path) as conn:  # back to the first schema: the (status, id) index
        conn.execute("DROP INDEX knowledge_outbox_open")
        conn.execute("CREATE INDEX knowledge_outbox_open ON knowledge_outbox (status, id)")
        conn.execute(f"DELETE FROM {KNOWLEDGE_MIGRATIONS_TABLE} WHERE name = 'm002_knowledge_open_outbox'")
    _, taken = _drain(path)
    assert taken == 20
    with sqlite3.connect(path) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'knowledge_outbox_open'").fetchone()
    assert "WHERE status <> 'completed'" in sql
