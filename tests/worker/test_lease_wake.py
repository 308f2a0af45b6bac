"""Work waiting for another worker's buffer lease runs as soon as that lease is released.

Two workers on one thread: worker A holds the thread's buffer lease (blocked in its observer)
when worker B claims the thread's next item, so B hands it back to wait for the lease's expiry
(not an attempt). When A's buffer lands and A releases the lease, A wakes that item: it is due
at once and B takes it, long before the lease would have expired (the clock is a FakeClock that
only moves when a test moves it). A release that happens between B's look at the lease and B's
hand-back is not missed either: B wakes its own item. Everything is asserted on the queue's
state and the order of events, never on elapsed time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import StorageError
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage import MemoryStore, SQLiteStore, Store, WorkItem
from obsmem.tokens import TokenCounter
from obsmem.types import Message, TextPart, Thread
from obsmem.worker import WORK_OBSERVE, Worker

from ..postgres.worker_config import config

pytestmark = pytest.mark.anyio
LEASE = "buffer-observation:thread:t1"
SENTENCES = [
    "Meeting with the Kestrel team moved to Thursday at 10am in room 4B.",
    "The Kestrel budget for the second quarter is 48,000 euros, approved by Dana.",
    "Jonas prefers summaries as bullet points and wants the risks listed first.",
    "The vendor contract for the data warehouse renews on the 1st of September.",
]


class GatedObserver:
    """The offline observer, once ``go`` is set; ``started`` says a call is in progress."""

    name = "gated"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go = asyncio.Event()
        self.inner = OfflineObserver(count_tokens=TokenCounter().count_text)

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.started.set()
        await self.go.wait()
        return await self.inner.observe(request)


async def seed(store: Store, first: int, count: int) -> None:
    if await store.get_thread("t1") is None:
        await store.create_thread(Thread(id="t1", resource_id="u1"))
    await store.save_messages("t1", [
        Message(id=f"t1-m{i}", role="user" if i % 2 == 0 else "assistant",
                parts=(TextPart(text=f"{SENTENCES[i % len(SENTENCES)]} (turn {i})"),))
        for i in range(first, first + count)
    ])  # fmt: skip


@pytest.fixture(params=["memory", "sqlite"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Store, Store]]:
    """Worker A's store and worker B's: for SQLite two connections to one file, as two processes."""
    if request.param == "memory":
        async with MemoryStore() as shared:
            yield shared, shared
        return
    async with SQLiteStore(tmp_path / "wake.db") as first, SQLiteStore(tmp_path / "wake.db") as second:
        yield first, second


async def test_an_item_waiting_for_a_workers_lease_runs_when_that_worker_releases_it(
    stores: tuple[Store, Store],
) -> None:
    await two_workers_on_one_thread(*stores)


async def two_workers_on_one_thread(store: Store, store_b: Store) -> None:
    """The scenario, for any adapter (tests/postgres runs it on PostgreSQL): A on ``store``, B on
    ``store_b`` (the same database; another connection or pool)."""
    clock = FakeClock()
    await seed(store, 0, 8)
    await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
    gate = GatedObserver()
    a = Worker(store, config=config(), observer=gate, clock=clock, owner="worker-a")
    b = Worker(store_b, config=config(), clock=clock, owner="worker-b")

    running = asyncio.create_task(a.run_once())
    await gate.started.wait()  # A holds the thread's buffer lease, inside its model call
    lease = await store.get_lease(LEASE)
    assert lease is not None and lease.owner == a.engine_owner

    await seed(store, 8, 2)  # the next turn: its work waits for A's buffer
    await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
    assert await b.run_once() is True
    [waiting] = [w for w in await store.list_work() if w.claimed_by is None]
    assert waiting.available_at == lease.expires_at > clock.now()  # handed back until the lease's expiry
    assert waiting.attempts == 0 and b.stats.released == 1  # waiting is not an attempt
    assert await b.run_once() is False  # nothing is due while A works

    gate.go.set()
    await running  # A's buffer lands, A releases the lease and wakes the waiting item
    assert await store.get_lease(LEASE) is None
    [woken] = await store.list_work()
    assert woken.id == waiting.id and woken.claimed_by is None and woken.attempts == 0
    assert woken.available_at <= clock.now() < lease.expires_at  # due now, before the lease would expire
    assert (a.stats.completed, a.stats.woken) == (1, 1)

    assert await b.run_once() is True  # B takes it at once and completes it
    assert (b.stats.claimed, b.stats.completed, b.stats.released) == (2, 1, 1)
    assert await store.list_work() == [] and await store.list_dead_work() == []
    head = await store.get_head("thread:t1")
    assert head is not None
    assert {m for chunk in head.buffered_chunks for m in chunk.message_ids} == {f"t1-m{i}" for i in range(10)}


class ReleasedDuringHandBack(MemoryStore):
    """The lease's holder releases it (and finds nothing to wake: the item is still claimed)
    after the worker looked at the lease and before its hand-back lands."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    async def release_work(
        self, item: WorkItem, *, now: datetime, delay_s: float = 0.0, error: str | None = None,
        count_attempt: bool = True,
    ) -> bool:
        assert await self.release_lease(LEASE, "another-process") is True
        self.events.append("holder woke: " + str(await self.wake_work(item.kind, item.target, now=now)))
        released = await super().release_work(item, now=now, delay_s=delay_s, error=error,
                                              count_attempt=count_attempt)
        self.events.append("handed back")
        return released

    async def wake_work(self, kind: str, target: str, *, now: datetime) -> bool:
        woken = await super().wake_work(kind, target, now=now)
        self.events.append(f"wake -> {woken}")
        return woken


