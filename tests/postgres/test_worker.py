"""Workers: queued buffering and reflection run by other processes, and a killed worker's work
is taken over once its claim and its lease expire, with nothing lost."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

import pytest

from obsmem import Memory
from obsmem.clock import SystemClock
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import Message, TextPart, Thread
from obsmem.worker import WORK_OBSERVE, Worker, enqueue_thread_work

from ..lifecycle.invariants import check_thread
from ..postgres_fixtures import postgres_server, postgres_url  # noqa: F401
from .worker_config import CLAIM_TTL_S, config

pytestmark = pytest.mark.anyio

WORKER_PROC = Path(__file__).with_name("worker_proc.py")
SENTENCES = [
    "I live in Munich with my partner Alex and we are planning a trip to Lisbon.",
    "Sure, the fastest route is the morning train and it takes about four hours.",
    "My daughter Mia is seven years old and she cannot eat gluten.",
    "I have booked a table for three people at Nopa at 7 pm on Friday.",
]


class OffsetClock(SystemClock):
    """Wall-clock time shifted forward: how a worker sees the world ``offset_s`` seconds later."""

    def __init__(self, offset_s: float) -> None:
        self.offset = timedelta(seconds=offset_s)

    def now(self) -> datetime:
        return super().now() + self.offset


async def seed_thread(store: Store, thread_id: str, count: int = 8) -> list[str]:
    await store.create_thread(Thread(id=thread_id, resource_id="u1"))
    messages = [
        Message(id=f"{thread_id}-m{i}", role="user" if i % 2 == 0 else "assistant",
                parts=(TextPart(text=f"{SENTENCES[i % len(SENTENCES)]} (turn {i})"),))
        for i in range(count)
    ]
    stored = await store.save_messages(thread_id, messages)
    return [m.id for m in stored]


async def covered_ids(store: Store, thread_id: str) -> set[str]:
    head = await store.get_head(f"thread:{thread_id}")
    assert head is not None
    return {message_id for chunk in head.buffered_chunks for message_id in chunk.message_ids}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "worker.db")
    return PostgresStore(request.getfixturevalue("postgres_url"))


async def test_two_workers_drain_the_queue_for_every_thread(any_store: Store) -> None:
    async with any_store as store:
        threads = {f"t{n}": await seed_thread(store, f"t{n}") for n in range(4)}
        now = SystemClock().now()
        for thread_id in threads:
            await enqueue_thread_work(store, thread_id, now=now)
            await enqueue_thread_work(store, thread_id, now=now)  # coalesces: still one item per kind
        assert len(await store.list_work()) == 8

        workers = [Worker(store, config=config(), poll_interval_s=0.05, owner=f"w{i}") for i in range(2)]
        stats = await asyncio.gather(*(w.run(exit_when_idle=True) for w in workers))

        assert await store.list_work() == []
        assert sum(s.completed for s in stats) == 8 and sum(s.lost_claims for s in stats) == 0
        for thread_id, ids in threads.items():
            assert await covered_ids(store, thread_id) == set(ids), thread_id  # buffered, none twice
            await check_thread(store, thread_id, "u1", expected_ids=ids)


def _said_blocked(stdout: IO[str]) -> bool:
    """Whether the worker said "blocked" before its stdout ended."""
    return "blocked\n" in iter(stdout.readline, "")


async def test_a_worker_killed_mid_buffer_is_taken_over(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    store = PostgresStore(postgres_url)
    try:
        ids = await seed_thread(store, "t1")
        (item,) = await enqueue_thread_work(store, "t1", now=SystemClock().now(), kinds=(WORK_OBSERVE,))

        # Worker A claims the item, takes the buffer lease and blocks inside the observer.
        signals = tmp_path / "signals"
        signals.mkdir()
        proc = subprocess.Popen([sys.executable, str(WORKER_PROC), postgres_url, str(signals)],  # noqa: ASYNC220
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            # Worker A says "blocked" from inside the observer (its stdout ends if it exits first).
            if not await asyncio.to_thread(_said_blocked, proc.stdout):
                raise AssertionError(f"worker A exited early: {proc.communicate()[1][-3000:]}")
            owner_a = (signals / "owner").read_text()
            (claimed,) = await store.list_work()
            assert claimed.id == item.id and claimed.claimed_by == "worker-A" and claimed.attempts == 1
            lease = await store.get_lease("buffer-observation:thread:t1")
            assert lease is not None and lease.owner == owner_a
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        head = await store.get_head("thread:t1")
        assert head is not None and head.buffered_chunks == ()  # A died before committing anything

        # In real time A's claim expires within CLAIM_TTL_S (nobody renews it), but its buffer
        # lease (model timeout + 60 s) has not: worker B takes the item and gives it back to
        # wait for the lease instead of completing it having done nothing.
        await asyncio.sleep(CLAIM_TTL_S)
        early = Worker(store, config=config(), claim_ttl_s=CLAIM_TTL_S, owner="worker-B1")
        assert await early.run_once() is True
        assert (early.stats.claimed, early.stats.completed, early.stats.released) == (1, 0, 1)
        (waiting,) = await store.list_work()
        # A's claim counted (A died on it); B's hand-back did not (issue 22: waiting is not failing),
        # and the item waits for the lease's expiry.
        assert waiting.claimed_by is None and waiting.attempts == 1
        final = await store.get_lease("buffer-observation:thread:t1")  # A's last renewal
        assert final is not None and abs((waiting.available_at - final.expires_at).total_seconds()) < 0.001

        # A worker whose clock reads 15 minutes later sees A's lease expired, as it will be
        # then: it takes the lease over, buffers every message and completes the item.
        later = Worker(store, config=config(), clock=OffsetClock(15 * 60), claim_ttl_s=CLAIM_TTL_S, owner="worker-B2")
        stats = await later.run(exit_when_idle=True)
        assert (stats.claimed, stats.completed, stats.lost_claims) == (1, 1, 0)
        assert await store.list_work() == []
        assert await store.get_lease("buffer-observation:thread:t1") is None  # released by B
        assert await covered_ids(store, "t1") == set(ids)

        memory = Memory(store, config=config())
        context = await memory.get_context("t1")
        await check_thread(store, "t1", "u1", context=context, expected_ids=ids)
        stored = await store.list_messages("t1")
        assert [m.id for m in stored] == ids  # nothing lost, nothing twice
        await memory.aclose()
    finally:
        await store.close()


async def test_work_waiting_for_a_workers_lease_runs_when_it_is_released(postgres_url: str) -> None:  # noqa: F811
    """Two workers with a pool each (as two processes): B's item waits for A's buffer lease and
    is due at once when A releases it (tests/worker/test_lease_wake.py has the scenario)."""
    from ..worker.test_lease_wake import two_workers_on_one_thread

    async with PostgresStore(postgres_url) as store_a, PostgresStore(postgres_url) as store_b:
        await two_workers_on_one_thread(store_a, store_b)


async def test_work_that_keeps_killing_its_workers_is_dropped() -> None:
    from obsmem.clock import FakeClock

    clock = FakeClock()
    async with MemoryStore() as store:
        await seed_thread(store, "t1")
        await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
        for _ in range(3):  # three workers claimed it and died
            assert len(await store.claim_work("dead", ttl_s=1, now=clock.now())) == 1
            clock.advance(1)
        worker = Worker(store, config=config(), clock=clock, max_attempts=3, owner="survivor")
        assert await worker.run_once() is True  # the fourth claim is over the limit
        assert (worker.stats.abandoned, worker.stats.completed) == (1, 0)
        assert await store.list_work() == []
        [dead] = await store.list_dead_work()  # kept, with why, never silently deleted
        assert dead.target == "t1" and dead.attempts == 4
        head = await store.get_head("thread:t1")
        assert head is None or head.buffered_chunks == ()  # dropped, not run


async def test_unknown_work_kinds_are_refused() -> None:
    from obsmem.errors import InvalidInputError

    async with MemoryStore() as store:
        with pytest.raises(InvalidInputError, match="Unknown work kinds"):
            await enqueue_thread_work(store, "t1", now=SystemClock().now(), kinds=("curate",))
