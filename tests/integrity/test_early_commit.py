"""A boundary builds its context while its save reaches the disk, and a save that fails to
commit leaves nothing behind (issue 18, "a lighter turn").

On SQLite a turn's save hands its rows back once they are written in the transaction, before
the commit's fsync; the turn builds the context a quiet boundary returns meanwhile, then waits
for the commit before any memory work and before it returns. Here the disk is made to fail at
that commit (the store's own connection, wrapped to refuse ``COMMIT`` as a full disk would):
the boundary must fail with ``input_saved=False``, the message must not be stored, and no later
context may show it (nor lose what was stored) — the kept window must not hold what was never
committed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.errors import StorageError
from obsmem.storage.sqlite.store import SQLiteStore
from obsmem.types import Thread

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=30_000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=40_000),
)


class FailingDisk:
    """The store's connection, refusing ``COMMIT`` while ``failing`` (as a full disk would), or
    holding it until ``release`` is set."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.failing = False
        self.release: threading.Event | None = None

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            if self.release is not None:
                self.release.wait(10)
            if self.failing:
                raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


async def disk_of(memory: Memory) -> FailingDisk:
    store = memory.store
    assert isinstance(store, SQLiteStore)
    await store.get_thread("warm-up")  # opens the connection on the worker thread
    assert store._conn is not None
    disk = FailingDisk(store._conn)
    store._conn = disk  # type: ignore[assignment]
    return disk


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


async def test_a_begin_turn_whose_commit_fails_stores_nothing_and_shows_nothing(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", config=QUIET)
    for i in range(3):
        async with await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(f"q{i}")]) as turn:
            await turn.step([Message.assistant(f"a{i}")])
    disk = await disk_of(memory)

    disk.failing = True
    lost = Message.user("this never reached the disk")
    with pytest.raises(StorageError, match="disk is full") as failed:
        await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[lost])
    assert failed.value.input_saved is False
    disk.failing = False

    stored = await memory.list_messages("t1")
    assert texts(stored) == [f"{r}{i}" for i in range(3) for r in "qa"]
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q3")])
    shown = [m.text for m in turn.context.messages]
    assert shown == [*texts(stored), "q3"]  # not the lost message, nothing of the rest lost
    context = await turn.step([Message.assistant("a3")])
    assert [m.text for m in context.messages] == [*texts(stored), "q3", "a3"]
    await turn.end()

    # The retry the error invites: the same message, stored once.
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[lost])
    assert [m.text for m in turn.context.messages][-1] == lost.text
    await turn.end()
    assert texts(await memory.list_messages("t1")).count(lost.text) == 1
    await memory.aclose()


async def test_a_step_whose_commit_fails_leaves_the_turn_to_retry(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", config=QUIET)
    async with await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q0")]) as turn:
        await turn.step([Message.assistant("a0")])
    disk = await disk_of(memory)
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q1")])
    reply = Message.assistant("a1")

    disk.failing = True
    with pytest.raises(StorageError, match="disk is full") as failed:
        await turn.step([reply])
    assert failed.value.input_saved is False
    disk.failing = False
    assert texts(await memory.list_messages("t1")) == ["q0", "a0", "q1"]

    context = await turn.step([reply])  # the retry
    assert [m.text for m in context.messages] == ["q0", "a0", "q1", "a1"]
    await turn.end()
    assert texts(await memory.list_messages("t1")) == ["q0", "a0", "q1", "a1"]
    await memory.aclose()


async def test_the_rows_come_back_before_the_commit_and_are_stored_only_with_it(tmp_path: Path) -> None:
    """The store's early save: the caller has the rows (with their seqs) while the commit is
    still held; nobody else sees them until it lands, and what is queued after it runs after it."""
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    await store.create_thread(Thread(id="t1", resource_id="u1"))
    disk = FailingDisk(store._conn)  # type: ignore[arg-type]
    store._conn = disk  # type: ignore[assignment]
    disk.release = threading.Event()

    saved, before, after, commit = await store.save_messages_marked_early("t1", [Message.user("hello")], "thread:t1")
    assert [m.text for m in saved] == ["hello"] and saved[0].seq is not None
    assert before is not None and after is not None and after[1] == before[1] + 1
    assert not commit.done()
    other = sqlite3.connect(path)
    assert other.execute("SELECT count(*) FROM messages").fetchone()[0] == 0  # not committed yet
    queued = asyncio.ensure_future(store.list_messages("t1"))
    await asyncio.sleep(0.05)
    assert not queued.done()  # the worker thread is still on the save

    disk.release.set()
    await commit
    assert other.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
    assert [m.text for m in await queued] == ["hello"]
    other.close()
    await store.close()


async def test_an_early_save_that_fails_before_its_rows_are_written_raises_at_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    await store.create_thread(Thread(id="t1", resource_id="u1"))
    foreign = Message.user("I belong elsewhere", thread_id="t2")
    with pytest.raises(Exception, match="t2"):
        await store.save_messages_marked_early("t1", [foreign], "thread:t1")
    assert await store.list_messages("t1") == []
    await store.close()
