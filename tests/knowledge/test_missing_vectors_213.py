"""A live record whose vector is gone is embedded again (helper 213).

Its vector row can be lost: a table restored without ``knowledge_vectors``, a manual
``DELETE FROM knowledge_vectors`` to reset the index. Re-embedding (146949f) looked only at the
vectors stored, so such a record was never given one: ``reindex()`` queued 0 and search found it
by its words only, for ever. Now ``reindex()`` (``obsmem knowledge reindex``) also embeds the live
records without a vector, a bounded page of records at a time (with ``scope``, only that
subtree's), and the drains of a ``Knowledge`` given its embedder do a page per drain, once through
the store per store object; one left at the default embedder leaves them to ``reindex()``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge, RecordView, TrustState
from obsmem.knowledge import semantic_index

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"
OTHER = "org:other/resource:bob"


class Seen(LexicalHashEmbedder):
    """The default embedder, keeping the texts it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str]):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return await super().embed(texts)


async def _semantic(knowledge: Knowledge, query: str, scope: str) -> list[str]:
    return [r.text for r in await knowledge.index.semantic(query, scope, RecordView(), 5)]


async def _lose_vectors(knowledge: Knowledge) -> None:
    """What ``DELETE FROM knowledge_vectors`` does, on every adapter."""
    for vector in await knowledge.store.list_vectors():
        await knowledge.store.delete_vector(vector.document_id)
    assert await knowledge.store.list_vectors() == []


async def test_reindex_embeds_live_records_without_a_vector(knowledge: Knowledge) -> None:
    user = await knowledge.node("User", "person", ALICE)
    await knowledge.append(user.id, "their dog is called Rex", ALICE, reason="x")
    await knowledge.append(user.id, "they keep bees", f"{ALICE}/thread:t1", reason="x")
    gone = await knowledge.append(user.id, "they lived in Rome", ALICE, reason="x")
    await knowledge.remove(gone.id, ALICE, reason="moved")
    rejected = await knowledge.append(user.id, "they hate dogs", ALICE, reason="x", trust=TrustState.CANDIDATE)
    await knowledge.review.reject(rejected.id, ALICE, reason="wrong")
    await knowledge.drain()
    await _lose_vectors(knowledge)
    assert await _semantic(knowledge, "dog called Rex", ALICE) == []

    seen = Seen()
    fresh = Knowledge(knowledge.store, embedder=seen)
    assert await fresh.reindex() == 2  # the live ones: not the removed, nor the rejected
    assert sorted(seen.texts) == ["User: their dog is called Rex", "User: they keep bees"]
    assert await _semantic(fresh, "dog called Rex", ALICE) == ["their dog is called Rex"]
    assert sorted(v.scope for v in await knowledge.store.list_vectors()) == [ALICE, f"{ALICE}/thread:t1"]
    assert await knowledge.store.list_outbox() == []
    assert await fresh.reindex() == 0  # nothing left to do


async def test_reindex_at_the_default_embedder_fills_them_too(knowledge: Knowledge) -> None:
    user = await knowledge.node("User", "person", ALICE)
    await knowledge.append(user.id, "their dog is called Rex", ALICE, reason="x")
    await knowledge.drain()
    await _lose_vectors(knowledge)
    await knowledge.drain()  # a drain at the default leaves them (see the drain tests below)
    assert await knowledge.store.list_vectors() == []
    assert await knowledge.reindex() == 1  # on request, either way
    assert await _semantic(knowledge, "dog called Rex", ALICE) == ["their dog is called Rex"]


async def test_scoped_reindex_fills_only_its_own_scope(knowledge: Knowledge) -> None:
    alice = await knowledge.node("User", "person", ALICE)
    await knowledge.append(alice.id, "alice keeps bees", ALICE, reason="x")
    bob = await knowledge.node("User", "person", OTHER)
    await knowledge.append(bob.id, "bob's PIN hint is blue", OTHER, reason="x")
    await knowledge.drain()
    await _lose_vectors(knowledge)

    seen = Seen()
    assert await Knowledge(knowledge.store, embedder=seen).reindex(scope="org:acme") == 1
    assert seen.texts == ["User: alice keeps bees"]
    assert [v.scope for v in await knowledge.store.list_vectors()] == [ALICE]
    assert await knowledge.store.list_outbox() == []

    assert await Knowledge(knowledge.store, embedder=seen).reindex(scope=OTHER) == 1
    assert seen.texts[1:] == ["User: bob's PIN hint is blue"]


