"""The SQLite store's inline reads (:mod:`obsmem.storage.sqlite.inline`): a turn's small reads
run where they are called, and give exactly what the worker thread gives; anything above the
bounds, busy or in use goes to the worker thread, complete."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.errors import StoreClosedError, ThreadNotFoundError
from obsmem.storage import SQLiteStore
from obsmem.storage.contract import read_window
from obsmem.storage.sqlite import inline
from obsmem.types import Thread

pytestmark = pytest.mark.anyio


async def _store(tmp_path: Path, messages: int = 6) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "inline.db")
    await store.create_thread(Thread(id="t1", resource_id="u1"))
    if messages:
        await store.save_messages("t1", [Message.user(f"message {i}") for i in range(messages)])
    return store


class Composed:
    """The store without its native read_window (the contract's composition)."""

    def __init__(self, store: SQLiteStore) -> None:
        self.get_head = store.get_head
        self.list_messages = store.list_messages


async def test_a_turns_reads_run_inline_and_equal_the_worker_threads(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    hits = store._inline.hits
    thread = await store.get_thread("t1")
    head, messages = await store.read_window("thread:t1", "t1")
    assert store._inline.hits == hits + 2  # both ran here, no hand-off
    assert thread is not None and thread.resource_id == "u1"
    assert (head, messages) == await read_window(Composed(store), "thread:t1", "t1")  # type: ignore[arg-type]
    assert await store.get_thread("nobody") is None
    await store.close()


async def test_a_window_above_the_row_bound_is_read_whole_on_the_worker_thread(tmp_path: Path) -> None:
    store = await _store(tmp_path, messages=inline.MAX_ROWS * 2 + 3)
    decoded_here: list[str] = []
    loop_thread = threading.get_ident()
    real = store._message

    def counting(row: sqlite3.Row) -> Message:
        if threading.get_ident() == loop_thread:
            decoded_here.append(row["id"])
        return real(row)

    store._message = counting  # type: ignore[method-assign]
    misses = store._inline.misses
    _, messages = await store.read_window("thread:t1", "t1")
    assert [m.text for m in messages] == [f"message {i}" for i in range(inline.MAX_ROWS * 2 + 3)]
    assert store._inline.misses == misses + 1
    assert decoded_here == []  # refused before decoding anything on the caller's thread
    await store.close()


async def test_a_window_above_the_size_bound_is_read_whole_on_the_worker_thread(tmp_path: Path) -> None:
    store = await _store(tmp_path, messages=0)
    big = "x" * (inline.MAX_CHARS + 10)
    await store.save_messages("t1", [Message.user("small"), Message.user(big)])
    misses = store._inline.misses
    _, messages = await store.read_window("thread:t1", "t1")
    assert [len(m.text) for m in messages] == [5, len(big)]
    assert store._inline.misses == misses + 1
    await store.close()


async def test_an_unknown_thread_is_reported_as_from_the_worker_thread(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    await store.get_thread("t1")  # opens the connections
    with pytest.raises(ThreadNotFoundError):
        await store.read_window("thread:gone", "gone")
    await store.delete_thread("t1")
    with pytest.raises(ThreadNotFoundError):
        await store.read_window("thread:t1", "t1")
    assert await store.get_thread("t1") is None
    await store.close()


async def test_an_open_write_elsewhere_neither_blocks_nor_shows(tmp_path: Path) -> None:
    """Another process in the middle of a write: the read does not wait, and sees the last commit."""
    store = await _store(tmp_path)
    await store.get_thread("t1")
    other = sqlite3.connect(tmp_path / "inline.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE messages SET parts = '[]' WHERE thread_id = 't1'")
    hits = store._inline.hits
    _, messages = await store.read_window("thread:t1", "t1")
    assert [m.text for m in messages] == [f"message {i}" for i in range(6)]
    assert store._inline.hits == hits + 1
    other.execute("ROLLBACK")
    other.close()
    await store.close()


async def test_a_reader_in_use_sends_the_read_to_the_worker_thread(tmp_path: Path) -> None:
    """Another event loop's thread using the inline connection: this read never waits for it."""
    store = await _store(tmp_path)
    await store.get_thread("t1")
    misses = store._inline.misses
    with store._inline._lock:
        _, messages = await store.read_window("thread:t1", "t1")
    assert len(messages) == 6 and store._inline.misses == misses + 1
    await store.close()


async def test_a_closed_store_refuses_inline_reads_too(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    await store.get_thread("t1")
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.get_thread("t1")
    with pytest.raises(StoreClosedError):
        await store.read_window("thread:t1", "t1")


async def test_the_inline_connection_cannot_write(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    await store.get_thread("t1")
    conn = store._inline._conn
    assert conn is not None
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("DELETE FROM messages")
    await store.close()


async def test_a_turn_sees_what_another_process_committed(tmp_path: Path) -> None:
    """Inline reads read the file, not a cache: a message another process saved is in the next
    context."""
    path = tmp_path / "shared.db"
    first = Memory(f"sqlite:///{path}")
    second = Memory(f"sqlite:///{path}")
    turn = await first.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("hello")])
    await turn.end([Message.assistant("hi")])
    await second.save_messages("t1", [Message.user("from elsewhere")])
    turn = await first.begin_turn(thread_id="t1", messages=[Message.user("and now?")])
    assert [m.text for m in turn.context.raw_messages] == ["hello", "hi", "from elsewhere", "and now?"]
    await turn.end()
    await first.aclose()
    await second.aclose()
