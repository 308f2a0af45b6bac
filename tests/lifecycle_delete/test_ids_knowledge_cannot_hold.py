"""Erasing a thread whose id a knowledge scope cannot hold (``chat/42``: a knowledge scope id
has no '/' or whitespace) finishes every step, with a knowledge store attached.

Hostile review (helper-103) on main (d2e97d7): ``begin_turn(thread_id="chat/42")`` worked (its
knowledge capture failed and was logged), but ``forget(value, thread_id="chat/42")`` raised
InvalidScopeError after erasing the messages, and ``delete_thread("chat/42")`` raised it after the
thread row was gone: the knowledge purge and the write-ahead log's truncation never ran, so the
deleted text stayed in the ``-wal`` file (32 copies while the process ran).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

MARK = b"ZEBRA-7731"


def copies(folder: Path) -> dict[str, int]:
    return {p.name: p.read_bytes().count(MARK) for p in sorted(folder.glob("m.db*")) if p.read_bytes().count(MARK)}


async def filled(memory: Memory, thread_id: str) -> None:
    for index in range(6):
        turn = await memory.begin_turn(
            thread_id=thread_id, resource_id="alice", messages=[Message.user(f"My locker code is ZEBRA-7731-{index}.")]
        )
        await turn.end([Message.assistant("ok")])


def memory_with_knowledge(folder: Path, knowledge: Knowledge) -> Memory:
    config = MemoryConfig(observation={"message_tokens": 150, "buffer_tokens": False})
    return Memory(f"sqlite:///{folder / 'm.db'}", config=config, knowledge=knowledge, max_turn_wait=None)


async def test_delete_thread_with_a_slash_in_its_id_finishes(tmp_path: Path) -> None:
    knowledge = Knowledge.sqlite(str(tmp_path / "k.db"))
    try:
        async with memory_with_knowledge(tmp_path, knowledge) as memory:
            await filled(memory, "chat/42")
            assert await memory.delete_thread("chat/42") is True
            assert await memory.store.get_thread("chat/42") is None
            assert copies(tmp_path) == {}, "the deleted text is still in the database files"
    finally:
        await knowledge.close()


async def test_forget_in_a_thread_with_a_slash_in_its_id_finishes(tmp_path: Path) -> None:
    knowledge = Knowledge.sqlite(str(tmp_path / "k.db"))
    try:
        async with memory_with_knowledge(tmp_path, knowledge) as memory:
            await filled(memory, "chat/42")
            counts = await memory.forget("ZEBRA-7731", thread_id="chat/42")
            assert counts["messages"] >= 6
            assert not any("ZEBRA-7731" in m.text for m in await memory.list_messages("chat/42"))
            assert copies(tmp_path) == {}, "the forgotten text is still in the database files"
    finally:
        await knowledge.close()
