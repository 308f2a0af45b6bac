"""A lease the store could not release (it was down, or locked by another writer) is released
once it is back.

A synchronous observation whose store failed under it (here SQLite locked by another process's
long write; on PostgreSQL, a restart) could not release its lease either. The lease then held
every later step of the thread in this process until its TTL ran out: the next turns observed
nothing (with the default ``max_turn_wait``), or waited the TTL out (``max_turn_wait=None``).
A fake clock here: the TTL never runs out, so only a real release frees the thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.errors import StorageError
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage.sqlite.store import SQLiteStore

from .helpers import Conversation, fake_clock, small_config

pytestmark = pytest.mark.anyio


async def test_a_lease_left_by_a_store_outage_does_not_hold_the_next_turn(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    started, gate = asyncio.Event(), asyncio.Event()
    calls = 0

    class GatedObserver(OfflineObserver):
        async def observe(self, request: ObservationRequest) -> ObservationResult:
            nonlocal calls
            calls += 1
            if calls == 1:
                started.set()
                await gate.wait()
            return await super().observe(request)

    store = SQLiteStore(path, busy_timeout=0.2)
    memory = Memory(store, config=small_config(), observer=GatedObserver(), clock=fake_clock(), max_turn_wait=None)
    conv = Conversation()
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1",
                                       messages=[conv.user("I live in Munich by the Isar. " * 40)])
        stepping = asyncio.create_task(turn.step([conv.assistant("Munich it is. " * 20)]))
        await asyncio.wait_for(started.wait(), 10)
        locker = sqlite3.connect(path, isolation_level=None)  # another process's long write
        locker.execute("BEGIN EXCLUSIVE")
        gate.set()
        with pytest.raises(StorageError):
            await stepping  # the observation's write failed, and so did its lease's release
        locker.execute("ROLLBACK")
        locker.close()
        await turn.end()
        nxt = await asyncio.wait_for(
            memory.begin_turn(thread_id="t1", messages=[conv.user("And I cycle to work. " * 40)]), 30
        )
        await nxt.step([conv.assistant("Cycling noted.")])
        await nxt.end()
        await memory.settled()
        assert calls == 2  # observed again once the store was back
        assert "sync-observation" not in (await memory.status("t1")).in_flight
        assert "Munich" in (await memory.get_record("t1")).active_observations
