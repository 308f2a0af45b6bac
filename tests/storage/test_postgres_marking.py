"""PostgreSQL writes a head and the markers of that write in one transaction
(``update_record_marking``), as SQLite does: an observation's end marker quotes its observations,
and a ``forget`` fenced after the write must find both, one fenced before it neither
(``tests/privacy/test_forget_races_observation.py``).

On main the PostgreSQL store had no such method: the record was written alone (``message`` None)
and the caller wrote the markers in a second transaction."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from obsmem.storage import ObservationRecord, Store, ThreadState
from obsmem.storage.contract import update_record_marking
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import DataPart, Message, Thread

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


async def _seeded(store: Store, *, cursor: bool) -> tuple[str, Message, ObservationRecord]:
    """A new thread with one message, and its record (observed through that message: ``cursor``)."""
    thread = f"t-{uuid.uuid4().hex[:8]}"
    lineage = f"thread:{thread}"
    await store.create_thread(Thread(id=thread, resource_id="u1"))
    (one,) = await store.save_messages(thread, [Message.assistant("one")])
    created = await store.create_record(
        ObservationRecord(
            id=f"om-{thread}", lineage=lineage, scope="thread", thread_id=thread, resource_id="u1",
            created_at=T0, updated_at=T0, threads={thread: ThreadState(cursor=(one.seq or 0) if cursor else 0)},
            active_observations="* one\n* two" if cursor else "",
        )
    )
    assert created.record is not None
    return lineage, one, created.record


async def test_a_head_write_with_markers_is_one_transaction_and_never_lost_to_them(postgres_url: str) -> None:
    async with PostgresStore(postgres_url) as store:
        lineage, one, record = await _seeded(store, cursor=False)
        thread = one.thread_id or ""
        head = record.model_copy(
            update={"active_observations": "* one", "threads": {thread: ThreadState(cursor=one.seq or 0)}}
        )
        marker = DataPart(name="om-observation-end", data={"cycle_id": "c1", "observations": "* one"})

        result, message, _, _ = await update_record_marking(
            store, head, expected_version=1, message_id=one.id, parts=[marker], lineage=lineage
        )
        assert result.status == "applied" and result.record is not None and result.record.version == 2
        stored = (await store.get_messages([one.id]))[0]
        assert message is not None and marker in message.parts  # written with the record, not after it
        assert marker in stored.parts

        # Stale: neither the record nor the markers.
        other = DataPart(name="om-observation-end", data={"cycle_id": "c2", "observations": "* two"})
        stale, message, _, _ = await update_record_marking(
            store, head, expected_version=1, message_id=one.id, parts=[other], lineage=lineage
        )
        assert stale.status == "stale" and message is None
        assert other not in (await store.get_messages([one.id]))[0].parts

        # The message is gone: the record is written all the same.
        gone, message, _, _ = await update_record_marking(
            store, result.record.model_copy(update={"active_observations": "* two"}), expected_version=2,
            message_id="msg-nobody", parts=[other], lineage=lineage,
        )
        assert gone.status == "applied" and message is None
        assert gone.record is not None and gone.record.active_observations == "* two"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_new_generation_with_markers_is_one_transaction(
    kind: str, postgres_url: str, tmp_path: object
) -> None:
    """The same for a reflection's new generation (``create_generation_marking``): its end marker
    quotes the reflection (``tests/privacy/test_forget_races_reflection.py``). On main neither
    store had the method: the generation was written alone and the marker after it."""
    from pathlib import Path

    from obsmem.storage import SQLiteStore
    from obsmem.storage.contract import create_generation_marking

    store = PostgresStore(postgres_url) if kind == "postgres" else SQLiteStore(Path(str(tmp_path)) / "m.db")
    async with store:
        lineage, one, current = await _seeded(store, cursor=True)
        thread = one.thread_id or ""
        successor = current.model_copy(update={"id": f"om2-{thread}", "active_observations": "* one and two"})
        marker = DataPart(name="om-observation-end", data={"cycle_id": "r1", "observations": "* one and two"})

        result, message, _, _ = await create_generation_marking(
            store, current, successor, expected_version=current.version, message_id=one.id, parts=[marker],
            lineage=lineage,
        )
        assert result.status == "applied" and result.record is not None and result.record.generation == 1
        assert message is not None and marker in message.parts  # written with the generation
        assert marker in (await store.get_messages([one.id]))[0].parts

        # Stale (the old head again): neither a generation nor the markers.
        other = DataPart(name="om-observation-end", data={"cycle_id": "r2", "observations": "* again"})
        again = current.model_copy(update={"id": f"om3-{thread}"})
        stale, message, _, _ = await create_generation_marking(
            store, current, again, expected_version=current.version, message_id=one.id, parts=[other],
            lineage=lineage,
        )
        assert stale.status != "applied" and message is None
        assert other not in (await store.get_messages([one.id]))[0].parts
        assert [r.generation for r in await store.list_generations(lineage, limit=10)] == [1, 0]

        # The message is gone: the generation is written all the same.
        latest = result.record
        gone, message, _, _ = await create_generation_marking(
            store, latest, latest.model_copy(update={"id": f"om4-{thread}"}), expected_version=latest.version,
            message_id="msg-nobody", parts=[other], lineage=lineage,
        )
        assert gone.status == "applied" and message is None and gone.record is not None
        assert gone.record.generation == 2
