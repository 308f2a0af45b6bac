"""Rejecting a record reads the records it superseded, not every record of its node.

A reviewer's rejection brings back what curation removed as superseded by the rejected record
(:meth:`ReviewQueue.reject`). Before, each rejection paged through the whole node to find them:
a reviewer clearing M candidates of a node of N records read M x N records. Work is counted as
records the store materialises (decoded from a row, or copied out of the in-memory tables), not
timed: a rejection on a node of 4x the records must read about as many (under 1.5x).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store import memory as memory_tables
from obsmem.knowledge.store import sql_tables
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import Record, RecordDraft, RecordView, TrustState
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore

pytestmark = pytest.mark.anyio

RES = "org:acme/resource:alice"
EVERYTHING = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)


class Reads:
    """Records the store hands out of its tables, counted while ``counting``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.counting = False
        load, clone = sql_tables._load, memory_tables._clone

        def counted_load(cls: Any, doc: str) -> Any:
            if self.counting and cls is Record:
                self.count += 1
            return load(cls, doc)

        def counted_clone(model: Any) -> Any:
            if self.counting and isinstance(model, Record):
                self.count += 1
            return clone(model)

        monkeypatch.setattr(sql_tables, "_load", counted_load)
        monkeypatch.setattr(memory_tables, "_clone", counted_clone)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def knowledge(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[Knowledge]:
    clock = FakeClock()
    store: TablesKnowledgeStore
    if request.param == "memory":
        store = InMemoryKnowledgeStore(clock=clock)
    elif request.param == "sqlite":
        store = SQLiteKnowledgeStore(tmp_path / "k.db", clock=clock)
    else:
        store = PostgresKnowledgeStore(request.getfixturevalue("postgres_url"), clock=clock)
    async with Knowledge(store, actor="reviewer") as facade:
        yield facade


async def _reject_newer_value(knowledge: Knowledge, node_id: str, reads: Reads, round_: int) -> int:
    """Berlin, then Paris (a candidate) superseding it; the reviewer rejects Paris. The records read
    by the rejection; Berlin is back in the review queue."""
    store = knowledge.store
    act = {"actor": "curate", "reason": "test"}
    def draft(city: str) -> RecordDraft:
        text = f"home city is {city} ({round_})"
        return RecordDraft(node_id, text, RES, attribute="home city", trust=TrustState.CANDIDATE)

    berlin = await store.append_record(draft("Berlin"), **act)
    paris = await store.append_record(draft("Paris"), **act)
    await store.remove_record(berlin.id, RES, superseded_by=paris.id, **act)
    reads.count, reads.counting = 0, True
    await knowledge.review.reject(paris.id, RES, reason="she was joking")
    reads.counting = False
    back = await store.get_record(berlin.id, RES, EVERYTHING)
    assert back is not None and back.deleted_at is None and back.superseded_by is None
    assert berlin.id in [r.id for r in (await knowledge.review.pending(RES, limit=10)).items]
    return reads.count


async def _fill(knowledge: Knowledge, node_id: str, n: int, start: int) -> None:
    for i in range(start, start + n):
        draft = RecordDraft(node_id, f"fact number {i}", RES)
        await knowledge.store.append_record(draft, actor="t", reason="r")


async def test_a_rejection_reads_what_it_superseded_not_the_whole_node(
    knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = await knowledge.store.create_node("User", "person", RES, actor="t", reason="r")
    reads = Reads(monkeypatch)
    await _fill(knowledge, node.id, 100, 0)
    small = await _reject_newer_value(knowledge, node.id, reads, 1)
    await _fill(knowledge, node.id, 300, 100)  # the node now holds 4x the records
    large = await _reject_newer_value(knowledge, node.id, reads, 2)
    assert small > 0
    assert large / small < 1.5, f"a node of 4x the records: {small} -> {large} records read by a rejection"
