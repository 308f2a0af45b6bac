"""Work is never completed undone because another worker's buffer was starting.

Worker A's buffer reserves its range on the head and takes the thread's buffer lease. Worker B
claims the next turn's item while A is between its look and its lease: B must not complete its
item having done nothing (A's buffer covers only what A read). It waits for A's lease, like any
item that finds the lease held, and runs when A wakes it; every message ends up buffered.

The interleaving is forced with events in the store (no timing): A stops at its first
``acquire_lease`` until B reaches its own, and B's acquire waits until A's has landed, so A
always wins the lease and B always asks while A has not taken it yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.storage import Lease, MemoryStore, SQLiteStore, Store
from obsmem.storage.contract import ObservationRecord, WriteResult
from obsmem.worker import WORK_OBSERVE, Worker

from ..postgres.worker_config import config
from .test_lease_wake import GatedObserver, seed

pytestmark = pytest.mark.anyio


class Interleaved:
    """Mixed into a store: A's first lease acquisition waits until B is at its own, and B's
    waits until A's has landed."""

    owner_a = ""
    owner_b = ""

    def setup_gate(self) -> None:
        self.a_waiting = asyncio.Event()
        self.b_waiting = asyncio.Event()
        self.a_acquired = asyncio.Event()
        self.gated = False
        self.acquired: list[tuple[str, str, bool]] = []

    async def acquire_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        if self.gated and owner == self.owner_a and not self.a_acquired.is_set():
            self.a_waiting.set()
            await self.b_waiting.wait()
        if self.gated and owner == self.owner_b and not self.b_waiting.is_set():
            self.b_waiting.set()
            await self.a_acquired.wait()
        lease: Lease | None = await super().acquire_lease(key, owner, ttl_s=ttl_s, now=now)  # type: ignore[misc]
        self.acquired.append((owner, key, lease is not None))
        if owner == self.owner_a:
            self.a_acquired.set()
        return lease


class GatedMemoryStore(Interleaved, MemoryStore):
    pass


class GatedSQLiteStore(Interleaved, SQLiteStore):
    pass


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    gated: GatedMemoryStore | GatedSQLiteStore
    gated = GatedMemoryStore() if request.param == "memory" else GatedSQLiteStore(tmp_path / "gap.db")
    gated.setup_gate()
    async with gated:
        yield gated


async def test_an_item_asked_while_another_buffer_starts_waits_for_it(store: Store) -> None:
    assert isinstance(store, Interleaved)
    clock = FakeClock()
    await seed(store, 0, 8)
    await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
    a = Worker(store, config=config(), clock=clock, owner="worker-a", kinds=[WORK_OBSERVE])
    b = Worker(store, config=config(), clock=clock, owner="worker-b", kinds=[WORK_OBSERVE])
    assert a.engine_owner is not None and b.engine_owner is not None
    store.owner_a, store.owner_b, store.gated = a.engine_owner, b.engine_owner, True

    running = asyncio.create_task(a.run_once())
    await store.a_waiting.wait()  # A is about to take the thread's buffer lease
    await seed(store, 8, 2)  # the next turn: B is asked about messages A may not have read
    await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
    assert await b.run_once() is True
    assert await running is True
    assert a.stats.completed == 1
    # B found A's buffer under way: it did not complete its item undone, it waited for A
    assert (b.stats.completed, b.stats.released) == (0, 1)
    [waiting] = await store.list_work()
    assert waiting.attempts == 0 and waiting.claimed_by is None
    assert waiting.available_at <= clock.now()  # A released its lease and woke it
    assert a.stats.woken == 1

    assert await b.run_once() is True
    assert b.stats.completed == 1
    assert await store.list_work() == [] and await store.list_dead_work() == []
    assert await store.list_leases("buffer-") == []
    head = await store.get_head("thread:t1")
    assert head is not None
    assert {m for chunk in head.buffered_chunks for m in chunk.message_ids} == {f"t1-m{i}" for i in range(10)}
    assert await a.drained() and await b.drained()


