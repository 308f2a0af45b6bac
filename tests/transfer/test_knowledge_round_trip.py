"""Export → import into empty stores → identical knowledge reads, on every adapter: search,
list_about (every view, both time axes), get_record, list_activity, the review queue, tombstones
and forgotten values, for the resource's scope, its threads' and its org's."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from obsmem import Store
from obsmem.clock import FakeClock
from obsmem.errors import TombstonedValueError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.lifecycle import forget_value
from obsmem.knowledge.store.contract import (
    KnowledgeStore,
    NewNodeMention,
    RecordDraft,
    RecordView,
    TrustState,
)
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.storage import MemoryStore, SQLiteStore
from obsmem.storage.postgres.store import PostgresStore
from obsmem.transfer import ImportConflictError, import_resource

from .helpers import RESOURCE, build_resource, export_text, snapshot
from .test_round_trip import postgres_url_source, postgres_url_target  # noqa: F401

pytestmark = pytest.mark.anyio

ORG = "org:acme"
RES = f"org:acme/resource:{RESOURCE}"
T1 = f"{RES}/thread:trip"
T2 = f"{RES}/thread:work"
BOB = "org:acme/resource:bob"
SCOPES = (ORG, RES, T1, T2)
VIEWS = (
    RecordView(),
    RecordView(include_candidates=True, include_deleted=True, include_superseded=True),
    RecordView(as_of=FakeClock().now()),
)

Pair = tuple[Store, KnowledgeStore]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_pair(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Pair]:
    """Empty message and knowledge stores of one adapter, sharing a file or database."""
    kind = request.param

    def make(name: str) -> Pair:
        if kind == "memory":
            return MemoryStore(), InMemoryKnowledgeStore(clock=FakeClock())
        if kind == "sqlite":
            path = tmp_path / f"{name}.db"
            return SQLiteStore(path), SQLiteKnowledgeStore(path, clock=FakeClock())
        url = request.getfixturevalue(f"postgres_url_{name}")
        return PostgresStore(url, migrate=False), PostgresKnowledgeStore(url, clock=FakeClock())

    return make


async def build_knowledge(knowledge: Knowledge) -> dict[str, str]:
    """Org, resource and thread knowledge of every kind: links, a timeline, candidates (one
    verified, one rejected with a tombstone), a soft delete, a rescope, a merge, a forgotten
    value, a refused write; plus another resource's knowledge that must not travel."""
    store = knowledge.store
    act = {"actor": "tester", "reason": "setup"}
    acme = await knowledge.node("Acme", "org", ORG, description="the company")
    alice = await knowledge.node("Alice", "person", RES, content="Alice works at [[Acme]]")
    ids = {"acme": acme.id, "alice": alice.id}
    await knowledge.append(acme.id, "Acme makes rockets", ORG, reason="said so")
    await knowledge.append(
        alice.id, "Alice lives in [[Munich]]", RES, reason="said so", when="2026-01", attribute="city"
    )
    await knowledge.append(
        alice.id, "Alice moved to [[Berlin]]", RES, reason="said so", when="2026-07-01", attribute="city"
    )
    await knowledge.append(alice.id, "Alice packs for the trip", T1, reason="said so", max_scope="thread")
    verified = await knowledge.append(
        alice.id, "Alice likes trains", T2, reason="guess", trust=TrustState.CANDIDATE
    )
    await store.set_trust(verified.id, T2, TrustState.VERIFIED, **act)
    rejected = await knowledge.append(
        alice.id, "Alice hates trains", T2, reason="guess", trust=TrustState.CANDIDATE
    )
    await store.set_trust(rejected.id, T2, TrustState.REJECTED, tombstone=True, **act)
    await knowledge.append(alice.id, "Alice may visit Rome", T1, reason="guess", trust=TrustState.CANDIDATE)
    removed = await knowledge.append(alice.id, "Alice owns a cat", RES, reason="said so")
    await knowledge.remove(removed.id, RES, reason="wrong")
    moved = await knowledge.append(alice.id, "Alice speaks German", T1, reason="said so")
    await knowledge.rescope(moved.id, T1, RES, reason="holds everywhere")
    dup = await knowledge.node("Al", "person", T1)
    await store.append_record(RecordDraft(dup.id, "Al is [[Alice]]", T1, mentions=[alice.id]), **act)
    await store.merge_nodes(dup.id, alice.id, dup.version, scope=T1, **act)
    await store.append_record(
        RecordDraft(alice.id, "Alice met [[Zoe]]", T1, mentions=[NewNodeMention("Zoe", T1)]), **act
    )
    await knowledge.append(alice.id, "Alice's passport is P-123", T1, reason="said so")
    await forget_value(knowledge, "P-123", RES, reason="user asked")
    with pytest.raises(TombstonedValueError):
        await knowledge.append(alice.id, "Alice hates trains", T2, reason="again")
    bob = await knowledge.node("Bob", "person", BOB)
    await knowledge.append(bob.id, "Bob works at [[Acme]]", BOB, reason="said so")
    await knowledge.drain()
    return ids


