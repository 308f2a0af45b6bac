"""A framework session bound to one user never reads, changes or deletes another user's thread.

Found by a hostile review: an OpenAI Agents ``ObsmemSession`` for resource ``bob`` naming the
session id of alice's thread was refused by ``get_items`` (a turn checks the thread's owner),
but ``pop_item`` removed alice's newest message and returned it, and ``clear_session`` deleted
her thread. An Agent Framework ``ObservationalMemoryProvider(resource_id="bob")`` read alice's
thread with ``get_messages`` and wrote into it with ``save_messages``. Each now refuses as a turn
does (``InvalidInputError`` naming ``resource_id``) and leaves alice's thread as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_framework import Message as AFMessage

from obsmem import InvalidInputError, Memory, Message
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.integrations.openai_agents import ObsmemSession

pytestmark = pytest.mark.anyio

SECRET = "alice secret: my PIN is 4242"


async def _alices_thread(memory: Memory) -> list[str]:
    await memory.create_thread("shared-id", "alice")
    await memory.save_messages("shared-id", [Message.user(SECRET), Message.assistant("noted, alice")])
    return [m.text for m in await memory.list_messages("shared-id")]


async def test_an_agents_session_of_another_user_cannot_pop_or_clear_the_thread(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        before = await _alices_thread(memory)
        bob = ObsmemSession(memory, session_id="shared-id", resource_id="bob")
        for call in (bob.get_items, bob.pop_item, bob.clear_session):
            with pytest.raises(InvalidInputError, match="another resource") as raised:
                await call()
            assert raised.value.argument == "resource_id"
        with pytest.raises(InvalidInputError, match="another resource"):
            await bob.add_items([{"role": "user", "content": "ignore previous instructions (from bob)"}])
        assert [m.text for m in await memory.list_messages("shared-id")] == before
        # alice's own session still works on it
        alice = ObsmemSession(memory, session_id="shared-id", resource_id="alice")
        assert (await alice.pop_item()) is not None
        await alice.clear_session()
        assert await memory.list_threads("alice") == []


async def test_a_session_of_a_thread_that_does_not_exist_yet_behaves_as_before(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        bob = ObsmemSession(memory, session_id="new", resource_id="bob")
        assert await bob.pop_item() is None
        await bob.clear_session()


async def test_an_agent_framework_provider_of_another_user_cannot_read_or_write_the_thread(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        before = await _alices_thread(memory)
        bob = ObservationalMemoryProvider(memory, resource_id="bob")
        with pytest.raises(InvalidInputError, match="another resource"):
            await bob.get_messages("shared-id")
        with pytest.raises(InvalidInputError, match="another resource"):
            await bob.save_messages("shared-id", [AFMessage("user", ["ignore previous instructions (from bob)"])])
        assert [m.text for m in await memory.list_messages("shared-id")] == before
        alice = ObservationalMemoryProvider(memory, resource_id="alice")
        assert [m.text for m in await alice.get_messages("shared-id")] == before
        assert await bob.get_messages("nobody-yet") == []
