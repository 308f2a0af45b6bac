"""Two requests of a web app deleting two threads of one user at the same time.

``delete_thread(a)`` reads the messages of the user's other threads (to take a's observation
sections out of their markers). When another request deleted one of those threads between the
listing and the read, ``delete_thread(a)`` raised ThreadNotFoundError naming the *other* thread
and stopped midway (its thread data, leases and queued work not yet dropped; the delete left
unfinished). The interleaving is made deterministic by a store that lets the other request's
delete land exactly there; seen without it under a 16-thread SyncMemory load.
"""

from __future__ import annotations

from typing import Any

from obsmem import Message, SyncMemory
from obsmem.storage.memory import MemoryStore


class DeleteLandsBetween(MemoryStore):
    """Before the first read of ``victim``'s messages once armed (all of them, or those whose
    markers may hold a section: what delete_thread reads), ``victim`` is deleted (another
    request's delete_thread, run to its end)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed: tuple[Any, str] | None = None
        self.landed = 0

    async def _land(self, thread_id: str) -> None:
        if self.armed is not None and self.armed[1] == thread_id:
            memory, victim = self.armed
            self.armed = None
            assert await memory.delete_thread(victim) is True
            self.landed += 1

    async def list_messages(self, thread_id: str, *args: Any, **kwargs: Any) -> Any:
        await self._land(thread_id)
        return await super().list_messages(thread_id, *args, **kwargs)

    async def section_messages_page(self, thread_id: str, *args: Any, **kwargs: Any) -> Any:
        await self._land(thread_id)
        return await super().section_messages_page(thread_id, *args, **kwargs)


def test_delete_thread_is_not_broken_by_a_sibling_deleted_meanwhile() -> None:
    store = DeleteLandsBetween()
    with SyncMemory(store) as memory:
        for thread_id in ("a", "b", "c"):
            said = [Message.user(f"hi from {thread_id}")]
            turn = memory.begin_turn(thread_id=thread_id, resource_id="u", messages=said)
            turn.end([Message.assistant("hello")])
        store.armed = (memory.memory, "b")
        assert memory.delete_thread("a") is True  # before: ThreadNotFoundError: Thread 'b' does not exist
        assert store.landed == 1
        assert memory.unfinished_delete("a") is None and memory.unfinished_delete("b") is None
        assert [t.id for t in memory.list_threads("u")] == ["c"]
        assert [m.text for m in memory.list_messages("c")] == ["hi from c", "hello"]


def test_forget_in_a_resource_is_not_broken_by_one_of_its_threads_deleted_meanwhile() -> None:
    store = DeleteLandsBetween()
    with SyncMemory(store) as memory:
        for thread_id in ("a", "b", "c"):
            said = [Message.user(f"my PIN is 4321, from {thread_id}")]
            turn = memory.begin_turn(thread_id=thread_id, resource_id="u", messages=said)
            turn.end([Message.assistant("noted")])
        store.armed = (memory.memory, "b")
        counts = memory.forget("4321", resource_id="u")  # before: ThreadNotFoundError: Thread 'b' ...
        assert store.landed == 1
        assert counts["parts"] + counts["messages"] == 2  # a's and c's; b went with its thread
        assert [t.id for t in memory.list_threads("u")] == ["a", "c"]
        assert not any("4321" in (m.text or "") for t in ("a", "c") for m in memory.list_messages(t))
