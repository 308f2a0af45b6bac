"""Sentinel tests with knowledge: plant a unique string in messages, tool calls and results,
observations across reflections, working memory *and* the knowledge store (node names,
contents, records of every trust and state, tombstones, audit events, outbox, vectors), with both
stores in one SQLite file, one PostgreSQL database or in memory; forget it (and separately delete
the resource); then scan every table of both stores: 0 occurrences. The next capture of the value
is refused as tombstoned, and that refusal is audited without the value.

``Memory(knowledge=…)`` carries both calls into the knowledge store (with the knowledge agents on,
so the conversation's own captures hold the value too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.knowledge import Knowledge
from obsmem.knowledge.capture import capture
from obsmem.knowledge.store.contract import ActivityAction, KnowledgeStore
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.postgres.store import PostgresStore

from ..knowledge.test_lifecycle import plant as plant_knowledge
from .scan import KNOWLEDGE_TABLES, MESSAGE_TABLES, scan, scan_knowledge, scan_postgres, scan_sqlite
from .test_forget import config, plant

pytestmark = pytest.mark.anyio

SENTINEL = "QZXSENTINEL42"


@dataclass
class Stores:
    store: Store
    knowledge: KnowledgeStore

    def scan(self, needle: str) -> list[str]:
        """Every table of both stores (one file or database for SQLite and PostgreSQL)."""
        if isinstance(self.store, SQLiteStore):
            return scan_sqlite(self.store.path, needle, MESSAGE_TABLES + KNOWLEDGE_TABLES)
        if isinstance(self.store, PostgresStore):
            return scan_postgres(self.store.url, needle, MESSAGE_TABLES + KNOWLEDGE_TABLES)
        return scan(self.store, needle) + scan_knowledge(self.knowledge, needle)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[Stores]:
    store: Store
    knowledge: KnowledgeStore
    if request.param == "memory":
        store, knowledge = MemoryStore(), InMemoryKnowledgeStore()
    elif request.param == "sqlite":
        store = SQLiteStore(tmp_path / "both.db")
        knowledge = SQLiteKnowledgeStore(tmp_path / "both.db")
    else:
        url = request.getfixturevalue("postgres_url")
        store, knowledge = PostgresStore(url, migrate=False), PostgresKnowledgeStore(url)
    async with store, knowledge:
        yield Stores(store, knowledge)


async def _refused_again(knowledge: Knowledge, node_id: str, scope: str) -> None:
    outcome = await capture(
        knowledge.store,
        node_id,
        f"badge {SENTINEL} again",
        context=scope,
        proposed_level="thread",
        ceiling="org",
        reason="re-observed",
        actor="capturer",
    )
    assert outcome.status == "refused-tombstoned"
    events = (await knowledge.store.list_activity(scope, limit=1000)).items
    assert [e.details["refusal"] for e in events if e.action is ActivityAction.WRITE_REFUSED][
        -1
    ] == "tombstoned"


async def test_forget_reaches_knowledge_and_leaves_no_trace(stores: Stores) -> None:
    knowledge = Knowledge(stores.knowledge, actor="tester")
    memory = Memory(stores.store, config=config("resource"), max_turn_wait=None, knowledge=knowledge)
    await plant(memory, "t1", "u1", SENTINEL)
    await plant(memory, "t2", "u1", "other-" + SENTINEL, turns=2)
    # Threads without an org are in the knowledge org "default" (as the knowledge agents scope them).
    ids = await plant_knowledge(knowledge, SENTINEL, res="org:default/resource:u1")
    assert sum(g.origin == "reflection" for g in await memory.list_generations("t1")) >= 2
    assert await stores.knowledge.list_vectors()
    planted = stores.scan(SENTINEL)
    assert any("knowledge" in hit for hit in planted) or isinstance(stores.store, MemoryStore)
    assert len(planted) > 20

    await memory.settled()
    counts = await memory.forget(SENTINEL)

    assert stores.scan(SENTINEL) == []
    assert stores.scan(SENTINEL.lower()) == []
    assert counts["messages"] > 0 and counts["knowledge_records"] >= 7 and counts["knowledge_nodes"] >= 1
    assert counts["knowledge_vectors"] >= 5 and counts["knowledge_forgotten"] == 1
    await _refused_again(knowledge, ids["jane"], "org:default/resource:u1/thread:t1")
    assert stores.scan(SENTINEL) == []
    await memory.aclose()


async def test_delete_resource_reaches_knowledge_and_leaves_no_trace(stores: Stores) -> None:
    resource = "RES-" + SENTINEL
    knowledge = Knowledge(stores.knowledge, actor="tester")
    memory = Memory(stores.store, config=config("thread"), max_turn_wait=None, knowledge=knowledge)
    await plant(memory, "t1", resource, SENTINEL)
    await plant(memory, "keep", "u2", "kept-value", turns=2)
    await plant_knowledge(knowledge, SENTINEL, res=f"org:default/resource:{resource}")
    kept = await plant_knowledge(knowledge, "kept-value", res="org:default/resource:u2")
    assert stores.scan(resource) and stores.scan(SENTINEL)
    await memory.settled()

    counts = await memory.delete_resource(resource)

    assert stores.scan(resource) == [] and stores.scan(SENTINEL) == []
    assert counts["threads"] == 1 and counts["knowledge_nodes"] >= 3 and counts["knowledge_records"] >= 9
    assert await stores.knowledge.get_node(kept["jane"], "org:default/resource:u2") is not None
    assert stores.scan("kept-value")
    await memory.aclose()


async def test_delete_thread_purges_the_threads_own_knowledge(stores: Stores) -> None:
    """A thread's knowledge scope holds what only that thread saw: deleting the thread purges it;
    the resource's records (shared by its other threads) stay."""
    knowledge = Knowledge(stores.knowledge, actor="tester")
    memory = Memory(stores.store, config=config("thread"), max_turn_wait=None, knowledge=knowledge)
    await plant(memory, "t1", "u1", SENTINEL)
    await plant(memory, "t2", "u1", "kept-value", turns=2)
    jane = await knowledge.node("Jane", "person", "org:default/resource:u1")
    await knowledge.append(jane.id, f"Jane's badge reads {SENTINEL}", "org:default/resource:u1/thread:t1", reason="t1")
    shared = await knowledge.append(jane.id, "Jane likes jazz", "org:default/resource:u1", reason="both")
    await memory.settled()
    assert stores.scan(SENTINEL)

    assert await memory.delete_thread("t1")

    assert stores.scan(SENTINEL) == []
    assert await stores.knowledge.get_record(shared.id, "org:default/resource:u1") is not None
    assert stores.scan("kept-value")
    await memory.aclose()
