"""Deleting a thread or a resource while its knowledge capture is still running.

``memory.observe`` commits an observation and the knowledge hook starts capture as a background
task. The capture checks at its start that the thread exists, then writes node by node and record
by record; a ``delete_thread`` / ``delete_resource`` in between purges the knowledge scope while
the capture goes on. Every write that lands after that purge must be taken back, and nothing the
capture was refused may keep the value in the audit log: "delete means gone from every table".

The interleaving is driven by a gate in the knowledge store (no sleeps, no timing): the capture
stops right before one chosen write, the test deletes, then opens the gate.

On main (before the fix), with both stores in SQLite (the in-memory stores fail the same way):

* ``test_a_delete_while_capture_writes[thread]``: ``AssertionError: knowledge still holds the value
  after delete_thread: ['knowledge_records: ...their locker code is ZEBRAQUUX42...',
  'knowledge_events: ...']`` and a thread created again as ``t1`` for alice is served "their locker
  code is ZEBRAQUUX42" by ``knowledge.search``.
* ``test_a_delete_while_capture_writes[resource]``: ``AssertionError: knowledge still holds the value
  after delete_resource: ['knowledge_events: ...write-refused... "reason": "The user stated it: “My
  locker code is ZEBRAQUUX42”."...']`` (the refused write's audit event quotes the value).
* ``test_delete_resource_before_capture_resolves_its_node``: the capture creates the ``User`` node
  again in the purged resource's scope and writes the records under it: ``AssertionError: knowledge
  still holds the value after delete_resource: ['knowledge_records: ...', 'knowledge_events: ...']``
  and rows remain under ``org:default/resource:alice``.
* ``test_delete_thread_keeps_the_resource_knowledge_of_other_threads`` and
  ``test_a_thread_created_again_under_the_id_gets_nothing_of_the_deleted_one``: the same
  ``AssertionError`` (records ``their locker code is ZEBRAQUUX42`` … left in
  ``org:default/resource:alice/thread:t1``, served to the new ``t1``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import ActivityAction, KnowledgeStore, Node, Record, RecordDraft
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.knowledge.store.tables import under
from obsmem.storage import MemoryStore, SQLiteStore, Store

from .scan import MESSAGE_TABLES, scan, scan_knowledge, scan_sqlite

pytestmark = pytest.mark.anyio

SECRET = "ZEBRAQUUX42"
FACTS = [
    f"My locker code is {SECRET}.",
    f"My dog's name is {SECRET}dog.",
    f"I moved to {SECRET}ville last week.",
]
RESOURCE_SCOPE = "org:default/resource:alice"
THREAD_SCOPE = RESOURCE_SCOPE + "/thread:t1"


@dataclass
class Gate:
    """Stops the first call of ``method`` (whose text holds ``needle``, when given) until opened."""

    method: str
    needle: str | None = None
    armed: bool = False
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    opened: asyncio.Event = field(default_factory=asyncio.Event)

    async def pass_(self, method: str, text: str) -> None:
        if not self.armed or method != self.method or (self.needle is not None and self.needle not in text):
            return
        self.armed = False  # one stop only
        self.entered.set()
        await self.opened.wait()


class _Gated(TablesKnowledgeStore):
    gate: Gate | None = None

    async def append_record(self, draft: RecordDraft, *, actor: str, reason: str) -> Record:
        if self.gate is not None:
            await self.gate.pass_("append_record", draft.text)
        return await super().append_record(draft, actor=actor, reason=reason)

    async def resolve_node(self, name: str, scope: str) -> Node | None:
        if self.gate is not None:
            await self.gate.pass_("resolve_node", name)
        return await super().resolve_node(name, scope)


class GatedSQLite(_Gated, SQLiteKnowledgeStore):
    pass


class GatedInMemory(_Gated, InMemoryKnowledgeStore):
    pass


@dataclass
class Setup:
    memory: Memory
    knowledge: Knowledge
    kstore: KnowledgeStore
    store: Store

    def leftovers(self) -> list[str]:
        return scan_knowledge(self.kstore, SECRET)

    def memory_leftovers(self) -> list[str]:
        if isinstance(self.store, SQLiteStore):
            return scan_sqlite(self.store.path, SECRET, MESSAGE_TABLES)
        return scan(self.store, SECRET)


@pytest.fixture(params=["sqlite", "memory"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    kstore: GatedSQLite | GatedInMemory
    store: Store
    if request.param == "sqlite":
        kstore, store = GatedSQLite(tmp_path / "knowledge.db"), SQLiteStore(tmp_path / "memory.db")
    else:
        kstore, store = GatedInMemory(), MemoryStore()
    knowledge = Knowledge(kstore)
    config = MemoryConfig(
        observation={"message_tokens": 100_000, "buffer_tokens": False},
        reflection={"observation_tokens": 100_000},
        knowledge={"trust": "verified"},
    )
    memory = Memory(store, config=config, knowledge=knowledge)
    async with store, kstore:
        yield Setup(memory, knowledge, kstore, store)
        await memory.aclose()


async def _talk(memory: Memory) -> None:
    for text in FACTS:
        async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)]) as turn:
            await turn.step([Message.assistant("Noted.")])


async def _observe_with_gate(setup: Setup, gate: Gate) -> None:
    """Commit the observation (capture starts in the background) and wait at the gate."""
    assert isinstance(setup.kstore, _Gated)
    setup.kstore.gate = gate
    gate.armed = True
    await setup.memory.observe("t1")
    await gate.entered.wait()


async def _served_to_a_new_t1(setup: Setup) -> list[str]:
    """What knowledge gives a thread created again as ``t1`` for alice."""
    await setup.memory.create_thread("t1", "alice")
    hits = await setup.knowledge.search(f"locker code dog name {SECRET}", THREAD_SCOPE)
    return [h.text for h in hits if SECRET in h.text]


async def _rows_under(kstore: KnowledgeStore, scope: str) -> list[str]:
    dump = await kstore.dump_scope(scope)
    rows: list[Any] = [*dump.nodes, *dump.records, *dump.tombstones, *dump.forgotten, *dump.events]
    return [f"{type(r).__name__} {r.id} at {r.scope}" for r in rows if under(r.scope, scope)]


@pytest.mark.parametrize("deleted", ["thread", "resource"])
async def test_a_delete_while_capture_writes(setup: Setup, deleted: str) -> None:
    """The capture is about to write its first record (its node resolved) when the thread or the
    whole resource is deleted."""
    await _talk(setup.memory)
    gate = Gate("append_record", SECRET)
    await _observe_with_gate(setup, gate)

    if deleted == "thread":
        assert await setup.memory.delete_thread("t1")
    else:
        await setup.memory.delete_resource("alice")
    gate.opened.set()
    await setup.memory.settled()

    leftovers = setup.leftovers()
    assert leftovers == [], f"knowledge still holds the value after delete_{deleted}: {leftovers}"
    assert await _rows_under(setup.kstore, THREAD_SCOPE if deleted == "thread" else RESOURCE_SCOPE) == []
    assert setup.memory_leftovers() == []
    assert await _served_to_a_new_t1(setup) == []


async def test_delete_resource_before_capture_resolves_its_node(setup: Setup) -> None:
    await _talk(setup.memory)
    gate = Gate("resolve_node")
    await _observe_with_gate(setup, gate)  # nothing written by this capture yet

    await setup.memory.delete_resource("alice")
    gate.opened.set()
    await setup.memory.settled()

    leftovers = setup.leftovers()
    assert leftovers == [], f"knowledge still holds the value after delete_resource: {leftovers}"
    assert await _rows_under(setup.kstore, RESOURCE_SCOPE) == []
    # the one audit entry a resource purge leaves is at the org, naming the scope by digest only
    org_events = (await setup.kstore.list_activity("org:default", limit=100)).items
    assert all("alice" not in e.model_dump_json() for e in org_events)
    assert await _served_to_a_new_t1(setup) == []


async def test_delete_thread_keeps_the_resource_knowledge_of_other_threads(setup: Setup) -> None:
    """The capture taking back its writes after a delete_thread touches only the deleted thread:
    another thread's records and the resource's node stay."""
    memory = setup.memory
    async with memory.turn(thread_id="t2", resource_id="alice",
                           messages=[Message.user("My favourite colour is teal.")]) as turn:
        await turn.step([Message.assistant("Noted.")])
    await memory.observe("t2")
    await memory.settled()
    kept = [h.text for h in await setup.knowledge.search("favourite colour", RESOURCE_SCOPE + "/thread:t2")]
    assert any("teal" in text for text in kept)

    await _talk(memory)
    gate = Gate("append_record", SECRET)
    await _observe_with_gate(setup, gate)
    assert await memory.delete_thread("t1")
    gate.opened.set()
    await memory.settled()

    assert setup.leftovers() == []
    after = [h.text for h in await setup.knowledge.search("favourite colour", RESOURCE_SCOPE + "/thread:t2")]
    assert after == kept
    assert await setup.kstore.resolve_node("User", RESOURCE_SCOPE) is not None


async def test_a_capture_without_a_delete_is_unchanged(setup: Setup) -> None:
    await _talk(setup.memory)
    await setup.memory.observe("t1")
    await setup.memory.settled()
    hits = [h.text for h in await setup.knowledge.search(f"locker code {SECRET}", THREAD_SCOPE)]
    assert any(SECRET in text for text in hits)
    events = (await setup.kstore.list_activity(THREAD_SCOPE, limit=100)).items
    assert not [e for e in events if e.action is ActivityAction.SCOPE_PURGED]


async def test_a_thread_created_again_under_the_id_gets_nothing_of_the_deleted_one(setup: Setup) -> None:
    """delete_thread, then the same user opens a new ``t1`` before the old capture writes: the old
    capture's records do not land in the new thread's knowledge (the new thread's own data stays)."""
    await _talk(setup.memory)
    gate = Gate("append_record", SECRET)
    await _observe_with_gate(setup, gate)
    assert await setup.memory.delete_thread("t1")
    await setup.memory.create_thread("t1", "alice")
    gate.opened.set()
    await setup.memory.settled()

    assert setup.leftovers() == []
    hits = await setup.knowledge.search(f"locker code dog name {SECRET}", THREAD_SCOPE)
    assert [h.text for h in hits if SECRET in h.text] == []
    assert await setup.memory.get_thread("t1") is not None
