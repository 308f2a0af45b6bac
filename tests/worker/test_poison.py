"""Issue 22 §1: waiting work is not poison; poison work is kept, listed and retried.

A claim handed back only because another owner's live buffer lease covers the thread does not
count toward ``max_attempts`` and waits for the lease's expiry; an item that really fails
``max_attempts`` times goes to the dead-letter table with its last error (never deleted), and
``obsmem queue`` lists it and ``obsmem queue retry ID`` queues it again.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.types import Message, TextPart, Thread
from obsmem.worker import WORK_KNOWLEDGE, WORK_OBSERVE, Worker

pytestmark = pytest.mark.anyio
LEASE = "buffer-observation:thread:t1"


def config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=2000, buffer_tokens=0.2),
        reflection=ReflectionConfig(observation_tokens=4000),
    )


async def seed(store: Store, thread_id: str = "t1") -> None:
    await store.create_thread(Thread(id=thread_id, resource_id="u1"))
    await store.save_messages(thread_id, [
        Message(id=f"{thread_id}-m{i}", role="user", parts=(TextPart(text=f"The Kestrel budget is {i} euros."),))
        for i in range(6)
    ])  # fmt: skip


async def test_a_live_lease_hand_back_is_not_an_attempt_and_waits_for_the_lease() -> None:
    clock = FakeClock()
    async with MemoryStore() as store:
        await seed(store)
        await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
        worker = Worker(store, config=config(), clock=clock, max_attempts=3, poll_interval_s=0.5, owner="w")
        lease = await store.acquire_lease(LEASE, "another-process", ttl_s=60, now=clock.now())
        assert lease is not None
        for _ in range(10):  # the holder is alive: it keeps renewing, and the item keeps waiting
            assert await worker.run_once() is True
            [waiting] = await store.list_work()
            assert waiting.attempts == 0 and waiting.claimed_by is None
            assert waiting.available_at == lease.expires_at  # rescheduled for the lease's expiry
            clock.advance((waiting.available_at - clock.now()).total_seconds() - 1)
            lease = await store.renew_lease(LEASE, "another-process", ttl_s=60, now=clock.now())
            assert lease is not None
            clock.advance(1)
        assert (worker.stats.abandoned, worker.stats.completed, worker.stats.released) == (0, 0, 10)
        assert await store.list_dead_work() == []

        clock.advance(61)  # the holder died: its lease expires, and the work runs
        assert await worker.run_once() is True
        assert worker.stats.completed == 1 and await store.list_work() == []


async def test_real_failures_go_to_the_dead_letter_table_with_their_error(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    async with MemoryStore() as store:
        await seed(store)
        await store.enqueue_work(WORK_KNOWLEDGE, "t1", now=clock.now())
        # A worker without a knowledge store fails 'knowledge' work: a real failure every time.
        worker = Worker(store, config=config(), clock=clock, max_attempts=3, kinds=(WORK_KNOWLEDGE,), owner="w")
        with caplog.at_level(logging.DEBUG, logger="obsmem"):
            for _ in range(3):
                clock.advance(120)  # past the retry delay
                assert await worker.run_once() is True
        assert await store.list_work() == []
        [dead] = await store.list_dead_work()
        assert (dead.kind, dead.target, dead.attempts) == (WORK_KNOWLEDGE, "t1", 3)
        assert dead.last_error is not None and "ConfigError" in dead.last_error
        assert worker.stats.abandoned == 1
        # one DEBUG line per job, with its duration and outcome
        jobs = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "job " in r.getMessage()]
        assert len(jobs) == 3 and all(" s " in line or "s)" in line for line in jobs)
        assert [line.split(" outcome=")[1].split()[0] for line in jobs] == ["failed", "failed", "dead-lettered"]

        again = await store.retry_dead_work(dead.id, now=clock.now())
        assert again is not None and again.attempts == 0 and await store.list_dead_work() == []


async def test_work_whose_workers_keep_dying_is_kept_as_dead_work() -> None:
    clock = FakeClock()
    async with MemoryStore() as store:
        await seed(store)
        await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
        for _ in range(3):  # three workers claimed it and died
            assert len(await store.claim_work("dead", ttl_s=1, now=clock.now())) == 1
            clock.advance(1)
        worker = Worker(store, config=config(), clock=clock, max_attempts=3, owner="survivor")
        assert await worker.run_once() is True
        assert await store.list_work() == []
        [dead] = await store.list_dead_work()
        assert dead.attempts == 4 and dead.last_error is not None and "3" in dead.last_error


def test_queue_command_lists_and_retries_dead_work(tmp_path: Path) -> None:
    db = tmp_path / "q.db"

    async def setup() -> int:
        clock = FakeClock()
        async with SQLiteStore(db) as store:
            await seed(store)
            await store.enqueue_work(WORK_OBSERVE, "t1", now=clock.now())
            await store.enqueue_work(WORK_KNOWLEDGE, "t1", now=clock.now())
            [claimed] = await store.claim_work("w", ttl_s=30, now=clock.now(), kinds=(WORK_KNOWLEDGE,))
            assert await store.bury_work(claimed, now=clock.now(), error="ConfigError: no knowledge store")
            return claimed.id

    dead_id = asyncio.run(setup())
    runner = CliRunner()
    shown = runner.invoke(app, ["queue", "--store", f"sqlite:///{db}"])
    assert shown.exit_code == 0, shown.output
    assert "observe" in shown.stdout and "dead-letter: 1" in shown.stdout
    assert f"{dead_id}" in shown.stdout and "ConfigError: no knowledge store" in shown.stdout

    retried = runner.invoke(app, ["queue", "retry", str(dead_id), "--store", f"sqlite:///{db}"])
    assert retried.exit_code == 0, retried.output
    missing = runner.invoke(app, ["queue", "retry", str(dead_id), "--store", f"sqlite:///{db}"])
    assert missing.exit_code == 1 and "no dead-lettered item" in missing.output

    async def after() -> tuple[int, int]:
        async with SQLiteStore(db) as store:
            return len(await store.list_work(WORK_KNOWLEDGE)), len(await store.list_dead_work())

    assert asyncio.run(after()) == (1, 0)
