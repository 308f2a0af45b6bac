"""``FakeClock.advance`` took NaN, infinity and jumps past year 9999 without a word, and every later
``now()`` raised (``ValueError: cannot convert float NaN to integer``, ``OverflowError``), far
from the call that caused it: a replay whose gap was computed from a missing timestamp failed at
the next turn's date header. It refuses them now, as it refuses going backwards, and the clock
stays where it was."""

from __future__ import annotations

import math

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import InvalidInputError


@pytest.mark.parametrize("seconds", [math.nan, math.inf, 1e300, 3e11])
def test_a_jump_the_clock_cannot_show_is_refused(seconds: float) -> None:
    clock = FakeClock()
    clock.advance(60)
    with pytest.raises(InvalidInputError):
        clock.advance(seconds)
    assert clock.now() == FakeClock.DEFAULT_START.replace(minute=1)
    assert clock.monotonic() == 60
    clock.advance(1e9)  # about 31 years: fine
    assert clock.now().year == 2057
