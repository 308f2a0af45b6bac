"""After the knowledge embedder changes, the records indexed under the old one are found by
meaning again (helper-200).

Before, a search's vector half skipped every vector another embedder made, and nothing re-embedded
them: the outbox holds changes, and an embedder change is none. A store written with
``LexicalHashEmbedder(256)`` and opened with ``LexicalHashEmbedder()`` (``lexical-hash-384``) found
its old records by their words only, for ever. Now each drain re-queues, a bounded page at a time, the
vectors another embedder made (through the outbox, so an erase meanwhile wins), and
``Knowledge.reindex()`` (``obsmem knowledge reindex``) does the whole store, or a scope's subtree,
at once. Meanwhile search still finds the old records through its lexical half. (The drains of a
``Knowledge`` given its embedder do: one left at the default converts no one's vectors, see
tests/knowledge/test_embedder_guest.py.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

ORG = "org:acme"
ALICE = f"{ORG}/resource:alice"
BOB = f"{ORG}/resource:bob"
OLD = LexicalHashEmbedder(256)
NEW = LexicalHashEmbedder()  # lexical-hash-384, the default, given explicitly: the application's choice


async def _semantic(knowledge: Knowledge, query: str, scope: str) -> list[str]:
    return [r.text for r in await knowledge.index.semantic(query, scope, RecordView(), 5)]


async def _embedders(knowledge: Knowledge) -> dict[str, int]:
    counts: dict[str, int] = {}
    for vector in await knowledge.store.list_vectors():
        counts[vector.embedder] = counts.get(vector.embedder, 0) + 1
    return counts


async def test_old_records_found_by_meaning_after_drain(knowledge: Knowledge) -> None:
    old = Knowledge(knowledge.store, embedder=OLD)
    user = await old.node("User", "person", ALICE)
    await old.append(user.id, "their dog is called Rex", ALICE, reason="x")
    await old.drain()
    assert await _semantic(old, "dog called Rex", ALICE) == ["their dog is called Rex"]

    new = Knowledge(knowledge.store, embedder=NEW)  # another embedder, over the same store
    assert [h.text for h in await new.search("dog called Rex", ALICE)] == ["their dog is called Rex"]
    await new.drain()
    assert await _semantic(new, "dog called Rex", ALICE) == ["their dog is called Rex"]
    assert await _embedders(new) == {new.embedder.name: 1}
    assert await new.store.list_outbox() == []


async def test_sqlite_reopened_with_another_embedder(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    async with Knowledge.sqlite(path, embedder=OLD) as knowledge:
        user = await knowledge.node("User", "person", ALICE)
        await knowledge.append(user.id, "their dog is called Rex", ALICE, reason="x")
        await knowledge.drain()
    async with Knowledge.sqlite(path, embedder=NEW) as knowledge:
        hits = await knowledge.search("dog called Rex", ALICE)  # drains first
        assert [h.text for h in hits] == ["their dog is called Rex"]
        assert await _semantic(knowledge, "dog called Rex", ALICE) == ["their dog is called Rex"]


async def test_a_drain_re_embeds_a_page_reindex_the_rest(knowledge: Knowledge) -> None:
    old = Knowledge(knowledge.store, embedder=OLD)
    user = await old.node("User", "person", ALICE)
    for i in range(260):
        await old.append(user.id, f"fact number {i}", ALICE, reason="x")
    await old.drain()

    new = Knowledge(knowledge.store, embedder=NEW)
    await new.drain()  # one bounded page of the old vectors, not all of them
    counts = await _embedders(new)
    assert 0 < counts.get(new.embedder.name, 0) < 260
    assert sum(counts.values()) == 260

    assert await new.reindex() == 260 - counts[new.embedder.name]
    assert await _embedders(new) == {new.embedder.name: 260}
    assert await new.store.list_outbox() == []
    assert await new.reindex() == 0  # nothing left to do


async def test_drains_of_fresh_wrappers_go_on_where_the_last_stopped(knowledge: Knowledge) -> None:
    """A server wraps its store in a new ``Knowledge`` per request: each drain goes on."""
    old = Knowledge(knowledge.store, embedder=OLD)
    user = await old.node("User", "person", ALICE)
    for i in range(260):
        await old.append(user.id, f"fact number {i}", ALICE, reason="x")
    await old.drain()
    await Knowledge(knowledge.store, embedder=NEW).drain()
    await Knowledge(knowledge.store, embedder=NEW).drain()
    assert await _embedders(knowledge) == {LexicalHashEmbedder().name: 260}


async def test_reindex_of_a_scope_leaves_others(knowledge: Knowledge) -> None:
    old = Knowledge(knowledge.store, embedder=OLD)
    for scope, text in ((ALICE, "alice keeps bees"), (f"{ALICE}/thread:t1", "alice likes tea"), (BOB, "bob keeps bees")):
        node = await old.node("User", "person", scope)
        await old.append(node.id, text, scope, reason="x")
    await old.drain()

    new = Knowledge(knowledge.store, embedder=NEW)
    assert await new.reindex(scope=ALICE) == 2
    by_scope = {v.scope: v.embedder for v in await new.store.list_vectors()}
    assert by_scope == {ALICE: new.embedder.name, f"{ALICE}/thread:t1": new.embedder.name, BOB: OLD.name}


async def test_removed_record_gets_no_vector_back(knowledge: Knowledge) -> None:
    old = Knowledge(knowledge.store, embedder=OLD)
    user = await old.node("User", "person", ALICE)
    kept = await old.append(user.id, "their dog is called Rex", ALICE, reason="x")
    gone = await old.append(user.id, "their cat is called Tom", ALICE, reason="x")
    await old.drain()
    await old.remove(gone.id, ALICE, reason="wrong")  # a soft delete: its vector goes with the drain
    new = Knowledge(knowledge.store, embedder=NEW)
    await new.drain()
    assert {v.record_id: v.embedder for v in await new.store.list_vectors()} == {kept.id: new.embedder.name}


async def test_erase_between_queue_and_drain_wins(knowledge: Knowledge) -> None:
    old = Knowledge(knowledge.store, embedder=OLD)
    user = await old.node("User", "person", ALICE)
    record = await old.append(user.id, "their dog is called Rex", ALICE, reason="x")
    await old.drain()
    new = Knowledge(knowledge.store, embedder=NEW)
    assert await new.store.queue_reembed(new.embedder.name) == (1, None)
    await new.erase([record.id], ALICE, reason="asked to")
    await new.drain()
    assert await new.store.list_vectors() == []
    assert [e for e in await new.store.list_outbox(include_completed=True) if e.record_id == record.id] == []


def test_cli_reindex(tmp_path: Path) -> None:
    path = tmp_path / "k.db"

    async def seed() -> None:
        async with Knowledge.sqlite(path, embedder=OLD) as knowledge:
            user = await knowledge.node("User", "person", ALICE)
            await knowledge.append(user.id, "their dog is called Rex", ALICE, reason="x")
            await knowledge.drain()

    async def embedders() -> dict[str, int]:
        async with Knowledge.sqlite(path, embedder=NEW) as knowledge:
            return await _embedders(knowledge)

    asyncio.run(seed())
    result = CliRunner().invoke(app, ["knowledge", "reindex", "-k", str(path)])
    assert result.exit_code == 0, result.output
    assert "re-indexed 1 record" in result.stdout
    assert asyncio.run(embedders()) == {LexicalHashEmbedder().name: 1}

    missing = CliRunner().invoke(app, ["knowledge", "reindex", "-k", str(tmp_path / "typo.db")])
    assert missing.exit_code != 0
    assert not (tmp_path / "typo.db").exists()