async def knowledge_reads(knowledge: Knowledge, ids: dict[str, str]) -> dict[str, Any]:
    store = knowledge.store
    out: dict[str, Any] = {}
    for scope in SCOPES:
        out[f"nodes:{scope}"] = await store.list_nodes(scope, limit=1000)
        out[f"activity:{scope}"] = await store.list_activity(scope, limit=1000)
        out[f"candidates:{scope}"] = await store.list_candidates(scope, limit=1000)
        out[f"tombstones:{scope}"] = await store.list_tombstones(scope)
        out[f"forgotten:{scope}"] = await store.list_forgotten(scope)
        for query in ("where does Alice live", "trains", "Acme rockets"):
            out[f"search:{scope}:{query}"] = [
                (h.kind, h.id, h.text, h.scope, h.score, h.record)
                for h in await knowledge.search(query, scope)
            ]
        for name, node_id in ids.items():
            for index, view in enumerate(VIEWS):
                page = await store.list_about(node_id, scope, view=view, limit=1000)
                out[f"about:{scope}:{name}:{index}"] = page
                for record in page.items:
                    out[f"record:{scope}:{record.id}:{index}"] = await store.get_record(
                        record.id, scope, view
                    )
            out[f"mentioning:{scope}:{name}"] = await store.list_mentioning(node_id, scope, limit=1000)
    return out


async def test_knowledge_round_trip_is_exact(make_pair: Callable[[str], Pair]) -> None:
    (source, ksource), (target, ktarget) = make_pair("source"), make_pair("target")
    async with source, ksource, target, ktarget:
        await build_resource(source)
        knowledge = Knowledge(ksource, actor="tester")
        ids = await build_knowledge(knowledge)
        before = await knowledge_reads(knowledge, ids)
        messages_before = await snapshot(source)
        text = await export_text(source, knowledge=knowledge, knowledge_scope=RES)
        assert "P-123" not in text and "Bob" not in text

        summary = await import_resource(target, io.StringIO(text), knowledge=ktarget)

        restored = Knowledge(ktarget, actor="tester")
        after = await knowledge_reads(restored, ids)
        assert summary.counts["knowledge_record"] == 11 and summary.counts["knowledge_forgotten"] == 1
        assert summary.skipped == {}
        assert any(before[f"search:{T2}:trains"]) and before[f"tombstones:{T2}"] and before[f"forgotten:{T1}"]
        assert before[f"candidates:{T1}"].items and before[f"about:{T1}:alice:1"].items
        for key in before:
            assert after[key] == before[key], key
        assert await ktarget.dump_scope(RES) == await ksource.dump_scope(RES)
        assert await snapshot(target) == messages_before
        # The forgotten value is still refused after the import.
        with pytest.raises(TombstonedValueError, match="forgotten value"):
            await restored.append(ids["alice"], "passport P-123", T1, reason="again")
        # A second import into the same knowledge store is refused, and writes nothing.
        async with MemoryStore() as other:
            with pytest.raises(ImportConflictError, match="knowledge store already holds"):
                await import_resource(other, io.StringIO(text), knowledge=ktarget)
            assert await other.list_all_threads() == []


async def test_knowledge_follows_into_resource() -> None:
    async with MemoryStore() as source, MemoryStore() as target:
        await build_resource(source)
        knowledge = Knowledge.in_memory(actor="tester")
        ids = await build_knowledge(knowledge)
        text = await export_text(source, knowledge=knowledge, knowledge_scope=RES)
        restored = Knowledge.in_memory(actor="tester")
        await import_resource(target, io.StringIO(text), knowledge=restored, into_resource="carol")
        carol = "org:acme/resource:carol"
        texts = {
            r.text for r in (await restored.store.list_about(ids["alice"], f"{carol}/thread:trip")).items
        }
        assert texts == {r.text for r in (await knowledge.store.list_about(ids["alice"], T1)).items}
        assert (await restored.store.list_nodes(RES)).items == (await restored.store.list_nodes(ORG)).items
        assert all(not e.scope.startswith(RES) for e in (await restored.store.dump_scope(carol)).events)
