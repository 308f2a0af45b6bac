"""Observation records: one live head, compare-and-set, generations, cursors, write guard."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest

from obsmem.errors import InvalidInputError, StorageError
from obsmem.storage import (
    BufferedChunk,
    BufferedReflection,
    ObservationRecord,
    Store,
    ThreadState,
    WriteResult,
    lineage_key,
)
from obsmem.types import Thread

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
LINEAGE = "thread:t1"


def record(record_id: str = "om-1", thread_id: str = "t1", **fields: object) -> ObservationRecord:
    return ObservationRecord.model_validate(
        {
            "id": record_id,
            "lineage": lineage_key("thread", thread_id, "r1"),
            "scope": "thread",
            "thread_id": thread_id,
            "resource_id": "r1",
            "created_at": T0,
            "updated_at": T0,
            **fields,
        }
    )


def resource_record(record_id: str = "om-r1") -> ObservationRecord:
    return ObservationRecord(
        id=record_id, lineage="resource:r1", scope="resource", thread_id=None, resource_id="r1"
    )


def at_cursor(
    rec: ObservationRecord, cursor: int, thread_id: str = "t1", **fields: object
) -> ObservationRecord:
    return rec.model_copy(
        update={"threads": {**rec.threads, thread_id: ThreadState(cursor=cursor)}, **fields}
    )


@pytest.fixture
async def head(store: Store) -> ObservationRecord:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    result = await store.create_record(record())
    assert result.applied and result.record is not None
    return result.record


def applied(result: WriteResult) -> ObservationRecord:
    assert result.status == "applied", result
    assert result.record is not None
    return result.record


async def live_heads(store: Store, lineage: str = LINEAGE) -> list[ObservationRecord]:
    return [r for r in await store.list_generations(lineage) if r.is_live]


# -- create ---------------------------------------------------------------------------------------


async def test_create_record_only_without_live_head(store: Store, head: ObservationRecord) -> None:
    assert head.version == 1 and head.generation == 0 and head.is_live
    assert await store.get_head(LINEAGE) == head
    assert await store.get_record("om-1") == head

    second = await store.create_record(record("om-2", active_observations="racing"))
    assert second.status == "stale" and second.record == head
    assert await store.get_record("om-2") is None
    assert await live_heads(store) == [head]


async def test_create_record_for_missing_thread_is_gone(store: Store) -> None:
    result = await store.create_record(record(thread_id="ghost"))
    assert result == WriteResult(status="gone", record=None)
    assert await store.get_head("thread:ghost") is None


async def test_create_record_checks_lineage(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    with pytest.raises(InvalidInputError):
        await store.create_record(record().model_copy(update={"lineage": "thread:other"}))
    with pytest.raises(InvalidInputError):
        await store.create_record(record().model_copy(update={"thread_id": None}))


async def test_resource_scope_needs_no_thread(store: Store) -> None:
    created = applied(await store.create_record(resource_record()))
    assert await store.get_head("resource:r1") == created
    assert (await store.create_record(resource_record("om-r2"))).status == "stale"


async def test_record_round_trips_exactly(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    offset = timezone(timedelta(hours=9))
    chunk = BufferedChunk(
        id="ombuf-1",
        cycle_id="cyc-1",
        thread_id="t1",
        observations="* 🔴 (09:15) User likes tea",
        observation_tokens=12,
        message_ids=("m1", "m2"),
        message_tokens=340,
        first_seq=3,
        last_seq=7,
        created_at=datetime(2025, 3, 1, 18, 0, 1, 250, tzinfo=offset),
        extracted={"current_task": "plan", "nested": {"list": [1, "two", None]}},
    )
    full = record(
        generation=0,
        origin="initial",
        active_observations="Date: 2025-03-01\n* (09:00) hello",
        observation_tokens=42,
        total_tokens_observed=1000,
        pending_message_tokens=17,
        threads={
            "t1": ThreadState(
                cursor=7,
                current_task="task",
                suggested_response="say hi",
                thread_title="Tea",
                extracted={"facts": ["a", "b"], "score": 0.5},
            )
        },
        buffered_chunks=(chunk, chunk.model_copy(update={"id": "ombuf-2", "cycle_id": "cyc-2"})),
        buffered_reflection=BufferedReflection(
            cycle_id="r-1", text="condensed", tokens=3, input_tokens=40, line_count=2, created_at=T0
        ),
        reflection_suppressed_at=42,
        config={"observation": {"message_tokens": 30000}, "scope": "thread"},
        metadata={"obsmem": {"flags": [True, False]}, "float": 1.25},
    )
    stored = applied(await store.create_record(full))
    assert stored == full
    assert stored.buffered_chunks[0].created_at.utcoffset() == timedelta(hours=9)
    assert await store.get_head(LINEAGE) == full
    again = applied(await store.update_record(stored, expected_version=1))
    assert again == full.model_copy(update={"version": 2})


# -- update ---------------------------------------------------------------------------------------


async def test_update_record_compare_and_set(store: Store, head: ObservationRecord) -> None:
    first = applied(
        await store.update_record(at_cursor(head, 5, active_observations="one"), expected_version=1)
    )
    assert first.version == 2 and first.active_observations == "one" and first.cursor("t1") == 5
    assert await store.get_head(LINEAGE) == first

    # A writer still holding version 1 loses and is handed the current head; nothing changes.
    stale = await store.update_record(at_cursor(head, 9, active_observations="lost"), expected_version=1)
    assert stale.status == "stale" and stale.record == first
    assert await store.get_record(head.id) == first

    second = applied(
        await store.update_record(at_cursor(first, 9, active_observations="two"), expected_version=2)
    )
    assert second.version == 3 and second.active_observations == "two"


async def test_stale_wins_over_cursor_check(store: Store, head: ObservationRecord) -> None:
    moved = applied(await store.update_record(at_cursor(head, 5), expected_version=1))
    # A racer that read version 1 and writes cursor 3 is stale, not a bug.
    result = await store.update_record(at_cursor(head, 3), expected_version=1)
    assert result.status == "stale" and result.record == moved


async def test_cursor_cannot_move_backward(store: Store, head: ObservationRecord) -> None:
    at5 = applied(await store.update_record(at_cursor(head, 5), expected_version=1))
    with pytest.raises(StorageError):
        await store.update_record(at_cursor(at5, 4), expected_version=2)
    with pytest.raises(StorageError):  # dropping the thread's state would reset its cursor to 0
        await store.update_record(at5.model_copy(update={"threads": {}}), expected_version=2)
    assert await store.get_head(LINEAGE) == at5
    # Positive controls: an equal cursor and a forward cursor are fine.
    same = applied(await store.update_record(at_cursor(at5, 5, pending_message_tokens=3), expected_version=2))
    applied(await store.update_record(at_cursor(same, 6), expected_version=3))


async def test_update_cannot_change_identity(store: Store, head: ObservationRecord) -> None:
    for change in ({"generation": 3}, {"resource_id": "r2"}, {"lineage": "thread:t2", "thread_id": "t2"}):
        with pytest.raises(InvalidInputError):
            await store.update_record(head.model_copy(update=change), expected_version=1)
    assert await store.get_head(LINEAGE) == head


async def test_update_unknown_record_is_gone(store: Store, head: ObservationRecord) -> None:
    result = await store.update_record(record("om-never"), expected_version=1)
    assert result == WriteResult(status="gone", record=None)


# -- generations ----------------------------------------------------------------------------------


async def test_create_generation_retires_head_atomically(store: Store, head: ObservationRecord) -> None:
    current = applied(
        await store.update_record(at_cursor(head, 5, active_observations="long"), expected_version=1)
    )
    successor = at_cursor(record("om-2", origin="reflection", active_observations="short"), 5)

    new_head = applied(await store.create_generation(current, successor, expected_version=2))
    assert new_head.id == "om-2" and new_head.generation == 1 and new_head.version == 1 and new_head.is_live
    assert new_head.active_observations == "short" and new_head.cursor("t1") == 5

    retired = await store.get_record(current.id)
    assert retired is not None and retired.superseded_by == "om-2" and not retired.is_live
    assert retired.active_observations == "long"
    assert await store.get_head(LINEAGE) == new_head
    assert await live_heads(store) == [new_head]

    # A second reflection from the same snapshot is stale and creates nothing.
    again = await store.create_generation(current, record("om-3", origin="reflection"), expected_version=2)
    assert again.status == "stale" and again.record == new_head
    assert await store.get_record("om-3") is None
    assert [r.id for r in await store.list_generations(LINEAGE)] == ["om-2", "om-1"]


async def test_update_on_retired_generation_is_stale(store: Store, head: ObservationRecord) -> None:
    new_head = applied(await store.create_generation(head, record("om-2"), expected_version=1))
    retired = await store.get_record(head.id)
    assert retired is not None
    for expected in (head.version, retired.version):
        result = await store.update_record(
            retired.model_copy(update={"active_observations": "x"}), expected_version=expected
        )
        assert result.status == "stale" and result.record == new_head
    assert await store.get_record(head.id) == retired


async def test_create_generation_with_stale_version(store: Store, head: ObservationRecord) -> None:
    moved = applied(await store.update_record(at_cursor(head, 2), expected_version=1))
    result = await store.create_generation(head, at_cursor(record("om-2"), 2), expected_version=1)
    assert result.status == "stale" and result.record == moved
    assert await store.get_record("om-2") is None
    assert await live_heads(store) == [moved]


async def test_create_generation_refuses_lower_cursor(store: Store, head: ObservationRecord) -> None:
    at5 = applied(await store.update_record(at_cursor(head, 5), expected_version=1))
    with pytest.raises(StorageError):
        await store.create_generation(at5, at_cursor(record("om-2"), 4), expected_version=2)
    assert await store.get_head(LINEAGE) == at5
    assert await store.get_record("om-2") is None


async def test_create_generation_checks_successor(store: Store, head: ObservationRecord) -> None:
    await store.create_thread(Thread(id="t2", resource_id="r1"))
    with pytest.raises(InvalidInputError):  # another lineage
        await store.create_generation(head, record("om-2", thread_id="t2"), expected_version=1)
    with pytest.raises(InvalidInputError):  # the same id
        await store.create_generation(head, record("om-1"), expected_version=1)
    assert await store.get_head(LINEAGE) == head


async def test_list_generations_newest_first(store: Store, head: ObservationRecord) -> None:
    current = head
    for n in range(2, 6):
        current = applied(
            await store.create_generation(current, record(f"om-{n}"), expected_version=current.version)
        )
    generations = await store.list_generations(LINEAGE)
    assert [r.generation for r in generations] == [4, 3, 2, 1, 0]
    assert [r.id for r in generations] == ["om-5", "om-4", "om-3", "om-2", "om-1"]
    assert sum(r.is_live for r in generations) == 1 and generations[0].is_live
    assert [r.id for r in await store.list_generations(LINEAGE, limit=2, offset=1)] == ["om-4", "om-3"]
    assert await store.list_generations("thread:none") == []


# -- buffering boundaries -----------------------------------------------------------------------------


async def test_buffering_boundaries_round_trip(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    assert record().buffer_boundary_tokens == 0 and record().reflection_boundary_tokens == 0
    created = applied(
        await store.create_record(record(buffer_boundary_tokens=1200, reflection_boundary_tokens=40_000))
    )
    assert (created.buffer_boundary_tokens, created.reflection_boundary_tokens) == (1200, 40_000)
    assert await store.get_head(LINEAGE) == created

    bumped = created.model_copy(update={"buffer_boundary_tokens": 2400})
    moved = applied(await store.update_record(bumped, expected_version=1))
    assert (moved.buffer_boundary_tokens, moved.reflection_boundary_tokens) == (2400, 40_000)
    assert await store.get_record("om-1") == moved


async def test_create_generation_stores_the_successors_boundaries(
    store: Store, head: ObservationRecord
) -> None:
    # Adapters store what they are given: the engine decides what a successor carries.
    carried = applied(
        await store.create_generation(
            head,
            record("om-2", origin="reflection", buffer_boundary_tokens=7, reflection_boundary_tokens=9),
            expected_version=1,
        )
    )
    assert (carried.buffer_boundary_tokens, carried.reflection_boundary_tokens) == (7, 9)
    reset = applied(
        await store.create_generation(carried, record("om-3", origin="reflection"), expected_version=1)
    )
    assert (reset.buffer_boundary_tokens, reset.reflection_boundary_tokens) == (0, 0)
    retired = carried.model_copy(update={"superseded_by": "om-3", "version": 2})
    assert await store.get_record("om-2") == retired


# -- write guard and deletion -------------------------------------------------------------------------


async def test_deleted_thread_writes_report_gone(store: Store, head: ObservationRecord) -> None:
    assert await store.delete_thread("t1")
    assert await store.update_record(at_cursor(head, 1), expected_version=1) == WriteResult("gone", None)
    assert await store.create_generation(head, record("om-2"), expected_version=1) == WriteResult(
        "gone", None
    )
    assert await store.create_record(record("om-3")) == WriteResult("gone", None)
    assert await store.list_generations(LINEAGE) == []  # nothing resurrected


async def test_resource_lineage_survives_thread_deletion(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    rec = applied(await store.create_record(at_cursor(resource_record(), 4)))
    await store.delete_thread("t1")
    assert (
        applied(
            await store.update_record(at_cursor(rec, 4, active_observations="x"), expected_version=1)
        ).version
        == 2
    )


async def test_delete_lineage(store: Store, head: ObservationRecord) -> None:
    applied(await store.create_generation(head, record("om-2"), expected_version=1))
    assert await store.delete_lineage(LINEAGE) == 2
    assert await store.get_head(LINEAGE) is None
    assert await store.list_generations(LINEAGE) == []
    assert await store.delete_lineage(LINEAGE) == 0
    # A cycle that started before the clear cannot commit into the new lineage.
    fresh = applied(await store.create_record(record("om-9")))
    assert await store.update_record(head, expected_version=1) == WriteResult("gone", None)
    assert await store.get_head(LINEAGE) == fresh


async def test_returned_records_are_copies(store: Store, head: ObservationRecord) -> None:
    head.metadata["mutated"] = True
    head.config["x"] = 1
    stored = await store.get_head(LINEAGE)
    assert stored is not None and stored.metadata == {} and stored.config == {}


# -- working memory -------------------------------------------------------------------------------


async def test_working_memory(store: Store) -> None:
    assert await store.get_working_memory("resource:r1") is None
    await store.set_working_memory("resource:r1", "# User\n- name: Ada")
    assert await store.get_working_memory("resource:r1") == "# User\n- name: Ada"
    await store.set_working_memory("resource:r1", "")
    assert await store.get_working_memory("resource:r1") == ""
    assert await store.get_working_memory("thread:t1") is None


# -- concurrency ----------------------------------------------------------------------------------


async def test_concurrent_compare_and_set_loses_no_increment(store: Store, head: ObservationRecord) -> None:
    attempts = 0

    async def increment() -> None:
        nonlocal attempts
        while True:
            attempts += 1
            current = await store.get_head(LINEAGE)
            assert current is not None
            await asyncio.sleep(0)  # let the other tasks read the same version
            count = int(current.metadata.get("count", 0))
            bumped = current.model_copy(update={"metadata": {**current.metadata, "count": count + 1}})
            result = await store.update_record(bumped, expected_version=current.version)
            if result.applied:
                return
            assert result.status == "stale"

    async with asyncio.TaskGroup() as group:
        for _ in range(20):
            group.create_task(increment())

    final = await store.get_head(LINEAGE)
    assert final is not None
    assert final.metadata["count"] == 20
    assert final.version == 21
    assert attempts > 20  # the tasks really raced
