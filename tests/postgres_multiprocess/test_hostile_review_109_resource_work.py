"""Deleting a resource deleted the queued work of another user's thread named like the resource.

Work items are keyed by thread id (``Memory(background="queue")``, ``enqueue_thread_work``), but
``Memory.delete_resource('alice')`` also ran ``delete_work('alice')``: with user ids as resource
ids and free-form thread ids, the workers' queued buffers (and dead-letter rows) of thread
``alice`` of user ``bob`` were dropped by deleting user ``alice``, seen from an app process that
queued them and an admin process that deleted the other user.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem import Memory, Message
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import TextPart
from obsmem.worker import WORK_KINDS, enqueue_thread_work

pytestmark = pytest.mark.anyio


async def test_deleting_a_resource_keeps_the_queued_work_of_a_thread_of_that_name(postgres_url: str) -> None:
    async with PostgresStore(postgres_url) as app_store, Memory(app_store, background="queue") as app:
        await app.create_thread(thread_id="alice", resource_id="bob")  # bob's thread, named after a topic
        await app.save_messages("alice", [Message(id="b-u", role="user", parts=(TextPart(text="About Alice."),))])
        await app.create_thread(thread_id="a-1", resource_id="alice")
        queued = await enqueue_thread_work(app_store, "alice", now=datetime.now(UTC))

        async with Memory(postgres_url) as admin:  # another process's store and pool
            counts = await admin.delete_resource("alice")
        assert counts["threads"] == 1

        left = {(item.kind, item.target) for item in await app_store.list_work()}
        assert left == {(item.kind, "alice") for item in queued} and len(left) == len(WORK_KINDS), (
            "bob's thread 'alice' lost its queued work when user 'alice' was deleted"
        )
        assert (await app.get_thread("alice")).resource_id == "bob"
