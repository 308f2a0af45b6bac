"""Memory.unpin removes a pin, never another record.

unpin(thread_id, record_id) removed any record the thread sees: a fact the application stored
for the whole org, a captured fact of the user, a learned skill's evidence. The ids are in the
model's context (a reminder's "Sources:" line, a pin's "{id: …}"), so an unpin tool an app gives
its agent, or a stale id, soft-deleted org-wide facts for every user. It is refused now, as a
record that is not a pin (KnowledgeNotFoundError), and nothing is removed."""

from __future__ import annotations

import pytest

from obsmem import KnowledgeNotFoundError, Memory, Message
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio


async def _thread(memory: Memory) -> None:
    async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user("hi")]) as turn:
        await turn.step([Message.assistant("Hi.")])


@pytest.mark.parametrize("where", ["org:default", "org:default/resource:alice",
                                   "org:default/resource:alice/thread:t1"])
async def test_unpin_refuses_a_record_that_is_not_a_pin(where: str) -> None:
    async with Knowledge.in_memory() as knowledge:
        async with Memory("memory://", knowledge=knowledge) as memory:
            await _thread(memory)
            acme = await knowledge.node("Acme", "organization", "org:default")
            fact = await knowledge.append(acme.id, "Acme's office is in Munich", where, reason="intranet")
            with pytest.raises(KnowledgeNotFoundError):
                await memory.unpin("t1", fact.id)
            assert (await knowledge.store.load_record(fact.id)).deleted_at is None  # type: ignore[union-attr]


async def test_unpin_removes_a_pin() -> None:
    async with Knowledge.in_memory() as knowledge:
        async with Memory("memory://", knowledge=knowledge) as memory:
            await _thread(memory)
            pin = await memory.pin("t1", "Never book red-eye flights.")
            assert [p.id for p in await memory.list_pins("t1")] == [pin.id]
            removed = await memory.unpin("t1", pin.id)
            assert removed.deleted_at is not None and await memory.list_pins("t1") == []
