"""Threads: idempotent create, ordered listing, compare-and-set, cascading delete."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from obsmem.errors import InvalidInputError, StoreClosedError, ThreadNotFoundError
from obsmem.storage import ObservationRecord, Store, lineage_key
from obsmem.types import Message, Thread

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def timezone_plus(hours: int, minutes: int = 0) -> timezone:
    return timezone(timedelta(hours=hours, minutes=minutes))


def record_for(thread_id: str, resource_id: str = "r1", *, record_id: str | None = None) -> ObservationRecord:
    return ObservationRecord(
        id=record_id or f"om-{thread_id}",
        lineage=lineage_key("thread", thread_id, resource_id),
        scope="thread",
        thread_id=thread_id,
        resource_id=resource_id,
    )


async def test_create_is_idempotent(store: Store) -> None:
    first = await store.create_thread(Thread(id="t1", resource_id="r1", title="first"))
    again = await store.create_thread(Thread(id="t1", resource_id="r1", title="second"))
    assert again == first
    assert again.title == "first"
    assert await store.get_thread("t1") == first
    assert len(await store.list_threads("r1")) == 1


async def test_get_unknown_thread_is_none(store: Store) -> None:
    assert await store.get_thread("nope") is None


async def test_thread_round_trips_exactly(store: Store) -> None:
    thread = Thread(
        id="t1",
        resource_id="r1",
        org_id="org",
        title="Trip",
        title_pinned=True,
        metadata={"obsmem": {"current_task": "plan"}, "n": [1, 2.5, None, "x"]},
        created_at=datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=timezone_plus(5, 30)),
        updated_at=T0,
    )
    stored = await store.create_thread(thread)
    assert stored == thread
    assert stored.created_at.utcoffset() == timedelta(hours=5, minutes=30)
    assert await store.get_thread("t1") == thread


async def test_list_by_resource_oldest_first_with_paging(store: Store) -> None:
    # Inserted out of time order, and with a tie that insertion order must break.
    await store.create_thread(Thread(id="c", resource_id="r1", created_at=T0 + timedelta(minutes=2)))
    await store.create_thread(Thread(id="a", resource_id="r1", created_at=T0))
    await store.create_thread(Thread(id="b1", resource_id="r1", created_at=T0 + timedelta(minutes=1)))
    await store.create_thread(Thread(id="b2", resource_id="r1", created_at=T0 + timedelta(minutes=1)))
    # Same instant as "a" plus a minute, written with another offset: ordering is by instant.
    await store.create_thread(
        Thread(
            id="z", resource_id="r1", created_at=(T0 + timedelta(seconds=90)).astimezone(timezone_plus(-7))
        )
    )
    await store.create_thread(Thread(id="other", resource_id="r2", created_at=T0))

    ids = [t.id for t in await store.list_threads("r1")]
    assert ids == ["a", "b1", "b2", "z", "c"]
    assert [t.id for t in await store.list_threads("r1", limit=2)] == ["a", "b1"]
    assert [t.id for t in await store.list_threads("r1", limit=2, offset=2)] == ["b2", "z"]
    assert [t.id for t in await store.list_threads("r1", offset=4)] == ["c"]
    assert await store.list_threads("r1", offset=9) == []
    assert await store.list_threads("nobody") == []


async def test_list_all_threads_spans_resources_oldest_first_with_paging(store: Store) -> None:
    assert await store.list_all_threads() == []
    # Several resources, inserted out of time order, with a tie that insertion order must break.
    await store.create_thread(Thread(id="late", resource_id="r2", created_at=T0 + timedelta(minutes=3)))
    await store.create_thread(Thread(id="first", resource_id="r1", created_at=T0))
    await store.create_thread(Thread(id="tie-1", resource_id="r3", created_at=T0 + timedelta(minutes=1)))
    await store.create_thread(Thread(id="tie-2", resource_id="r1", created_at=T0 + timedelta(minutes=1)))
    # Ordering is by instant, whatever offset the time was written with.
    later = (T0 + timedelta(seconds=90)).astimezone(timezone_plus(-7))
    await store.create_thread(Thread(id="mid", resource_id="r2", created_at=later))

    everything = await store.list_all_threads()
    assert [t.id for t in everything] == ["first", "tie-1", "tie-2", "mid", "late"]
    assert [t.resource_id for t in everything] == ["r1", "r3", "r1", "r2", "r2"]
    assert everything[0] == await store.get_thread("first")  # whole threads, as stored
    assert [t.id for t in await store.list_all_threads(limit=2)] == ["first", "tie-1"]
    assert [t.id for t in await store.list_all_threads(limit=2, offset=2)] == ["tie-2", "mid"]
    assert [t.id for t in await store.list_all_threads(offset=4)] == ["late"]
    assert await store.list_all_threads(limit=0) == []
    assert await store.list_all_threads(offset=9) == []

    assert await store.delete_thread("tie-1")
    assert [t.id for t in await store.list_all_threads()] == ["first", "tie-2", "mid", "late"]
    with pytest.raises(InvalidInputError):
        await store.list_all_threads(limit=-1)
    with pytest.raises(InvalidInputError):
        await store.list_all_threads(offset=-1)


async def test_negative_paging_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInputError):
        await store.list_threads("r1", limit=-1)
    with pytest.raises(InvalidInputError):
        await store.list_threads("r1", offset=-1)
    with pytest.raises(InvalidInputError):
        await store.list_generations("thread:t1", limit=-1)


async def test_update_thread_compare_and_set(store: Store) -> None:
    created = await store.create_thread(Thread(id="t1", resource_id="r1"))
    assert created.version == 1

    updated = await store.update_thread(created.model_copy(update={"title": "new"}), expected_version=1)
    assert updated is not None
    assert updated.version == 2 and updated.title == "new"
    assert await store.get_thread("t1") == updated

    # A writer that read version 1 is stale now: nothing changes.
    stale = await store.update_thread(created.model_copy(update={"title": "lost"}), expected_version=1)
    assert stale is None
    assert await store.get_thread("t1") == updated

    again = await store.update_thread(updated.model_copy(update={"metadata": {"k": 1}}), expected_version=2)
    assert again is not None and again.version == 3 and again.title == "new" and again.metadata == {"k": 1}


async def test_update_unknown_thread_is_none(store: Store) -> None:
    assert await store.update_thread(Thread(id="ghost", resource_id="r1"), expected_version=1) is None
    assert await store.get_thread("ghost") is None


async def test_update_cannot_move_thread_to_another_resource(store: Store) -> None:
    created = await store.create_thread(Thread(id="t1", resource_id="r1"))
    with pytest.raises(InvalidInputError):
        await store.update_thread(created.model_copy(update={"resource_id": "r2"}), expected_version=1)
    assert await store.get_thread("t1") == created


async def test_delete_cascades_messages_and_thread_lineage(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.create_thread(Thread(id="t2", resource_id="r1"))
    saved = await store.save_messages("t1", [Message.user("hi"), Message.assistant("hello")])
    kept = await store.save_messages("t2", [Message.user("other thread")])
    assert (await store.create_record(record_for("t1"))).applied
    assert (await store.create_record(record_for("t2"))).applied
    resource = ObservationRecord(
        id="om-r1",
        lineage=lineage_key("resource", None, "r1"),
        scope="resource",
        thread_id=None,
        resource_id="r1",
    )
    assert (await store.create_record(resource)).applied

    assert await store.delete_thread("t1") is True

    assert await store.get_thread("t1") is None
    assert await store.get_messages([m.id for m in saved]) == []
    assert await store.get_head("thread:t1") is None
    assert await store.list_generations("thread:t1") == []
    assert await store.get_record("om-t1") is None
    # Positive controls: the sibling thread and the resource lineage are untouched.
    assert await store.get_messages([m.id for m in kept]) == kept
    assert await store.get_head("thread:t2") is not None
    assert await store.get_head("resource:r1") is not None
    assert [m.id for m in await store.list_resource_messages("r1")] == [kept[0].id]

    assert await store.delete_thread("t1") is False
    with pytest.raises(ThreadNotFoundError):
        await store.list_messages("t1")


async def test_unknown_thread_raises(store: Store) -> None:
    with pytest.raises(ThreadNotFoundError):
        await store.save_messages("ghost", [Message.user("x")])
    with pytest.raises(ThreadNotFoundError):
        await store.list_messages("ghost")
    with pytest.raises(ThreadNotFoundError):
        await store.count_messages("ghost")


async def test_deleted_thread_id_can_be_created_again(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1", title="old"))
    await store.save_messages("t1", [Message.user("old")])
    await store.delete_thread("t1")
    fresh = await store.create_thread(Thread(id="t1", resource_id="r1", title="new"))
    assert fresh.title == "new"
    assert await store.count_messages("t1") == 0


async def test_closed_store_refuses_calls(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.get_thread("t1")
    await store.close()  # closing twice is harmless
