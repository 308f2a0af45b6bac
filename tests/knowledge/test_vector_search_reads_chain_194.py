"""A knowledge search's vector half reads the vectors of the caller's scope chain, not every
vector of the store: other users' records add nothing to a query's reads (helper-194).

Before, the in-memory store answered each of a search's vector reads (one per scope of the chain)
by walking every vector it held: a thread's query over a store of 300 other users' records read
each of them three times. SQLite and PostgreSQL filter by scope in SQL through an index on it;
the rows they hand out are counted too (a control)."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore

pytestmark = pytest.mark.anyio

ORG = "org:acme"
ALICE = f"{ORG}/resource:alice"
THREAD = f"{ALICE}/thread:t1"
OTHERS = 300


class CountingVectors(dict[str, Any]):
    """The in-memory store's vector table, counting the rows it hands out (by id or in a walk)."""

    read = 0

    def __getitem__(self, key: str) -> Any:
        CountingVectors.read += 1
        return super().__getitem__(key)

    def values(self) -> Any:  # type: ignore[override]
        for value in super().values():
            CountingVectors.read += 1
            yield value


async def _store_with_others(knowledge: Knowledge) -> None:
    team = await knowledge.node("Team", "topic", ORG)
    await knowledge.append(team.id, "the team moved to Hamburg", ORG, reason="said")
    alice = await knowledge.node("User", "person", ALICE)
    await knowledge.append(alice.id, "their home city is Munich", ALICE, reason="said")
    await knowledge.append(alice.id, "they moved to Munich in May", THREAD, reason="said")
    for i in range(OTHERS):
        other = f"{ORG}/resource:user{i}"
        node = await knowledge.node("User", "person", other)
        await knowledge.append(node.id, f"their home city is Munich, street {i}", other, reason="said")
    assert await knowledge.drain() > OTHERS


async def test_a_query_reads_only_its_chains_vectors(knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch) -> None:
    await _store_with_others(knowledge)
    store = knowledge.store
    handed_out = 0
    real = type(store).list_vectors

    async def counted(self: Any, scope_keys: Any = None) -> Any:
        nonlocal handed_out
        found = await real(self, scope_keys)
        handed_out += len(found)
        return found

    monkeypatch.setattr(type(store), "list_vectors", counted)
    if isinstance(store, InMemoryKnowledgeStore):
        monkeypatch.setattr(store.tables, "vectors", CountingVectors(store.tables.vectors))
        CountingVectors.read = 0
    hits = await knowledge.search("where is their home city Munich", THREAD, limit=5)
    assert {h.text for h in hits} >= {"their home city is Munich", "they moved to Munich in May"}
    assert all("street" not in h.text for h in hits)
    assert handed_out == 3  # the org's, the resource's and the thread's record
    if isinstance(store, InMemoryKnowledgeStore):
        assert CountingVectors.read <= 3, CountingVectors.read  # 903 before: 301 + 2, per scope


async def test_a_rescoped_or_removed_record_leaves_its_old_scopes_reads(knowledge: Knowledge) -> None:
    """Control: the vector moves with its record (rescope), and goes with it (remove)."""
    alice = await knowledge.node("User", "person", ALICE)
    record = await knowledge.append(alice.id, "their home city is Munich", ALICE, reason="said")
    await knowledge.drain()
    assert [v.record_id for v in await knowledge.store.list_vectors([ALICE])] == [record.id]
    await knowledge.rescope(record.id, THREAD, THREAD, reason="private")
    await knowledge.drain()
    assert await knowledge.store.list_vectors([ALICE]) == []
    assert [v.record_id for v in await knowledge.store.list_vectors([THREAD])] == [record.id]
    await knowledge.remove(record.id, THREAD, reason="gone")
    await knowledge.drain()
    assert await knowledge.store.list_vectors([THREAD]) == []
    assert await knowledge.store.list_vectors() == []
