"""The SQLite store's inline reads (:mod:`obsmem.storage.sqlite.inline`): a turn's small reads
run where they are called, and give exactly what the worker thread gives; anything above the
bounds, busy or in use goes to the worker thread, complete."""

from __future__ import annotations

import asyncio
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


# -- saves written here (SQLiteStore._save_here): only the commit goes to another thread ---------


class Handoffs:
    """Counts the jobs handed to the store's worker thread."""

    def __init__(self, store: SQLiteStore) -> None:
        self.count = 0
        real = store._executor.submit

        def submit(*args: object, **kwargs: object) -> object:
            self.count += 1
            return real(*args, **kwargs)  # type: ignore[arg-type]

        store._executor.submit = submit  # type: ignore[method-assign]


async def test_a_turns_saves_are_written_here_and_read_back_as_the_worker_thread_writes(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}")
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("warm up")])
    await turn.end([Message.assistant("ok")])
    store = memory.store
    assert isinstance(store, SQLiteStore)
    handoffs = Handoffs(store)
    turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("a question")])
    context = await turn.step([Message.assistant("an answer", metadata={"k": [1, "two"]})])
    await turn.end()
    assert handoffs.count == 0  # neither save, nor any read, went through the worker thread
    stored = await memory.list_messages("t1")
    assert [m.text for m in stored] == ["warm up", "ok", "a question", "an answer"]
    assert [m.seq for m in stored] == sorted({m.seq for m in stored})
    assert stored[-1].metadata["k"] == [1, "two"]
    shown = {m.id: m for m in context.raw_messages}
    assert all(shown[m.id].model_dump() == m.model_dump() for m in stored if m.id in shown)  # as a read gives them
    await memory.aclose()


async def test_a_save_while_another_process_writes_waits_on_the_worker_thread_not_the_loop(tmp_path: Path) -> None:
    """Another connection holds the write lock: the save is not written here (that would wait
    for the lock on the event loop); it waits on the worker thread, the loop runs meanwhile, and
    it is stored once the other write ends."""
    path = tmp_path / "m.db"
    memory = Memory(f"sqlite:///{path}")
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("warm up")])
    await turn.end()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    pending = asyncio.create_task(memory.begin_turn(thread_id="t1", messages=[Message.user("while locked")]))
    ticks = 0
    for _ in range(5):
        await asyncio.sleep(0.01)
        ticks += 1
    assert not pending.done() and ticks == 5  # the loop ran while the save waited for the lock
    other.execute("COMMIT")
    other.close()
    turn = await pending
    assert [m.text for m in turn.context.raw_messages][-1] == "while locked"
    await turn.end()
    assert [m.text for m in await memory.list_messages("t1")] == ["warm up", "while locked"]
    await memory.aclose()


async def test_saves_from_two_event_loops_share_the_connection_safely(tmp_path: Path) -> None:
    """Two threads, each with its own event loop, save through one store at once: a save written
    here claims the connection, and the other thread's jobs wait for its commit (none runs
    inside its transaction). Every message is stored once, in each thread's order."""
    store = SQLiteStore(tmp_path / "m.db")
    await store.create_thread(Thread(id="t1", resource_id="u1"))
    await store.create_thread(Thread(id="t2", resource_id="u1"))
    failures: list[BaseException] = []

    def writer(thread_id: str) -> None:
        async def run() -> None:
            for i in range(60):
                saved, _, _, commit = await store.save_messages_marked_early(
                    thread_id, [Message.user(f"{thread_id}-{i}")], f"thread:{thread_id}"
                )
                await commit
                assert saved[0].text == f"{thread_id}-{i}"
                if i % 7 == 0:  # a worker-thread job between the saves
                    await store.list_messages(thread_id, limit=3, newest_first=True)

        try:
            asyncio.run(run())
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("t1", "t2")]
    for t in threads:
        t.start()
    for t in threads:
        await asyncio.to_thread(t.join)
    assert failures == []
    for thread_id in ("t1", "t2"):
        assert [m.text for m in await store.list_messages(thread_id)] == [f"{thread_id}-{i}" for i in range(60)]
    await store.close()


async def test_a_save_above_the_inline_bounds_is_written_whole_on_the_worker_thread(tmp_path: Path) -> None:
    store = await _store(tmp_path, messages=0)
    await store.get_thread("t1")
    handoffs = Handoffs(store)
    big = "y" * (inline.MAX_CHARS + 10)
    saved, _, _, commit = await store.save_messages_marked_early(
        "t1", [Message.user("small"), Message.user(big)], "thread:t1"
    )
    await commit
    assert handoffs.count == 1 and [len(m.text) for m in saved] == [5, len(big)]
    many = [Message.user(f"m{i}") for i in range(inline.MAX_ROWS + 1)]
    saved, _, _, commit = await store.save_messages_marked_early("t1", many, "thread:t1")
    await commit
    assert handoffs.count == 2 and len(saved) == len(many)
    assert len(await store.list_messages("t1")) == 2 + len(many)
    await store.close()


async def test_a_turn_cancelled_during_its_save_leaves_the_store_usable(tmp_path: Path) -> None:
    """A caller's timeout around ``begin_turn`` or ``step`` (``asyncio.wait_for``, a request
    timeout, a TaskGroup sibling failing) cancels the wait for a save's commit. Before this fix,
    when that happened before the commit thread had started the commit, the commit never ran:
    the save's transaction stayed open, every later call of the store hung and every other
    process got "database is locked" (hostile review helper-99: 4 of 4 runs). The commit now
    runs whatever happens to its waiter."""
    path = tmp_path / "m.db"
    memory = Memory(f"sqlite:///{path}")
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("hello")])
    await turn.end([Message.assistant("hi")])
    timeouts = 0
    for i in range(120):
        try:
            turn = await asyncio.wait_for(
                memory.begin_turn(thread_id="t1", messages=[Message.user(f"q{i}")]), timeout=0.0004 * (i % 8 + 1)
            )
            await asyncio.wait_for(turn.step([Message.assistant(f"a{i}")]), timeout=0.0004 * (i % 5 + 1))
            await turn.end()
        except TimeoutError:
            timeouts += 1
        # the store still answers (a hang would end the test here, not at the end)
        await asyncio.wait_for(memory.list_messages("t1", limit=1), timeout=30)
    assert timeouts  # the timeouts did hit saves in flight
    other = sqlite3.connect(path, timeout=30)
    other.execute("BEGIN IMMEDIATE")  # no transaction of the store's is left open
    other.execute("ROLLBACK")
    other.close()
    texts = [m.text for m in await memory.list_messages("t1")]
    assert texts[:2] == ["hello", "hi"] and len(texts) == len(set(texts))  # each stored once, if at all
    await memory.aclose()
