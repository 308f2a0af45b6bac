"""The semantic outbox: idempotency keys, per-document serialisation, claim/complete/release, leases."""

from __future__ import annotations

from datetime import timedelta

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import RecordDraft, StoredVector

from .world import ACT, RES, T1

pytestmark = pytest.mark.anyio


async def test_rescope_enqueues_delete_old_then_upsert_new(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    record = await kstore.append_record(RecordDraft(jane.id, "fact", T1), **ACT)
    await kstore.rescope_record(record.id, T1, RES, **ACT)
    entries = [(e.operation, e.scope, e.idempotency_key) for e in await kstore.list_outbox()]
    doc = f"knowledge:record:{record.id}"
    assert entries == [
        ("upsert", T1, f"{doc}:upsert:1"),
        ("delete", T1, f"{doc}:delete:2"),
        ("upsert", RES, f"{doc}:upsert:2"),
    ]


async def test_per_document_serialisation(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    first = await kstore.append_record(RecordDraft(jane.id, "one", RES), **ACT)
    second = await kstore.append_record(RecordDraft(jane.id, "two", RES), **ACT)
    await kstore.remove_record(first.id, RES, **ACT)
    batch = await kstore.claim_outbox("w1")
    assert [(e.record_id, e.operation) for e in batch] == [(first.id, "upsert"), (second.id, "upsert")]
    assert await kstore.claim_outbox("w2") == []  # first's delete waits behind its open upsert
    assert await kstore.complete_outbox("w2", [batch[0].id]) == 0  # not w2's to complete
    assert await kstore.complete_outbox("w1", [batch[0].id]) == 1
    follow_up = await kstore.claim_outbox("w2")
    assert [(e.record_id, e.operation) for e in follow_up] == [(first.id, "delete")]


async def test_release_and_stale_reclaim_count_attempts(
    kstore: TablesKnowledgeStore, clock: FakeClock
) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    await kstore.append_record(RecordDraft(jane.id, "fact", RES), **ACT)
    (entry,) = await kstore.claim_outbox("w1", lease_seconds=30)
    assert entry.attempts == 1 and entry.claimed_by == "w1"
    assert await kstore.release_outbox("w1", [entry.id], retry_at=clock.now() + timedelta(seconds=10)) == 1
    assert await kstore.claim_outbox("w2") == []  # not available before retry_at
    clock.advance(10)
    (entry,) = await kstore.claim_outbox("w2", lease_seconds=30)
    assert entry.attempts == 2 and entry.claimed_by == "w2"
    clock.advance(29)
    assert await kstore.claim_outbox("w3", lease_seconds=30) == []  # lease still held
    clock.advance(1)
    (entry,) = await kstore.claim_outbox("w3", lease_seconds=30)  # the stale claim is retaken
    assert entry.attempts == 3 and entry.claimed_by == "w3"
    assert await kstore.complete_outbox("w2", [entry.id]) == 0  # w2 lost it
    assert await kstore.complete_outbox("w3", [entry.id]) == 1
    assert await kstore.list_outbox() == []
    assert [e.status for e in await kstore.list_outbox(include_completed=True)] == ["completed"]


async def test_idempotency_keys_deduplicate(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    record = await kstore.append_record(RecordDraft(jane.id, "fact", RES), **ACT)
    await kstore.remove_record(record.id, RES, **ACT)
    await kstore.remove_record(record.id, RES, **ACT)
    keys = [e.idempotency_key for e in await kstore.list_outbox()]
    assert len(keys) == len(set(keys)) == 2


async def test_vectors_are_stored_per_document_under_one_scope(kstore: TablesKnowledgeStore) -> None:
    import numpy as np

    vector = np.array([0.6, 0.8], dtype=np.float32)
    await kstore.put_vector(StoredVector("knowledge:record:r1", "r1", T1, "test-2", vector))
    await kstore.put_vector(StoredVector("knowledge:record:r1", "r1", RES, "test-2", vector))  # replaces
    stored = await kstore.list_vectors()
    assert [(v.document_id, v.scope) for v in stored] == [("knowledge:record:r1", RES)]
    assert np.array_equal(stored[0].vector, vector)
    assert await kstore.list_vectors([T1]) == []
    assert await kstore.delete_vector("knowledge:record:r1", T1) is False  # wrong scope: kept
    assert await kstore.delete_vector("knowledge:record:r1", RES) is True
    assert await kstore.list_vectors() == []