async def test_a_release_just_before_the_hand_back_is_not_missed() -> None:
    clock = FakeClock()
    async with ReleasedDuringHandBack() as store:
        await seed(store, 0, 8)
        await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
        lease = await store.acquire_lease(LEASE, "another-process", ttl_s=60, now=clock.now())
        assert lease is not None
        worker = Worker(store, config=config(), clock=clock, owner="worker-b")

        assert await worker.run_once() is True  # saw the lease, handed the item back to wait for it
        # the holder's wake found nothing (the item was claimed); the waiter's own look did
        assert store.events == ["wake -> False", "holder woke: False", "handed back", "wake -> True"]
        [woken] = await store.list_work()
        assert woken.attempts == 0 and woken.available_at <= clock.now() < lease.expires_at
        assert worker.stats.woken == 1

        assert await worker.run_once() is True  # due at once: the work runs now
        assert worker.stats.completed == 1 and await store.list_work() == []


class FailsWhileAnotherWaits(MemoryStore):
    """The worker's item fails (a store error reading its thread) after the next turn's item was
    handed back to wait for the lease the failing work held."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.fail = False

    async def get_thread(self, thread_id: str) -> Thread | None:
        if not self.fail:
            return await super().get_thread(thread_id)
        self.fail = False
        now = self.clock.now()
        await self.enqueue_work(WORK_OBSERVE, thread_id, now=now)
        [waiter] = await self.claim_work("worker-b", ttl_s=30, now=now)
        assert await self.release_work(waiter, now=now, delay_s=60, count_attempt=False)
        raise StorageError("the database hiccupped")


@pytest.mark.parametrize("max_attempts", [1, 5])
async def test_a_failed_item_wakes_the_waiter_only_when_it_is_buried(max_attempts: int) -> None:
    clock = FakeClock()
    async with FailsWhileAnotherWaits(clock) as store:
        await seed(store, 0, 8)
        await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
        store.fail = True
        worker = Worker(store, config=config(), clock=clock, owner="worker-a", max_attempts=max_attempts)
        assert await worker.run_once() is True
        [waiting] = await store.list_work()
        if max_attempts == 1:  # buried: the waiter (new work, never failed) is due at once
            assert len(await store.list_dead_work()) == 1 and worker.stats.woken == 1
            assert (waiting.available_at, waiting.attempts) == (clock.now(), 0)
        else:  # given back: it coalesces into the waiter, which keeps the failure's backoff
            assert await store.list_dead_work() == [] and worker.stats.woken == 0
            assert (waiting.available_at, waiting.attempts) == (clock.now() + timedelta(seconds=2), 1)
            assert waiting.last_error is not None and "hiccupped" in waiting.last_error
