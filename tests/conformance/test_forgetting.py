"""Forgetting: deleting messages, rewriting retired generations, working memory and queued work,
and the resource-scope write guard for deleted threads (issue 14, item 1)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem.storage import BufferedChunk, ObservationRecord, Store, ThreadState
from obsmem.types import Message, Thread

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def resource_record(**fields: object) -> ObservationRecord:
    return ObservationRecord.model_validate(
        {"id": "om-r1", "lineage": "resource:r1", "scope": "resource", "thread_id": None,
         "resource_id": "r1", **fields}
    )


async def test_delete_messages_removes_them_and_never_reuses_their_seq(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    saved = await store.save_messages("t1", [Message.user("a"), Message.user("b"), Message.user("c")])
    assert await store.delete_messages([saved[1].id, saved[2].id, "nope"]) == 2
    assert [m.id for m in await store.list_messages("t1")] == [saved[0].id]
    assert await store.get_messages([saved[1].id]) == []
    [again] = await store.save_messages("t1", [Message.user("d")])
    assert again.seq is not None and saved[2].seq is not None and again.seq > saved[2].seq


async def test_rewrite_generation_replaces_a_retired_generation_in_place(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    first = (await store.create_record(resource_record(active_observations="keep\nsecret line"))).record
    assert first is not None
    successor = resource_record(id="om-r2", active_observations="keep")
    assert (await store.create_generation(first, successor, expected_version=first.version)).applied
    [head, old] = await store.list_generations("resource:r1")
    rewritten = old.model_copy(
        update={"active_observations": "keep", "generation": 7, "superseded_by": None, "version": 99}
    )
    assert await store.rewrite_generation(rewritten) is True
    [_, after] = await store.list_generations("resource:r1")
    assert after.active_observations == "keep"
    # Identity, chain link, generation and version stay the stored ones.
    assert (after.id, after.generation, after.superseded_by, after.version) == (
        old.id, old.generation, old.superseded_by, old.version,
    )
    # The live head is not rewritten this way (it is written compare-and-set), nor is a missing id.
    assert await store.rewrite_generation(head.model_copy(update={"active_observations": ""})) is False
    assert await store.rewrite_generation(old.model_copy(update={"id": "missing"})) is False
    assert (await store.get_head("resource:r1")) == head


async def test_delete_working_memory_and_work(store: Store) -> None:
    await store.set_working_memory("thread:t1", "name: Ada")
    assert await store.delete_working_memory("thread:t1") is True
    assert await store.get_working_memory("thread:t1") is None
    assert await store.delete_working_memory("thread:t1") is False
    await store.enqueue_work("observe", "t1", now=T0)
    await store.enqueue_work("reflect", "t1", now=T0)
    await store.enqueue_work("observe", "t2", now=T0)
    [claimed] = await store.claim_work("w", ttl_s=60, now=T0, kinds=("reflect",))
    assert await store.delete_work("t1") == 2
    assert [w.target for w in await store.list_work()] == ["t2"]
    assert await store.complete_work(claimed) is False


async def test_resource_write_adding_observations_for_a_deleted_thread_is_gone(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.create_thread(Thread(id="t2", resource_id="r1"))
    head = (await store.create_record(resource_record(threads={"t1": ThreadState(cursor=1)}))).record
    assert head is not None
    await store.delete_thread("t1")
    # Moving the deleted thread's cursor, in place or in a new generation: gone.
    moved = head.model_copy(update={"threads": {"t1": ThreadState(cursor=5)}, "active_observations": "x"})
    assert (await store.update_record(moved, expected_version=head.version)).status == "gone"
    successor = moved.model_copy(update={"id": "om-r2"})
    assert (await store.create_generation(head, successor, expected_version=head.version)).status == "gone"
    # A new buffered chunk of the deleted thread: gone.
    chunk = BufferedChunk(
        id="c1", cycle_id="cy", thread_id="t1", observations="x", observation_tokens=1,
        message_ids=("m",), message_tokens=1, first_seq=1, last_seq=1,
    )
    chunked = head.model_copy(update={"buffered_chunks": (chunk,)})
    assert (await store.update_record(chunked, expected_version=head.version)).status == "gone"
    assert await store.get_head("resource:r1") == head
    # Other writes go through: the deleted thread's cursor stays, a live thread moves on.
    other = head.model_copy(
        update={"threads": {**head.threads, "t2": ThreadState(cursor=3)}, "active_observations": "y"}
    )
    assert (await store.update_record(other, expected_version=head.version)).applied
    # A first record that already observes a deleted thread: gone.
    fresh = ObservationRecord(
        id="om-q", lineage="resource:r9", scope="resource", thread_id=None, resource_id="r9",
        threads={"t1": ThreadState(cursor=1)},
    )
    assert (await store.create_record(fresh)).status == "gone"
