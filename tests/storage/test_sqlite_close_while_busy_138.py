"""Closing a SQLite store (``Memory.aclose``, ``SyncMemory.close`` at a worker's shutdown) while
one of its writes waits for a database another connection keeps locked.

A write that finds the database locked waits up to the busy timeout inside SQLite, and is then
tried again, up to BUSY_RETRIES times (about 50 s in all with the defaults). Closing waits for
the write running on the store's thread, and the retries went on after the close began: a
``SyncMemory.close()`` whose ``close_timeout`` is 5 s took 50 s when another process held the
lock, and the write reported "database is locked" although it was the close that ended it. Once
the store is closing, a write whose try found the database locked (rolled back: nothing of it
was written) is not tried again: it raises StoreClosedError, and the close goes on.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from obsmem.errors import StoreClosedError
from obsmem.storage.sqlite import store as sqlite_store
from obsmem.storage.sqlite.store import SQLiteStore
from obsmem.types import Thread

pytestmark = pytest.mark.anyio


async def test_a_write_waiting_on_a_locked_database_stops_retrying_once_the_store_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "om.db"
    async with SQLiteStore(path) as store:
        await store.create_thread(Thread(id="t1", resource_id="r1"))

    pauses: list[float] = []
    backing_off, go_on = threading.Event(), threading.Event()

    def pause(seconds: float) -> None:  # the store's back-off between tries, held until told
        pauses.append(seconds)
        backing_off.set()
        go_on.wait(timeout=60)

    monkeypatch.setattr(sqlite_store, "time", SimpleNamespace(sleep=pause))
    blocker = sqlite3.connect(path, isolation_level=None)
    store = SQLiteStore(path, busy_timeout=0.01)
    try:
        await store.get_thread("t1")  # opened (and migrated) before the lock is taken
        blocker.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock throughout
        write = asyncio.ensure_future(store.set_working_memory("k", "never"))
        with anyio.fail_after(60):  # a hang guard
            await asyncio.to_thread(backing_off.wait, 60)  # the first try found it locked
            closing = asyncio.ensure_future(store.close())
            await asyncio.sleep(0)  # the close has begun
            go_on.set()
            with pytest.raises(StoreClosedError):
                await write
            await closing
        assert pauses == [0.05], f"the write was tried again after the close began: {pauses}"
    finally:
        go_on.set()
        blocker.execute("ROLLBACK")
        blocker.close()
    async with SQLiteStore(path) as again:
        assert await again.get_working_memory("k") is None  # nothing of the write was stored

