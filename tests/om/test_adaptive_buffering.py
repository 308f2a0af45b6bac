"""Adaptive buffering, the pure parts: the window's growth rate, the observer's latency, and the
decisions (start a buffer at the last step that still lands before the threshold; start no
buffer a synchronous observation would overtake; at ``block_after``, reuse the buffer in flight
when it lands sooner than a new call)."""

from __future__ import annotations

import math

import pytest

from obsmem.om.activation import (
    OVERTAKE_MARGIN,
    LatencyEstimate,
    WindowGrowth,
    buffer_due,
    buffer_overtaken,
    reuse_in_flight,
)


def test_growth_rate_counts_only_growth_over_the_time_spanned() -> None:
    growth = WindowGrowth()
    assert growth.rate() is None
    growth.note(0.0, 100)
    assert growth.rate() is None  # one sample: no interval yet
    growth.note(1.0, 300)
    growth.note(2.0, 500)
    assert growth.rate() == pytest.approx(200.0)
    growth.note(3.0, 500)  # a step that added nothing still spans time
    assert growth.rate() == pytest.approx(400 / 3)
    # An observation shrank the window (and took 5 s): neither its time nor its removal counts.
    growth.note(8.0, 50)
    assert growth.rate() == pytest.approx(400 / 3)
    growth.note(8.0, 350)  # tokens added with no time passing add to the rate
    assert growth.rate() == pytest.approx(700 / 3)
    fast = WindowGrowth()
    fast.note(1.0, 0)
    fast.note(1.0, 250)
    assert fast.rate() == math.inf


def test_growth_keeps_only_the_last_samples() -> None:
    growth = WindowGrowth(size=4)
    for second in range(10):  # slow at first ...
        growth.note(float(second), 10 * second)
    for step in range(1, 5):  # ... then 1,000 tokens a second: only the last 4 intervals count
        growth.note(9.0 + step, 90 + 1000 * step)
    assert growth.rate() == pytest.approx(1000.0)
    assert len(growth.samples) == 4


def test_growth_without_additions_is_zero() -> None:
    growth = WindowGrowth()
    growth.note(0.0, 10)
    growth.note(0.0, 10)
    assert growth.rate() == 0.0


def test_latency_is_a_moving_average() -> None:
    latency = LatencyEstimate(weight=0.5)
    assert latency.value is None
    latency.note(1.0)
    assert latency.value == 1.0
    latency.note(3.0)
    assert latency.value == 2.0
    latency.note(-1.0)  # a clock that went backwards reads as 0
    assert latency.value == 1.0


@pytest.mark.parametrize(
    ("pending", "rate", "latency", "block_at", "overtaken", "why"),
    [
        (600, None, 1.0, 3600, False, "no rate measured yet: start as before"),
        (600, 200.0, None, 3600, False, "no observer call finished yet: start as before"),
        (600, 200.0, 0.0, 3600, False, "an instant observer is never overtaken"),
        (600, 0.0, 1.0, 3600, False, "a window that does not grow"),
        (600, 220.0, 1.0, 3600, False, "realistic: 1 s actor, ~220 tokens a turn"),
        (3000, 220.0, 1.0, 3600, False, "realistic, near the threshold"),
        (3400, 220.0, 1.0, 3600, True, "too close to block_after"),
        (600, 40_000.0, 1.0, 3600, True, "instant actor: the window passes block_after first"),
        (600, math.inf, 1.0, 3600, True, "tokens added with no time passing"),
        (600, 2400.0, 1.0, 3600, True, "600 + 2400 x 1.25 = 3600: reaches it"),
        (600, 2300.0, 1.0, 3600, False, "600 + 2300 x 1.25 < 3600"),
    ],
)
def test_buffer_overtaken_table(
    pending: int, rate: float | None, latency: float | None, block_at: int, overtaken: bool, why: str
) -> None:
    assert OVERTAKE_MARGIN == 1.25
    assert buffer_overtaken(pending, rate, latency, block_at) is overtaken, why


@pytest.mark.parametrize(
    ("pending", "threshold", "in_flight", "remaining", "latency", "reuse", "why"),
    [
        (3600, 3000, 800, 0.4, 1.0, True, "lands in 0.4 s, a new call takes 1 s, and its chunk suffices"),
        (3600, 3000, 600, 0.4, 1.0, False, "its chunk leaves the window at the threshold: a call follows anyway"),
        (3600, 3000, 800, 1.0, 1.0, False, "lands no sooner than a new call"),
        (3600, 3000, 800, 0.0, None, False, "no latency measured: observe, as before"),
        (3600, 3000, 800, 0.0, 0.0, False, "an instant observer: nothing to gain by waiting"),
        (5000, 3000, 800, 0.1, 1.0, False, "the window ran far past the buffer"),
    ],
)
def test_reuse_in_flight_table(
    pending: int, threshold: int, in_flight: int, remaining: float, latency: float | None, reuse: bool, why: str
) -> None:
    assert reuse_in_flight(pending, threshold, in_flight, remaining, latency) is reuse, why


@pytest.mark.parametrize(
    ("unbuffered", "rate", "latency", "step", "due", "why"),
    [
        (600, None, 1.0, 250, None, "no rate: the fixed buffer_tokens interval decides"),
        (600, 200.0, None, 250, None, "no latency: the fixed interval decides"),
        (600, 200.0, 0.0, 250, None, "an instant observer: the fixed interval decides"),
        (600, 220.0, 1.0, 250, False, "far from the threshold: a later step still lands in time"),
        (2400, 220.0, 1.0, 250, False, "2400 + 250 + 275 < 3000: next step is still in time"),
        (2500, 220.0, 1.0, 250, True, "2500 + 250 + 275 >= 3000: the last step that lands in time"),
        (2990, 0.0, 1.0, 0, False, "nothing grows: never due"),
        (600, 40_000.0, 1.0, 250, True, "instant actor: due at once (and then overtaken)"),
    ],
)
def test_buffer_due_table(
    unbuffered: int, rate: float | None, latency: float | None, step: int, due: bool | None, why: str
) -> None:
    assert buffer_due(unbuffered, 3000, rate, latency, step) is due, why


def test_largest_step() -> None:
    growth = WindowGrowth()
    assert growth.largest_step() == 0
    for at, pending in ((0.0, 0), (1.0, 210), (1.1, 230), (2.0, 480), (2.1, 100), (3.0, 300)):
        growth.note(at, pending)
    assert growth.largest_step() == 250
