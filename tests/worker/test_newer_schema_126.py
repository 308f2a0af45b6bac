"""A running worker stops when another obsmem version migrates its store past it (helper-126's
hostile review).

``obsmem worker`` refuses to start on a database that records a migration it does not know
("created by a newer obsmem ... Upgrade obsmem"): it would write rows in a shape the newer code
does not expect. But the check ran only when the worker opened its connection: a worker already
running when an operator ran a newer ``obsmem migrate`` (a rolling upgrade) went on claiming and
running work against the new schema for as long as it lived. Now the worker looks at the schema
again before claiming, at most once a minute of its clock, and stops with the same
``MigrationError`` (the work stays queued for an upgraded worker).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.errors import MigrationError
from obsmem.storage import SQLiteStore
from obsmem.types import Message, TextPart, Thread
from obsmem.worker import WORK_OBSERVE, Worker

pytestmark = pytest.mark.anyio


async def test_a_running_worker_stops_once_a_newer_version_migrated_its_store(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    clock = FakeClock()
    config = MemoryConfig(observation=ObservationConfig(message_tokens=2000, buffer_tokens=0.2))
    async with SQLiteStore(db) as store:
        for thread_id in ("t1", "t2"):
            await store.create_thread(Thread(id=thread_id, resource_id="u1"))
            await store.save_messages(thread_id, [
                Message(id=f"{thread_id}-m{i}", role="user", parts=(TextPart(text=f"The budget is {i} euros."),))
                for i in range(4)
            ])  # fmt: skip
        await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
        worker = Worker(store, config=config, clock=clock, owner="old-worker")
        assert await worker.run_once() is True  # the schema it knows: it works

        with sqlite3.connect(db) as other:  # a newer obsmem migrates the file
            other.execute("INSERT INTO _obsmem_migrations VALUES ('m999_from_the_future', '2027-01-01T00:00:00+00:00')")
        await store.enqueue_work(WORK_OBSERVE, "t2", now=clock.now())
        clock.advance(120)
        with pytest.raises(MigrationError, match="newer obsmem"):
            await worker.run_once()
        [left] = await store.list_work(WORK_OBSERVE)
        assert left.target == "t2" and left.claimed_by is None, "the work waits for an upgraded worker"

        with pytest.raises(MigrationError):  # and run() ends with it, as at start-up
            await worker.run(exit_when_idle=True)
