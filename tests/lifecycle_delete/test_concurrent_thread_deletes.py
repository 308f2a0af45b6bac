"""Two deletes of threads of one resource, each in its own app process on one SQLite file (two
workers of a service), ending at the same time: each takes its thread off the resource's erase
note by reading the note and writing back the rest. Read by both before either wrote, the note
came back holding the thread the other had finished deleting, and stayed for good: a
working-memory row, in the file, naming the resource and that thread (ids count as data to erase).

The two processes are two stores on the file, a hook in each pausing at its note's read, so the
interleaving is the same on every run (no timing)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig
from obsmem.storage import SQLiteStore

pytestmark = pytest.mark.anyio

NOTE = "obsmem:erasing:resource:USER-7731"


class Paused(SQLiteStore):
    """A real SQLite store whose second read of the resource's erase note (the delete's end)
    waits on ``before`` before reading and ``after`` after it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads = 0
        self.before = asyncio.Event()
        self.after = asyncio.Event()
        self.at_before = asyncio.Event()
        self.at_after = asyncio.Event()

    async def get_working_memory(self, key: str) -> str | None:
        if key != NOTE:
            return await super().get_working_memory(key)
        self.reads += 1
        if self.reads == 2:
            self.at_before.set()
            await self.before.wait()
        text = await super().get_working_memory(key)
        if self.reads == 2:
            self.at_after.set()
            await self.after.wait()
        return text


def rows_holding(db: Path, needle: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT key, text FROM working_memory").fetchall()
        return [(k, t) for k, t in rows if needle in k or needle in t]
    finally:
        conn.close()


async def test_two_thread_deletes_ending_together_leave_no_note_of_either(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with Memory(f"sqlite:///{db}", config=MemoryConfig(scope="thread")) as memory:
        await memory.create_thread("thread-A", "USER-7731")
        await memory.create_thread("thread-B", "USER-7731")

    a, b = Paused(db), Paused(db)
    a.before.set()  # a pauses only after its end's read
    async with Memory(a, config=MemoryConfig(scope="thread")) as ma, Memory(b, config=MemoryConfig(scope="thread")) as mb:
        deleting_b = asyncio.create_task(mb.delete_thread("thread-B"))
        await b.at_before.wait()  # b has noted thread-B and deleted it, not yet taken its note off
        deleting_a = asyncio.create_task(ma.delete_thread("thread-A"))
        await a.at_after.wait()  # a has read the note: both threads listed
        b.before.set()
        b.after.set()
        assert await deleting_b  # b takes thread-B off, writing back thread-A
        a.after.set()
        assert await deleting_a  # a takes thread-A off what it read, writing back thread-B

    assert rows_holding(db, "USER-7731") == []
    assert rows_holding(db, "thread-") == []
