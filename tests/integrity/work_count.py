"""Linearity by counting work, not timing it (the project rule: no timed assertions in tests).

:func:`work` runs a routine under :func:`sys.settrace` and counts interpreter events: every
Python function call (a frame, wherever its code lives) and every line executed outside the
standard library (obsmem, the tests, installed packages). For pure-Python work the count is
deterministic: the same input gives the same count on an idle machine and on a loaded one.
:func:`growth` is the count for ``make(4 * n)`` over that for ``make(n)``: linear work grows
about 4×, quadratic about 16×; the tests bound it by 8, as the CPU-time tests did.

What the counts cannot see: work inside one C call (a regular expression backtracking, one
``str.count`` over the whole text). A C routine called once per character or per clause *is*
seen (one call, one line each); a quadratic regex is not. Those costs stay measured by CPU time
in ``benchmarks/pathological.py --check``. ``tests/integrity/test_work_count.py`` shows this
counter fails a deliberately quadratic variant of the routines the tests check.
"""

from __future__ import annotations

import sys
import sysconfig
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

GROWTH_BOUND = 8.0  # for 4× the input: linear ≈ 4, quadratic ≈ 16

_STDLIB = tuple(
    path for path in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]} if path
)


def counted_lines(filename: str) -> bool:
    return "site-packages" in filename or not filename.startswith(_STDLIB)


class _Events:
    """The trace function :func:`work` and :func:`async_work` install, and its count."""

    def __init__(self) -> None:
        self.count = 0
        self._lines: dict[str, bool] = {}

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.count += 1
        return self._local

    def on_call(self, frame: FrameType, event: str, arg: Any) -> Any:
        self.count += 1
        filename = frame.f_code.co_filename
        counted = self._lines.get(filename)
        if counted is None:
            counted = self._lines[filename] = counted_lines(filename)
        return self._local if counted else None


def work(run: Callable[[str], object], text: str) -> int:
    """Calls plus non-stdlib lines executed by ``run(text)`` (on this thread)."""
    events = _Events()
    previous, previous_threads = sys.gettrace(), threading.gettrace()  # a debugger's or coverage's: back after
    threading.settrace(events.on_call)  # threads started inside count too (none do with offload off)
    sys.settrace(events.on_call)
    try:
        run(text)
    finally:
        sys.settrace(previous)
        threading.settrace(previous_threads)  # type: ignore[arg-type,unused-ignore]
    return events.count


def growth(run: Callable[[str], object], make: Callable[[int], str], n: int) -> float:
    """Work for ``make(4 * n)`` over work for ``make(n)``, after one untraced warm-up run on
    ``make(n // 4)`` (imports, compiled patterns and caches filled by a first call are not the
    input's work; a smaller text leaves the measured texts themselves uncached)."""
    run(make(max(n // 4, 1)))
    small = work(run, make(n))
    return work(run, make(4 * n)) / max(small, 1)


def repeat(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


async def async_work(call: Awaitable[T]) -> tuple[int, T]:
    """:func:`work` for a coroutine: await ``call`` with this thread's events counted (the call
    and whatever else the event loop runs meanwhile), and return the count with the result."""
    events = _Events()
    previous = sys.gettrace()
    sys.settrace(events.on_call)
    try:
        result = await call
    finally:
        sys.settrace(previous)
    return events.count, result
