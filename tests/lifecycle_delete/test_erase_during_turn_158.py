"""A thread deleted while another thread of the same user builds its context: after
``delete_thread`` returns, none of the deleted thread's facts may stay in this process.

With ``working_memory_scope="resource"`` the user's working memory holds the deleted thread's
facts until the delete removes that row; a context of another thread built meanwhile (a turn of
the user's other conversation, in flight while the delete runs) shows it. That context is the
turn's; what the process keeps after the delete must not hold it (the volatile sections are
kept between contexts since 42e2fe6)."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections import deque
from types import ModuleType
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.storage.memory import MemoryStore

pytestmark = pytest.mark.anyio

SECRET = "ZEBRAQUUX58"
FILLER = ("We talked about the weather in Lisbon and the train schedule for Monday.",
          "I need to buy groceries: apples, bread, oat milk and coffee beans.",
          "My sister Ana is visiting next weekend, she likes hiking in Sintra.",
          "Remind me to call the dentist about the appointment on Thursday at 3pm.",
          "The project deadline moved to the 14th, and the budget review is on Friday.")  # fmt: skip


class _TurnDuringDelete(MemoryStore):
    """A store whose delete of the user's working memory lets a turn of another thread build
    its context first (the interleaving a concurrent turn gets at that await)."""

    def __init__(self) -> None:
        super().__init__()
        self.memory: Memory | None = None
        self.seen: list[str] = []

    async def delete_working_memory(self, key: str) -> bool:
        if key == "resource:alice" and self.memory is not None and not self.seen:
            context = await self.memory.get_context("t2")
            self.seen = [m.text for m in context.messages]
        return await super().delete_working_memory(key)


async def _converse(memory: Memory, thread: str, turns: int, said: dict[int, str] | None = None) -> None:
    for i in range(turns):
        text = (said or {}).get(i) or f"Turn {i}: " + FILLER[i % len(FILLER)]
        async with memory.turn(thread_id=thread, resource_id="alice", messages=[Message.user(text)]) as turn:
            await turn.step([Message.assistant(f"Noted turn {i}. " + FILLER[(i + 2) % len(FILLER)])])
    await memory.settled()


def _holding(roots: list[Any], needle: str) -> list[str]:
    """Paths from ``roots`` (obsmem's modules and the Memory) to strings holding ``needle``."""
    gc.collect()
    others = [m for n, m in list(sys.modules.items())
              if isinstance(m, ModuleType) and not (n == "obsmem" or n.startswith("obsmem."))]  # fmt: skip
    seen = {id(vars(m)) for m in others} | {id(m) for m in others}
    found: list[str] = []
    queue = deque((root, getattr(root, "__name__", type(root).__name__)) for root in roots)
    while queue:
        item, path = queue.popleft()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, str):
            if needle in item:
                found.append(path)
            continue
        if isinstance(item, bytes | int | float | bool | type(None)):
            continue
        refs = gc.get_referents(item)
        if isinstance(item, dict):
            refs.extend(item)
        names = {id(v): k for k, v in item.items() if isinstance(k, str)} if isinstance(item, dict) else {}
        for ref in refs:
            step = f"{path}.{names[id(ref)]}" if id(ref) in names and path.count(".") < 8 else path
            queue.append((ref, step))
    return found


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_a_context_built_during_a_delete_keeps_nothing_of_the_deleted_thread(scope: str) -> None:
    store = _TurnDuringDelete()
    config = MemoryConfig(
        scope=scope, reflection={"observation_tokens": 200},
        observation={"message_tokens": 120, "buffer_tokens": False, "manage_working_memory": True},
    )  # fmt: skip
    memory = Memory(store, config=config, working_memory_scope="resource", max_turn_wait=None)
    await _converse(memory, "t2", 6)
    await _converse(memory, "t1", 10, {2: f"My locker code is {SECRET}."})
    assert SECRET in (await memory.get_working_memory("t2") or "")

    store.memory = memory
    assert await memory.delete_thread("t1")
    assert any(SECRET in text for text in store.seen)  # the turn in flight saw it (before the row went)
    store.seen = []

    context = await memory.get_context("t2")
    assert not any(SECRET in (m.text or "") for m in context.messages)
    del context
    roots: list[Any] = [memory, *(m for n, m in list(sys.modules.items()) if n.startswith("obsmem"))]
    assert _holding(roots, SECRET) == []
    await memory.aclose()


class _SlowWorkingMemory(MemoryStore):
    """A store whose next read of the user's working memory answers only once ``hold`` is set:
    a turn that read it before a delete and builds its context after the delete returned."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: asyncio.Event | None = None

    async def get_working_memory(self, key: str) -> str | None:
        text = await super().get_working_memory(key)
        if key == "resource:alice" and self.hold is not None:
            hold, self.hold = self.hold, None
            await hold.wait()
        return text


async def test_a_turn_in_flight_across_a_delete_keeps_nothing_of_the_deleted_thread() -> None:
    store = _SlowWorkingMemory()
    config = MemoryConfig(
        scope="thread", reflection={"observation_tokens": 200},
        observation={"message_tokens": 120, "buffer_tokens": False, "manage_working_memory": True},
    )  # fmt: skip
    memory = Memory(store, config=config, working_memory_scope="resource", max_turn_wait=None)
    await _converse(memory, "t2", 6)
    await _converse(memory, "t1", 10, {2: f"My locker code is {SECRET}."})
    from obsmem.om.context import rendered_erasures

    erasures = rendered_erasures()
    store.hold = hold = asyncio.Event()
    in_flight = asyncio.create_task(memory.get_context("t2"))
    while store.hold is not None:  # until the turn has read the working memory
        await asyncio.sleep(0)
    assert await memory.delete_thread("t1")
    hold.set()
    context = await in_flight
    assert any(SECRET in m.text for m in context.messages)  # read before the delete: the turn's own
    erased = rendered_erasures() - erasures
    assert erased == 2  # the delete's (at its start and its end); the in-flight build's drop is no erase
    del context, in_flight
    roots: list[Any] = [memory, *(m for n, m in list(sys.modules.items()) if n.startswith("obsmem"))]
    assert _holding(roots, SECRET) == []
    await memory.aclose()
