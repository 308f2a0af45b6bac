"""A SQLite save hands its commit (the disk's sync) to a second thread and returns, so a turn
builds its context while the disk syncs. But that thread needs the interpreter lock to start the
commit, and the turn's own Python work held it: the second thread waited for the interpreter's
switch interval (5 ms) or for the turn to await, and the sync began only after the work it was
meant to overlap. A save now returns once the commit is under way."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from obsmem import Message
from obsmem.storage import connection
from obsmem.storage.sqlite.store import SQLiteStore
from obsmem.types import Thread

pytestmark = pytest.mark.anyio


async def test_a_save_returns_with_its_commit_under_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "HANDOFF_WAIT_S", 30.0, raising=False)  # a loaded machine's wake-up, whatever it is
    store = SQLiteStore(tmp_path / "om.db")
    try:
        await store.create_thread(Thread(id="t", resource_id="u"))
        *_, first = await store.save_messages_marked_early("t", [Message.user("hi")], "thread:t")
        await first  # (the second thread exists now: its start-up no longer hands the lock over)
        entered = threading.Event()
        release = threading.Event()
        real_finish = store._finish_claim

        def finish_claim(fn):  # type: ignore[no-untyped-def]
            def commit():  # type: ignore[no-untyped-def]
                entered.set()  # the second thread runs the commit now
                release.wait(30)  # the disk syncing (the lock left meanwhile, as sqlite3's execute leaves it)
                return fn()

            return real_finish(commit)

        monkeypatch.setattr(store, "_finish_claim", finish_claim)
        saved, _before, _after, commit = await store.save_messages_marked_early("t", [Message.user("hello")], "thread:t")
        started = entered.is_set()  # read before this thread leaves the lock anywhere
        release.set()
        await commit
        assert started, "the save returned before its commit had begun"
        assert [m.text for m in await store.list_messages("t")] == ["hi", "hello"] and saved[0].seq is not None
    finally:
        await store.close()