async def test_reindex_reads_missing_vectors_a_page_at_a_time(
    knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic_index, "REEMBED_PAGE", 2)
    user = await knowledge.node("User", "person", ALICE)
    for n in range(5):
        await knowledge.append(user.id, f"fact number {n}", ALICE, reason="x")
    await knowledge.drain()
    await _lose_vectors(knowledge)

    limits: list[int] = []
    store = knowledge.store
    original = store.queue_unindexed

    async def spy(*, after: str | None = None, limit: int = 200, scope: str | None = None) -> tuple[int, str | None]:
        limits.append(limit)
        return await original(after=after, limit=limit, scope=scope)

    monkeypatch.setattr(store, "queue_unindexed", spy)
    assert await Knowledge(store, embedder=LexicalHashEmbedder()).reindex() == 5
    assert limits and set(limits) == {2}
    assert len(await store.list_vectors()) == 5


async def test_a_drain_given_its_embedder_fills_a_page_per_drain(
    knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic_index, "REEMBED_PAGE", 2)
    user = await knowledge.node("User", "person", ALICE)
    for n in range(5):
        await knowledge.append(user.id, f"fact number {n}", ALICE, reason="x")
    await knowledge.drain()
    await _lose_vectors(knowledge)

    app_side = Knowledge(knowledge.store, embedder=LexicalHashEmbedder())  # the application's choice
    counts = []
    for _ in range(4):
        await app_side.drain()
        counts.append(len(await knowledge.store.list_vectors()))
    assert counts == [2, 4, 5, 5]
    assert (await _semantic(app_side, "fact number 3", ALICE))[:1] == ["fact number 3"]


async def test_a_drain_at_the_default_embedder_leaves_missing_vectors(knowledge: Knowledge) -> None:
    user = await knowledge.node("User", "person", ALICE)
    await knowledge.append(user.id, "their dog is called Rex", ALICE, reason="x")
    await knowledge.drain()
    await _lose_vectors(knowledge)
    tool = Knowledge(knowledge.store)  # a command, a server, a script at the default
    await tool.search("dog called Rex", ALICE)
    await tool.drain()
    assert await knowledge.store.list_vectors() == []


async def test_fresh_writes_are_embedded_once(knowledge: Knowledge) -> None:
    # the drain looks for missing vectors after applying the outbox: a record written and not yet
    # drained has no vector, and is not queued a second time
    seen = Seen()
    app_side = Knowledge(knowledge.store, embedder=seen)
    user = await app_side.node("User", "person", ALICE)
    await app_side.append(user.id, "their dog is called Rex", ALICE, reason="x")
    await app_side.append(user.id, "they keep bees", ALICE, reason="x")
    await app_side.drain()
    await app_side.reindex()
    assert sorted(seen.texts) == ["User: their dog is called Rex", "User: they keep bees"]
    assert await knowledge.store.list_outbox() == []


def test_cli_reindex_after_the_vectors_table_was_emptied(tmp_path: Path) -> None:
    path = tmp_path / "k.db"

    async def seed() -> None:
        async with Knowledge.sqlite(path) as knowledge:
            user = await knowledge.node("User", "person", ALICE)
            await knowledge.append(user.id, "their dog is called Rex", ALICE, reason="x")
            await knowledge.drain()

    async def found() -> list[str]:
        async with Knowledge.sqlite(path) as knowledge:
            return await _semantic(knowledge, "dog called Rex", ALICE)

    asyncio.run(seed())
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM knowledge_vectors")  # "reset the index"
    conn.commit()
    conn.close()
    assert asyncio.run(found()) == []

    result = CliRunner().invoke(app, ["knowledge", "reindex", "-k", str(path)])
    assert result.exit_code == 0, result.output
    assert "re-indexed 1 record" in result.stdout
    assert asyncio.run(found()) == ["their dog is called Rex"]
