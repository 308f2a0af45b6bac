"""Two erasers at once on one store (two app workers: two tasks here, on every adapter): one
stops after it read what it rewrites (a message, working memory, an older generation) while the
other forgets another value or deletes a thread. Every such rewrite wrote back what was read, so
the second writer brought back what the first had removed. Now each is a compare-and-set on what
was read: the stopped eraser's write is refused, and it reads the row again and redoes its
change. Checked in every table (every dictionary of the in-memory store).

The stop is a hook on the store method the stopped eraser writes with, waiting on an event, so
the interleaving is the same on every run (no timing). The same races across processes on
PostgreSQL: tests/postgres_multiprocess/test_eraser_races_132.py."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.models.testing import FunctionModel
from obsmem.storage import Store
from obsmem.types import TextPart

from .scan import scan

pytestmark = pytest.mark.anyio

STOPPED: contextvars.ContextVar[bool] = contextvars.ContextVar("stopped", default=False)


def stop_at(store: Store, name: str) -> tuple[asyncio.Event, asyncio.Event]:
    """The store's ``name`` stops at its first call from a task run with ``STOPPED`` set: the
    first event is set there, and the call goes on once the second is set. (On a store without
    the compare-and-set method, at the one erasers wrote with before it.)"""
    if not hasattr(store, name):
        name = {"rewrite_message": "save_messages", "replace_working_memory": "set_working_memory"}[name]
    method = getattr(store, name)
    reached, go = asyncio.Event(), asyncio.Event()

    async def stopping(*args: Any, **kwargs: Any) -> Any:
        if STOPPED.get() and not reached.is_set():
            reached.set()
            await go.wait()
        return await method(*args, **kwargs)

    setattr(store, name, stopping)
    return reached, go


async def race(store: Store, name: str, stopped: Callable[[], Awaitable[object]],
               meanwhile: Callable[[], Awaitable[object]]) -> None:
    """``stopped`` runs until it reaches the store's ``name``; ``meanwhile`` runs whole; then
    ``stopped`` finishes."""
    reached, go = stop_at(store, name)

    async def first() -> object:
        STOPPED.set(True)
        return await stopped()

    task = asyncio.create_task(first())
    await reached.wait()
    await meanwhile()
    go.set()
    await task


async def test_two_forgets_of_one_message_keep_both_out(store: Store) -> None:
    async with Memory(store) as memory:
        await memory.create_thread(thread_id="t1", resource_id="u1")
        await memory.save_messages("t1", [Message(id="two", role="user", parts=(
            TextPart(text="My old PIN was ValueOne."), TextPart(text="My new PIN is ValueTwo."),
            TextPart(text="Please keep this."),
        ))])
        await race(store, "rewrite_message", lambda: memory.forget("ValueOne", thread_id="t1"),
                   lambda: memory.forget("ValueTwo", thread_id="t1"))
        assert scan(store, "ValueOne") == [] and scan(store, "ValueTwo") == []
        [kept] = await memory.list_messages("t1")
        assert kept.text == "Please keep this."


async def test_two_forgets_of_one_working_memory_keep_both_out(store: Store) -> None:
    async with Memory(store) as memory:
        await memory.create_thread(thread_id="t1", resource_id="u1")
        await store.set_working_memory("thread:t1", "- pin: ValueOne\n- code: ValueTwo\n- name: Ada")
        await race(store, "replace_working_memory", lambda: memory.forget("ValueOne", thread_id="t1"),
                   lambda: memory.forget("ValueTwo", thread_id="t1"))
        assert scan(store, "ValueOne") == [] and scan(store, "ValueTwo") == []
        assert await store.get_working_memory("thread:t1") == "- name: Ada"


async def test_a_forget_stopped_at_working_memory_leaves_nothing_of_a_thread_deleted_meanwhile(store: Store) -> None:
    async with Memory(store) as memory:
        await memory.create_thread(thread_id="t1", resource_id="u1")
        await store.set_working_memory("thread:t1", "- pin: ValueOne\n- name: Ada Lovelace")
        await race(store, "replace_working_memory", lambda: memory.forget("ValueOne", thread_id="t1"),
                   lambda: memory.delete_thread("t1"))
        assert scan(store, "Ada Lovelace") == []


def echo_observer() -> FunctionModel:
    def answer(messages: list[Message], settings: object) -> str:
        prompt = "\n".join(m.text for m in messages)
        facts = [f"* 🔴 (09:00) User said {word}." for word in ("Heron-4242", "Secret-7") if word in prompt]
        return "<observations>\nDate: Jun 15, 2025\n" + "\n".join(facts or ["* 🟢 (09:00) Small talk."]) + \
            "\n</observations>"

    return FunctionModel(answer)


@pytest.mark.parametrize("stopped", ["delete", "forget"])
async def test_a_delete_and_a_forget_rewriting_one_older_generation_lose_neither(store: Store, stopped: str) -> None:
    """Resource scope: an older generation holds thread t1's section and, in t2's, a value; t1 is
    deleted while the value is forgotten, either one stopped after it read the generation."""
    config = MemoryConfig(scope="resource")
    async with Memory(store, config=config, observer=echo_observer(), reflector="offline") as memory:
        for thread, word in (("t1", "Heron-4242"), ("t2", "Secret-7")):
            await memory.create_thread(thread_id=thread, resource_id="u1")
            await memory.save_messages(thread, [Message.user(f"Remember {word}, please.", id=f"{thread}-u")])
            await memory.observe(thread)
        await memory.reflect("t1")
        [older] = [g for g in await memory.list_generations("t1") if not g.is_live]
        assert "Heron-4242" in older.active_observations and "Secret-7" in older.active_observations
        delete, forget = (lambda: memory.delete_thread("t1")), (lambda: memory.forget("Secret-7", resource_id="u1"))
        await race(store, "rewrite_generation", *((delete, forget) if stopped == "delete" else (forget, delete)))
        assert scan(store, "Heron-4242") == [] and scan(store, "Secret-7") == []
