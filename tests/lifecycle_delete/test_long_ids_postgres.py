"""A user whose ids are long and non-ASCII, on PostgreSQL: stored, so deletable. The erase notes'
keys held the ids percent-quoted (a CJK character is 9 bytes so): PostgreSQL's key index (about
2,700 bytes a row) refused the note, so delete_thread and delete_resource failed (StorageError)
for a user they deleted before the notes existed."""

from __future__ import annotations

import random

import pytest

from obsmem import Memory, MemoryConfig, Message

from ..postgres_fixtures import postgres_server, postgres_url  # noqa: F401

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("erase", ["delete_thread", "delete_resource"])
async def test_a_stored_user_with_long_ids_can_be_deleted(postgres_url: str, erase: str) -> None:  # noqa: F811
    rng = random.Random(7)
    thread_id = "fil-" + "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(800))
    resource_id = "user-" + "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(800))
    async with Memory(postgres_url, config=MemoryConfig(scope="resource")) as memory:
        await memory.create_thread(thread_id, resource_id)
        await memory.save_messages(thread_id, [Message.user("hello")])
        if erase == "delete_thread":
            assert await memory.delete_thread(thread_id)
        else:
            assert (await memory.delete_resource(resource_id))["threads"] == 1
        assert await memory.list_threads(resource_id) == []
