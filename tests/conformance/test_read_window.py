"""read_window: the live head and the thread's messages after its cursor, natively (one
snapshot) where the store can, by get_head + list_messages where it cannot: the same answer."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem.errors import ThreadNotFoundError
from obsmem.storage import ObservationRecord, Store, ThreadState, lineage_key
from obsmem.storage.contract import read_window
from obsmem.types import Message, Thread

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
LINEAGE = lineage_key("thread", "t1", "r1")


class Composed:
    """The store without its native read_window: the contract's composition runs."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def get_head(self, lineage: str) -> ObservationRecord | None:
        return await self._store.get_head(lineage)

    async def list_messages(self, thread_id: str, *, after_seq: int = 0) -> list[Message]:
        return await self._store.list_messages(thread_id, after_seq=after_seq)


async def both(store: Store) -> tuple[ObservationRecord | None, list[Message]]:
    native = await read_window(store, LINEAGE, "t1")
    composed = await read_window(Composed(store), LINEAGE, "t1")  # type: ignore[arg-type]
    assert native == composed
    return native


async def test_read_window_without_a_head_reads_every_message(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    assert await both(store) == (None, [])
    saved = await store.save_messages("t1", [Message.user("a"), Message.assistant("b")])
    head, messages = await both(store)
    assert head is None and messages == saved


async def test_read_window_reads_after_the_heads_cursor(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.create_thread(Thread(id="t2", resource_id="r1"))
    saved = await store.save_messages("t1", [Message.user(f"m{i}") for i in range(4)])
    await store.save_messages("t2", [Message.user("elsewhere")])
    cursor = saved[1].seq
    assert cursor is not None
    record = ObservationRecord(
        id="om-1", lineage=LINEAGE, scope="thread", thread_id="t1", resource_id="r1",
        created_at=T0, updated_at=T0, threads={"t1": ThreadState(cursor=cursor)},
    )
    created = (await store.create_record(record)).record
    head, messages = await both(store)
    assert head == created
    assert [m.text for m in messages] == ["m2", "m3"]
    await store.save_messages("t1", [Message.user("m4")])
    assert [m.text for m in (await both(store))[1]] == ["m2", "m3", "m4"]


async def test_read_window_of_an_unknown_thread(store: Store) -> None:
    with pytest.raises(ThreadNotFoundError):
        await read_window(store, LINEAGE, "t1")
    with pytest.raises(ThreadNotFoundError):
        await read_window(Composed(store), LINEAGE, "t1")  # type: ignore[arg-type]


async def test_read_window_uses_the_threads_own_cursor_in_a_resource_head(store: Store) -> None:
    # A resource-scoped head keeps one cursor per thread: each thread's window starts at its own.
    for thread_id in ("t1", "t2", "t3"):
        await store.create_thread(Thread(id=thread_id, resource_id="r1"))
    one = await store.save_messages("t1", [Message.user(f"one-{i}") for i in range(3)])
    two = await store.save_messages("t2", [Message.user(f"two-{i}") for i in range(3)])
    await store.save_messages("t3", [Message.user("three-0")])
    lineage = lineage_key("resource", None, "r1")
    assert one[0].seq is not None and two[1].seq is not None
    record = ObservationRecord(
        id="om-r", lineage=lineage, scope="resource", thread_id=None, resource_id="r1", created_at=T0,
        updated_at=T0, threads={"t1": ThreadState(cursor=one[0].seq), "t2": ThreadState(cursor=two[1].seq)},
    )
    await store.create_record(record)
    windows = {}
    for thread_id in ("t1", "t2", "t3"):
        native = await read_window(store, lineage, thread_id)
        assert native == await read_window(Composed(store), lineage, thread_id)  # type: ignore[arg-type]
        windows[thread_id] = [m.text for m in native[1]]
    # t3 has no cursor in the head: all of its messages.
    assert windows == {"t1": ["one-1", "one-2"], "t2": ["two-2"], "t3": ["three-0"]}


async def test_read_window_reads_the_live_generation(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    saved = await store.save_messages("t1", [Message.user(f"m{i}") for i in range(4)])
    assert saved[0].seq is not None and saved[2].seq is not None
    first = (await store.create_record(ObservationRecord(
        id="om-1", lineage=LINEAGE, scope="thread", thread_id="t1", resource_id="r1",
        created_at=T0, updated_at=T0, threads={"t1": ThreadState(cursor=saved[0].seq)},
    ))).record
    assert first is not None
    successor = first.model_copy(update={
        "id": "om-2", "generation": 1, "threads": {"t1": ThreadState(cursor=saved[2].seq)},
    })
    written = await store.create_generation(first, successor, expected_version=first.version)
    assert written.status == "applied"
    head, messages = await both(store)
    assert head is not None and head.id == "om-2"
    assert [m.text for m in messages] == ["m3"]
