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

from obsmem.storage import ObservationRecord, ThreadState
from obsmem.storage.contract import update_record_marking
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import DataPart, Message, Thread

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


async def test_a_head_write_with_markers_is_one_transaction_and_never_lost_to_them(postgres_url: str) -> None:
    async with PostgresStore(postgres_url) as store:
        thread = f"t-{uuid.uuid4().hex[:8]}"
        lineage = f"thread:{thread}"
        await store.create_thread(Thread(id=thread, resource_id="u1"))
        (one,) = await store.save_messages(thread, [Message.assistant("one")])
        created = await store.create_record(
            ObservationRecord(
                id=f"om-{thread}", lineage=lineage, scope="thread", thread_id=thread, resource_id="u1",
                created_at=T0, updated_at=T0, threads={thread: ThreadState(cursor=0)},
            )
        )
        assert created.record is not None
        head = created.record.model_copy(
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
