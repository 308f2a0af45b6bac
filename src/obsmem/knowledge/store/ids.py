"""ULIDs: 26-character, time-ordered ids that sort as strings in creation order.

Knowledge records and activity events are paged by id ("newest first", "after this id"), so
ids must sort in the order they were made, even for two ids made in the same millisecond or
after the wall clock stepped backwards. A ULID is 48 bits of milliseconds and 80 random bits in
Crockford base32; this generator keeps the last one it issued and, whenever the clock does not
move forward, issues that id plus one instead of fresh randomness, which keeps the sequence
strictly increasing.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from obsmem.clock import Clock, SystemClock

__all__ = ["ULID_ALPHABET", "UlidGenerator", "decode_ulid_time", "encode_ulid", "is_ulid"]

ULID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RANDOM_BITS = 80
_MAX_VALUE = (1 << 128) - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def encode_ulid(value: int) -> str:
    """128-bit integer → 26 Crockford base32 characters (the first holds only 3 bits)."""
    chars = []
    for _ in range(26):
        chars.append(ULID_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


_ULID_CHARS = frozenset(ULID_ALPHABET)


def is_ulid(value: object) -> bool:
    """Whether ``value`` is a ULID as :class:`UlidGenerator` writes it (26 characters of the
    alphabet, upper case, the first at most '7'): the ids the knowledge listings page by."""
    return isinstance(value, str) and len(value) == 26 and value[0] <= "7" and set(value) <= _ULID_CHARS


def decode_ulid_time(ulid: str) -> datetime:
    """The millisecond timestamp a ULID carries (for humans and tests)."""
    value = 0
    for char in ulid:
        value = value * 32 + ULID_ALPHABET.index(char)
    return datetime.fromtimestamp((value >> _RANDOM_BITS) / 1000, tz=UTC)


class UlidGenerator:
    """Monotonic ULIDs from an injectable clock and random source (thread-safe)."""

    def __init__(self, clock: Clock | None = None, random_bits: Callable[[int], int] | None = None) -> None:
        self._clock = clock or SystemClock()
        self._random_bits = random_bits or secrets.randbits
        self._last = 0
        self._lock = threading.Lock()

    def new(self) -> str:
        millis = (self._clock.now() - _EPOCH) // _MILLISECOND
        with self._lock:
            candidate = (millis << _RANDOM_BITS) | self._random_bits(_RANDOM_BITS)
            if millis <= self._last >> _RANDOM_BITS:
                # Same millisecond, or the clock went back: stay strictly after the last id.
                candidate = self._last + 1
            if candidate > _MAX_VALUE:
                raise OverflowError("ULID space exhausted for this millisecond")
            self._last = candidate
            return encode_ulid(candidate)
