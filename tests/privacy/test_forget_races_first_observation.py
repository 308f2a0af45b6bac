"""``Memory.forget(value)`` racing the *first* observation of a thread: one whose messages were
saved (``save_messages``, an import, a gateway request) but that has no observation record yet,
so the forget has no record to fence. Seen from the user's side on SQLite, with the forget run by
another ``Memory`` over the same file (another process, as far as obsmem knows). The race is
made deterministic by holding one real store call (or the observer's call) on a gate the test
opens, never by timing.

The value must be nowhere afterwards: observations, context, every generation, every message.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.storage import SQLiteStore
from tests.privacy.test_forget_races_observation import FILLER, SECRET, GatedObserver

pytestmark = pytest.mark.anyio

CONFIG = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                      reflection={"observation_tokens": 4000})  # fmt: skip


class GatedStore(SQLiteStore):
    """A SQLite store one of whose methods (``method``) waits on ``gate`` once armed."""

    def __init__(self, path: Path, method: str) -> None:
        super().__init__(path)
        self.method, self.armed = method, False
        self.entered, self.gate = asyncio.Event(), asyncio.Event()
        original = getattr(self, method)

        async def gated(*args: Any, **kwargs: Any) -> Any:
            if self.armed:
                self.armed = False
                self.entered.set()
                await self.gate.wait()
            return await original(*args, **kwargs)

        setattr(self, method, gated)


async def _seeded(memory: Memory) -> None:
    """A thread holding the value, saved without a turn: it has no observation record."""
    await memory.create_thread("t1", resource_id="alice")
    await memory.save_messages("t1", [Message.user(f"My locker code is {SECRET}."), Message.assistant("Noted.")])
    assert await memory.get_record("t1") is None


async def _clean(memory: Memory) -> None:
    for j in range(3):  # the conversation goes on: what is pending is observed from what is stored
        async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user(FILLER[j] * 3)]) as turn:
            await turn.step([Message.assistant(f"Noted {j}.")])
    await memory.settled()
    observations = await memory.get_observations("t1")
    context = await memory.get_context("t1")
    generations = await memory.list_generations("t1", limit=1000)
    messages = await memory.list_messages("t1")
    assert SECRET not in observations
    assert not [m.id for m in context.messages if SECRET in m.text]
    assert [g.generation for g in generations if SECRET in g.active_observations] == []
    assert [m.id for m in messages if SECRET in m.model_dump_json()] == []
    assert "Lisbon" in observations or "groceries" in observations  # the rest was observed


async def test_a_forget_while_a_first_observation_creates_its_record_leaves_nothing(tmp_path: Path) -> None:
    """The first boundary read the thread's messages (no record yet), then, while it created the
    record, the forget ran from start to end. (Passed on main too: the observation reads its
    batch again after the record exists. It guards that order.)"""
    store = GatedStore(tmp_path / "m.db", "create_record")
    memory = Memory(store, config=CONFIG)
    await _seeded(memory)
    store.armed = True
    turn = asyncio.create_task(_first_turn(memory))
    await store.entered.wait()
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}", config=CONFIG) as other:
        counts = await other.forget(SECRET)
    assert counts["messages"] == 1
    store.gate.set()
    await turn
    await _clean(memory)
    await memory.aclose()


async def test_a_first_observation_during_a_forget_leaves_nothing(tmp_path: Path) -> None:
    """The forget began (the thread had no record to fence), and before it reached the messages
    the first observation read them and called its model; the forget finished while that call
    ran. On main: the observation committed afterwards with the value ('ZEBRAQUUX42' in
    get_observations, 'User stated their locker code is ZEBRAQUUX42')."""
    observer = GatedObserver(SECRET, buffered=False)
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", config=CONFIG, observer=observer)
    await _seeded(memory)
    forgetting = GatedStore(tmp_path / "m.db", "list_messages")
    other = Memory(forgetting, config=CONFIG)
    forgetting.armed = True
    forget = asyncio.create_task(other.forget(SECRET))
    await forgetting.entered.wait()  # begun: about to read the thread's messages
    turn = asyncio.create_task(_first_turn(memory))
    await asyncio.wait([turn, asyncio.create_task(observer.entered.wait())], return_when=asyncio.FIRST_COMPLETED)
    forgetting.gate.set()
    counts = await forget
    assert counts["messages"] == 1
    observer.gate.set()
    await turn
    await other.aclose()
    await _clean(memory)
    await memory.aclose()


async def _first_turn(memory: Memory) -> None:
    """A turn long enough to be observed at once (past the 120-token threshold)."""
    async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user(" ".join(FILLER))]) as turn:
        await turn.step([Message.assistant("Noted, all of it.")])
