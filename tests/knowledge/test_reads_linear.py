"""Reading what is known about a node is linear in its records (the project rule: no input makes a
code path superlinear), on every knowledge store: the reads are written once
(:mod:`obsmem.knowledge.store.reads`).

Records with an attribute form timelines (a newer value of ``lives_in`` supersedes the older one).
Before the fix, each record's end of validity was found by scanning every record about the node
again, so a read of a node with n attribute records did n² visibility checks: the "User" node of a
long-lived agent, read by every curation run page by page, slowed down quadratically with what it
knew. Work is counted, not timed (:mod:`tests.integrity.work_count`): 4× the records must cost
under 8× the work.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import InMemoryKnowledgeStore, KnowledgeStore, RecordView, SQLiteKnowledgeStore
from obsmem.knowledge.store.contract import Record, RecordDraft
from obsmem.knowledge.store.values import When

from tests.integrity.work_count import GROWTH_BOUND, work

RES = "org:acme/resource:alice"
ATTRIBUTES = ("lives_in", "works_at", "drinks", "reads", "plays")
START = datetime(2024, 1, 1, tzinfo=UTC)


def _read_about(size: str) -> tuple[int, list[Record], list[Record]]:
    """The work of reading a node holding ``len(size)`` attribute records (five timelines), now and
    as of a past day, and what the two reads returned."""
    n = len(size)
    loop = asyncio.new_event_loop()
    try:
        store = InMemoryKnowledgeStore(clock=FakeClock())

        async def prepare() -> str:
            user = await store.create_node("User", "person", RES, actor="t", reason="r")
            for i in range(n):
                when = When(start=START + timedelta(days=i))
                draft = RecordDraft(user.id, f"value {i}", RES, attribute=ATTRIBUTES[i % 5], when=when)
                await store.append_record(draft, actor="t", reason="r")
            return user.id

        node = loop.run_until_complete(prepare())
        past = RecordView(as_of=START + timedelta(days=n // 2, hours=1))
        results: list[list[Record]] = []

        def read(_: str) -> None:
            now = loop.run_until_complete(store.list_about(node, RES, limit=500))
            then = loop.run_until_complete(store.list_about(node, RES, view=past, limit=500))
            results.extend([list(now.items), list(then.items)])

        return work(read, ""), results[0], results[1]
    finally:
        loop.close()


def test_reading_a_node_with_many_timelines_is_linear_in_its_records() -> None:
    _read_about("x" * 20)
    small, now, then = _read_about("x" * 100)
    assert sorted(r.text for r in now) == [f"value {i}" for i in range(95, 100)], "the newest of each timeline"
    assert len(then) == 5 and all(r.valid_until is not None for r in then), "each one's successor ends it"
    large, _, _ = _read_about("x" * 400)
    assert large / small < GROWTH_BOUND, f"4x the records took {large / small:.1f}x the work"


def _read_tombstoned(size: str, backend: str, tmp: Path) -> tuple[int, list[Record]]:
    """The work of reading a node holding ``len(size)`` records, half of them removed with a
    tombstone (a user who told the agent "forget that" about half of what it noted), on
    ``backend``, and what the read returned. For SQLite the store is opened inside the counted
    run, so its connection thread is counted too."""
    n = len(size)
    loop = asyncio.new_event_loop()
    path = tmp / f"knowledge-{n}.db"

    def open_store() -> KnowledgeStore:
        return InMemoryKnowledgeStore(clock=FakeClock()) if backend == "memory" else SQLiteKnowledgeStore(path)

    try:
        store = open_store()

        async def prepare() -> str:
            user = await store.create_node("User", "person", RES, actor="t", reason="r")
            for i in range(n):
                record = await store.append_record(
                    RecordDraft(user.id, f"note number {i}", RES), actor="t", reason="r"
                )
                if i % 2:
                    await store.remove_record(record.id, RES, actor="t", reason="r", tombstone=True)
            return user.id

        node = loop.run_until_complete(prepare())
        results: list[Record] = []

        def read(_: str) -> None:
            reader = store if backend == "memory" else open_store()
            try:
                page = loop.run_until_complete(reader.list_about(node, RES, limit=1000))
                results.extend(page.items)
            finally:
                if reader is not store:
                    loop.run_until_complete(reader.close())

        counted = work(read, "")
        loop.run_until_complete(store.close())
        return counted, results
    finally:
        loop.close()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_reading_a_node_with_many_tombstones_is_linear_in_its_records(backend: str, tmp_path: Path) -> None:
    """Before the fix every record read all the node's tombstones again (one query a record on the
    SQL stores) and compared each with it: n records and n/2 tombstones cost n²/2."""
    _read_tombstoned("x" * 20, backend, tmp_path)
    small, kept = _read_tombstoned("x" * 100, backend, tmp_path)
    assert sorted(r.text for r in kept) == sorted(f"note number {i}" for i in range(0, 100, 2))
    large, _ = _read_tombstoned("x" * 400, backend, tmp_path)
    assert large / small < GROWTH_BOUND, f"4x the records took {large / small:.1f}x the work"