async def test_a_woken_item_with_nothing_left_completes(store: Store) -> None:
    """No re-enqueue loop: B's item, woken after A's buffer covered everything, completes."""
    assert isinstance(store, Interleaved)
    clock = FakeClock()
    await seed(store, 0, 10)
    await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
    a = Worker(store, config=config(), clock=clock, owner="worker-a", kinds=[WORK_OBSERVE])
    b = Worker(store, config=config(), clock=clock, owner="worker-b", kinds=[WORK_OBSERVE])
    assert a.engine_owner is not None and b.engine_owner is not None
    store.owner_a, store.owner_b, store.gated = a.engine_owner, b.engine_owner, True

    running = asyncio.create_task(a.run_once())
    await store.a_waiting.wait()
    await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())  # no new messages
    assert await b.run_once() is True
    assert await running is True
    assert await b.run_once() is True  # woken: finds everything buffered, completes
    assert await b.run_once() is False
    assert (b.stats.completed, b.stats.released, a.stats.completed) == (1, 1, 1)
    assert await store.list_work() == []
    head = await store.get_head("thread:t1")
    assert head is not None
    assert {m for chunk in head.buffered_chunks for m in chunk.message_ids} == {f"t1-m{i}" for i in range(10)}


async def test_two_loops_of_one_worker_on_one_thread(store: Store) -> None:
    """Two claim loops share one engine (one lease owner): the second loop's item, claimed while
    the first's buffer is in its model call, waits for it instead of completing undone."""
    clock = FakeClock()
    await seed(store, 0, 8)
    await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
    gate = GatedObserver()
    worker = Worker(store, config=config(), observer=gate, clock=clock, owner="worker-a", kinds=[WORK_OBSERVE])
    running = asyncio.create_task(worker.run_once())
    await gate.started.wait()  # the first loop's buffer holds the lease, inside its model call
    await seed(store, 8, 2)
    await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
    assert await worker.run_once() is True  # the second loop
    assert (worker.stats.completed, worker.stats.released) == (0, 1)
    gate.go.set()
    assert await running is True
    assert worker.stats.woken == 1
    assert await worker.run_once() is True  # woken: buffers the next turn's messages
    assert await worker.run_once() is False
    assert (worker.stats.completed, worker.stats.released) == (2, 1)
    assert await store.list_work() == [] and await store.list_dead_work() == []
    head = await store.get_head("thread:t1")
    assert head is not None
    assert {m for chunk in head.buffered_chunks for m in chunk.message_ids} == {f"t1-m{i}" for i in range(10)}


class HeadWrittenMeanwhile(MemoryStore):
    """Another engine (an application's step) writes the head between the worker's read of it
    and its reservation, once: the reservation loses its compare-and-set."""

    def __init__(self) -> None:
        super().__init__()
        self.interfere = False
        self.conflicts = 0

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        if self.interfere:
            self.interfere = False
            head = await self.get_head("thread:t1")
            assert head is not None
            metadata = {**head.metadata, "last_model": "openai/gpt-4o"}
            bumped = await super().update_record(head.model_copy(update={"metadata": metadata}),
                                                 expected_version=head.version)
            assert bumped.applied
        written = await super().update_record(record, expected_version=expected_version)
        self.conflicts += written.status == "stale"
        return written


async def test_a_reservation_lost_to_another_write_is_retried() -> None:
    """The worker holds the lease, so the write it lost to is no buffer of the thread: it reads
    the head again and buffers, rather than completing with the messages unbuffered."""
    clock = FakeClock()
    async with HeadWrittenMeanwhile() as store:
        await seed(store, 0, 8)
        await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
        worker = Worker(store, config=config(), clock=clock, owner="worker-a", kinds=[WORK_OBSERVE])
        store.interfere = True
        assert await worker.run_once() is True
        assert store.conflicts >= 1 and worker.stats.completed == 1
        assert await store.list_work() == []
        head = await store.get_head("thread:t1")
        assert head is not None
        assert {m for chunk in head.buffered_chunks for m in chunk.message_ids} == {f"t1-m{i}" for i in range(8)}
