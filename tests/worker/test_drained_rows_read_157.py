"""``Worker.drained()`` (``obsmem worker --drain`` asks it on every idle poll) reads a bounded
number of rows, on every store.

It read every queued item of each of its kinds (``list_work(kind)``) to learn whether there was
one, and every buffer lease to learn whether one was unexpired: with a few hundred items queued,
each call read them all, and a draining worker calls it again on every idle poll. It now asks
the store whether any item waits (one row at most) and counts the unexpired leases in the store.
Counted in rows handed out by the store's methods, not time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.leasing import BUFFER_OBSERVATION, BUFFER_REFLECTION
from obsmem.storage.postgres.store import PostgresStore
from obsmem.worker import WORK_OBSERVE, WORK_REFLECT, Worker

from ..cli.test_queue_rows_read_157 import count_rows
from ..postgres.worker_config import config

pytestmark = pytest.mark.anyio

QUEUED, LEASES = 300, 120


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    adapter: Store
    if request.param == "memory":
        adapter = MemoryStore()
    elif request.param == "sqlite":
        adapter = SQLiteStore(tmp_path / "drain.db")
    else:
        adapter = PostgresStore(request.getfixturevalue("postgres_url"), max_size=5, migrate=False)
    async with adapter:
        yield adapter


async def test_drained_reads_one_row_of_a_long_queue(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.now(UTC)
    for n in range(QUEUED):
        await store.enqueue_work(WORK_REFLECT if n % 2 else WORK_OBSERVE, f"t{n:05d}", now=now, delay_s=600)
    worker = Worker(store, config=config(), clock=FakeClock(now), owner="w-157")
    read = count_rows(store, monkeypatch.setattr)
    for _ in range(5):  # a draining worker asks on every idle poll
        assert await worker.drained() is False
    assert sum(read.values()) <= 5, f"{read} rows read by 5 calls of drained() with {QUEUED} items queued"


async def test_drained_counts_leases_in_the_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.now(UTC)
    earlier = now - timedelta(seconds=30)
    for n in range(LEASES):  # buffer leases a dead worker left, expired
        prefix = BUFFER_OBSERVATION if n % 2 else BUFFER_REFLECTION
        assert await store.acquire_lease(f"{prefix}:thread:t{n:05d}", "dead", ttl_s=5, now=earlier)
    await store.acquire_lease("obs:thread:elsewhere", "other", ttl_s=600, now=now)  # not a buffer lease
    worker = Worker(store, config=config(), clock=FakeClock(now), owner="w-157")
    read = count_rows(store, monkeypatch.setattr)
    assert await worker.drained() is True
    assert await store.acquire_lease(f"{BUFFER_REFLECTION}:thread:live", "alive", ttl_s=60, now=now)
    assert await worker.drained() is False
    assert sum(read.values()) <= 4, f"{read} rows read by drained() with {LEASES} expired buffer leases"
