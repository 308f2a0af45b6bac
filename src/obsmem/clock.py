"""Time as an injected dependency: wall clock, monotonic clock and sleeping, behind one protocol.

This module is public API: ``from obsmem.clock import FakeClock``.

obsmem waits (retry backoff), stamps (markers, observation dates) and measures (activation
TTLs, idle gaps). If each of those called ``datetime.now`` or ``asyncio.sleep`` directly,
a test of "eight retries over four minutes" would take four minutes and a test of a date
header would depend on the day it ran. So every component that needs time takes a
:class:`Clock`: production passes :class:`SystemClock`, tests pass :class:`FakeClock`, whose
``sleep`` returns at once and whose time moves only when the test (or a sleep) moves it.

Replaying a recorded conversation on its own time (so "tomorrow" in March 2025 means March,
and "3 weeks ago" is counted from the conversation's day, not today)::

    from obsmem import Memory
    from obsmem.clock import FakeClock

    clock = FakeClock(start=messages[0].created_at)
    memory = Memory("sqlite:///replay.db", clock=clock)
    async with memory:
        for message in messages:
            clock.advance_to(message.created_at)   # time follows the recording
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[message])
            await turn.end()

Foundation layer: standard library and :mod:`obsmem.errors` only. A bad argument raises
:class:`~obsmem.errors.InvalidInputError` (a ``ValueError``).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from obsmem.errors import InvalidInputError

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """The three things obsmem asks of time.

    ``now`` is for timestamps people read (always timezone-aware UTC); ``monotonic`` is for
    measuring durations, because the wall clock can jump; ``sleep`` is for waiting, and must
    be cancellable like :func:`asyncio.sleep`.
    """

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: :func:`datetime.now` in UTC, :func:`time.monotonic`, :func:`asyncio.sleep`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A virtual clock for tests: time stands still until a sleep or :meth:`advance` moves it.

    ``sleep(s)`` records ``s`` in :attr:`sleeps`, moves both clocks forward by ``s`` and
    returns after a single pass of the event loop. That one pass matters: code that races a
    sleep against an abort event, or a test that cancels a task mid-backoff, still gets a
    point where other tasks run, so those interleavings stay testable without real waiting.

    ``start`` defaults to a fixed instant (2025-06-15T12:00:00Z) so that anything formatted
    from ``now()`` is the same on every run; it must be timezone-aware and is converted to UTC.
    ``monotonic()`` starts at 0.0.
    """

    DEFAULT_START = datetime(2025, 6, 15, 12, 0, 0, tzinfo=UTC)

    def __init__(self, start: datetime | None = None) -> None:
        if start is None:
            start = self.DEFAULT_START
        elif start.tzinfo is None or start.utcoffset() is None:
            raise InvalidInputError(
                "FakeClock start must be timezone-aware (e.g. datetime(..., tzinfo=UTC))", argument="start"
            )
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        """Record the sleep, jump forward by it, and yield to the event loop once.

        A negative duration sleeps for zero, as :func:`asyncio.sleep` does, and is recorded
        as 0.0 so that ``sum(clock.sleeps)`` always equals the virtual time slept.
        """
        seconds = max(0.0, float(seconds))
        self.sleeps.append(seconds)
        self._elapsed += seconds
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        """Move time forward without sleeping (e.g. "an hour passes between two turns").

        NaN, infinity and a jump past year 9999 are refused here: taken, they broke every later
        ``now()`` (a ``ValueError`` or ``OverflowError`` far from the call that caused it)."""
        if seconds < 0:
            raise InvalidInputError(f"FakeClock cannot go backwards (advance({seconds}))", argument="seconds")
        try:
            self._start + timedelta(seconds=self._elapsed + seconds)
        except (ValueError, OverflowError):
            raise InvalidInputError(
                f"FakeClock cannot advance({seconds}): not a finite time within datetime's range",
                argument="seconds",
            ) from None
        self._elapsed += seconds

    def advance_to(self, moment: datetime) -> None:
        """Move time forward to ``moment`` (timezone-aware), as a replay does before each
        recorded message. A moment at or before now leaves the clock where it is: time never
        goes backwards, and two messages stamped out of order do not stop a replay."""
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise InvalidInputError("FakeClock.advance_to needs a timezone-aware datetime", argument="moment")
        ahead = (moment - self.now()).total_seconds()
        if ahead > 0:
            self._elapsed += ahead
