"""ULIDs: 26 Crockford characters, strictly increasing even within one millisecond."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from obsmem.clock import FakeClock
from obsmem.knowledge.store.ids import ULID_ALPHABET, UlidGenerator, decode_ulid_time


class BackwardsClock(FakeClock):
    def __init__(self) -> None:
        super().__init__()
        self.offset = 0.0

    def now(self) -> datetime:
        return super().now() + timedelta(seconds=self.offset)


def test_ids_are_monotonic_within_one_millisecond() -> None:
    clock = FakeClock()
    ids = UlidGenerator(clock, random_bits=lambda bits: (1 << bits) - 5)  # near the top of the range
    made = [ids.new() for _ in range(1000)]  # time stands still: all in one millisecond
    assert made == sorted(made)
    assert len(set(made)) == 1000
    assert all(len(u) == 26 and set(u) <= set(ULID_ALPHABET) for u in made)


def test_ids_stay_monotonic_when_the_clock_goes_back() -> None:
    clock = BackwardsClock()
    ids = UlidGenerator(clock)
    first = ids.new()
    clock.offset = -3600.0
    second = ids.new()
    assert second > first


def test_a_later_millisecond_starts_with_a_later_time_prefix() -> None:
    clock = FakeClock(datetime(2026, 7, 1, tzinfo=UTC))
    ids = UlidGenerator(clock, random_bits=lambda bits: (1 << bits) - 1)
    first = ids.new()
    clock.advance(0.002)
    second = ids.new()
    assert second > first
    assert decode_ulid_time(first) == datetime(2026, 7, 1, tzinfo=UTC)
    assert decode_ulid_time(second).microsecond == 2000
