"""``forget_value(..., within=)``: a forget that stops at a scope, leaving the broader scopes of
its chain alone (what a caller confined to one resource may change), on every adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import InvalidInputError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.lifecycle import forget_value
from obsmem.knowledge.store.contract import KnowledgeStore
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore

pytestmark = pytest.mark.anyio

ORG, RES, BOB = "org:acme", "org:acme/resource:alice", "org:acme/resource:bob"
T1 = f"{RES}/thread:t1"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def kstore(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[KnowledgeStore]:
    store: KnowledgeStore
    if request.param == "memory":
        store = InMemoryKnowledgeStore(clock=FakeClock())
    elif request.param == "sqlite":
        store = SQLiteKnowledgeStore(tmp_path / "knowledge.db", clock=FakeClock())
    else:
        store = PostgresKnowledgeStore(request.getfixturevalue("postgres_url"), clock=FakeClock())
    async with store:
        yield store


async def test_forget_within_a_resource_keeps_the_orgs_rows(kstore: KnowledgeStore) -> None:
    knowledge = Knowledge(kstore, actor="tester")
    org_node = await knowledge.node("Phoenix", "project", ORG)
    org_record = await knowledge.append(org_node.id, "VPN rotates on the Phoenix schedule", ORG, reason="said")
    alice = await knowledge.node("Alice", "person", RES)
    mine = await knowledge.append(alice.id, "Alice owns the Phoenix budget", RES, reason="said")
    in_thread = await knowledge.append(alice.id, "Alice said Phoenix twice", T1, reason="said")
    bob = await knowledge.node("Bob", "person", BOB)
    bobs = await knowledge.append(bob.id, "Bob leads Phoenix", BOB, reason="said")

    counts = await forget_value(kstore, "Phoenix", T1, actor="alice", reason="asked", within=RES)

    assert counts["records"] == 2 and counts["nodes"] == 0
    assert await kstore.load_record(mine.id) is None and await kstore.load_record(in_thread.id) is None
    assert await kstore.load_record(org_record.id) is not None and await kstore.load_node(org_node.id) is not None
    assert await kstore.load_record(bobs.id) is not None

    # without within, the chain up to the org is reached, as before
    await forget_value(kstore, "Phoenix", T1, actor="org", reason="asked")
    assert await kstore.load_record(org_record.id) is None and await kstore.load_node(org_node.id) is None
    assert await kstore.load_record(bobs.id) is not None  # a sibling's, never on the chain


async def test_forget_outside_within_is_refused_before_anything_goes(kstore: KnowledgeStore) -> None:
    knowledge = Knowledge(kstore, actor="tester")
    node = await knowledge.node("Org", "org", ORG)
    record = await knowledge.append(node.id, "Phoenix", ORG, reason="said")
    for scope in (ORG, BOB):
        with pytest.raises(InvalidInputError):
            await forget_value(kstore, "Phoenix", scope, actor="alice", reason="asked", within=RES)
    assert await kstore.load_record(record.id) is not None


async def test_memory_forget_knowledge_within(anyio_backend: str) -> None:
    from obsmem import Memory
    from obsmem.types import Message

    knowledge = Knowledge.in_memory()
    memory = Memory("memory://", max_turn_wait=None, knowledge=knowledge)
    try:
        await memory.create_thread("t1", "alice", org_id="acme")
        await memory.save_messages("t1", [Message.user("Remind me of Phoenix")])
        org = await knowledge.append((await knowledge.node("Acme", "org", ORG)).id, "Phoenix VPN", ORG, reason="s")
        alice = await knowledge.append((await knowledge.node("Alice", "person", RES)).id, "Phoenix", RES, reason="s")
        with pytest.raises(InvalidInputError):  # refused before anything is deleted
            await memory.forget("Phoenix", thread_id="t1", knowledge_within=BOB)
        assert "Phoenix" in str(await memory.store.list_messages("t1"))

        await memory.forget("Phoenix", thread_id="t1", knowledge_within=RES)
        assert "Phoenix" not in str(await memory.store.list_messages("t1"))
        assert await knowledge.store.load_record(alice.id) is None
        assert await knowledge.store.load_record(org.id) is not None
    finally:
        await memory.aclose()
