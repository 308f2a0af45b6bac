"""Clock: the real one tells real UTC time; the fake one moves only when told, without waiting."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest

from obsmem.clock import Clock, FakeClock, SystemClock


def test_system_clock_is_timezone_aware_utc_and_monotonic() -> None:
    clock: Clock = SystemClock()
    before = datetime.now(UTC)
    now = clock.now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert before <= now <= datetime.now(UTC)
    first = clock.monotonic()
    assert clock.monotonic() >= first


@pytest.mark.anyio
async def test_system_clock_sleep_zero_returns() -> None:
    await SystemClock().sleep(0)


def test_fake_clock_starts_at_a_fixed_utc_instant() -> None:
    clock: Clock = FakeClock()
    assert clock.now() == datetime(2025, 6, 15, 12, 0, tzinfo=UTC)
    assert clock.monotonic() == 0.0
    assert FakeClock().now() == clock.now()  # the same on every run


def test_fake_clock_converts_an_aware_start_to_utc() -> None:
    start = datetime(2025, 1, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))
    now = FakeClock(start).now()
    assert now == start
    assert now.utcoffset() == timedelta(0)
    assert now.hour == 7


def test_fake_clock_refuses_a_naive_start() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        FakeClock(datetime(2025, 1, 1))


@pytest.mark.anyio
async def test_fake_sleep_records_and_advances_both_clocks_instantly() -> None:
    clock = FakeClock()
    start = clock.now()
    await clock.sleep(1.5)
    await clock.sleep(120)
    assert clock.sleeps == [1.5, 120.0]
    assert clock.monotonic() == 121.5
    assert clock.now() == start + timedelta(seconds=121.5)


@pytest.mark.anyio
async def test_fake_sleep_negative_is_zero_like_asyncio() -> None:
    clock = FakeClock()
    await clock.sleep(-3)
    assert clock.sleeps == [0.0]
    assert clock.monotonic() == 0.0


def test_advance_moves_time_without_recording_a_sleep() -> None:
    clock = FakeClock()
    clock.advance(3600)
    assert clock.now() == FakeClock.DEFAULT_START + timedelta(hours=1)
    assert clock.monotonic() == 3600
    assert clock.sleeps == []


def test_advance_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        FakeClock().advance(-1)


@pytest.mark.anyio
async def test_fake_sleep_yields_to_the_event_loop() -> None:
    clock = FakeClock()
    order: list[str] = []

    async def worker(name: str) -> None:
        for _ in range(3):
            order.append(name)
            await clock.sleep(1)

    await asyncio.gather(worker("a"), worker("b"))
    assert order == ["a", "b", "a", "b", "a", "b"]
    assert len(clock.sleeps) == 6


@pytest.mark.anyio
async def test_fake_sleep_can_be_cancelled() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(10))
    await asyncio.sleep(0)  # the task starts and is now parked inside sleep
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
