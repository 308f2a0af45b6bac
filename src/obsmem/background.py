"""The owner of every background task obsmem starts, and of every bounded wait on memory work.

Buffered observation and reflection run while the actor's turn goes on, but nothing here is
fire-and-forget: each task is registered with one owner (the ``Memory``), its exception is
always retrieved and logged (never "Task exception was never retrieved"), ``settled()`` waits
for the work to finish, and ``aclose()`` cancels what is left and waits for it. There is no
process-global state: two ``Memory`` objects have two owners.

A turn's own memory work (activation, a synchronous observation or reflection) runs through
:meth:`BackgroundWork.within`: as an owned task that the turn waits for at most a bound; past
it the turn goes on and the task keeps running, owned like any buffer, and the next boundary
of the same thread waits for it (within its own bound) before starting more.

Bounds are measured on the memory's clock. Work sleeps (a retry backoff) through
:class:`WatchedClock`, which tells whoever waits for that work, *before* sleeping, when the
sleep would end past their deadline: they stop waiting at once rather than sitting out a
``retry-after`` they cannot use. With :class:`~obsmem.clock.FakeClock` this makes the bounds
exact and deterministic in tests; with the system clock a wait also ends by plain timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from obsmem.clock import Clock, SystemClock
from obsmem.errors import ObsmemError
from obsmem import telemetry

__all__ = ["BackgroundWork", "Waited", "WatchedClock"]

logger = logging.getLogger("obsmem")

T = TypeVar("T")


class _Waiters:
    """The deadlines (on the memory's clock) of whoever waits for some work, and the sleeps that
    work is in; ``parent`` hears of the sleeps too (the owner's own waiters: ``settled(timeout=
    ...)`` waits for every task)."""

    def __init__(self, parent: _Waiters | None = None) -> None:
        self.parent = parent
        self._deadlines: list[tuple[float, asyncio.Future[None]]] = []
        self._asleep: dict[int, float] = {}  # sleep id -> when it ends

    def add(self, at: float) -> asyncio.Future[None]:
        """A future done once the work is asleep past ``at`` (at once if it already is)."""
        crossed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if any(until >= at for until in self._asleep.values()):
            crossed.set_result(None)
        self._deadlines.append((at, crossed))
        return crossed

    def remove(self, crossed: asyncio.Future[None]) -> None:
        self._deadlines = [(at, f) for at, f in self._deadlines if f is not crossed]

    def asleep(self, sleep: int, until: float | None) -> None:
        """Sleep ``sleep`` lasts until ``until`` (None: it is over); wake every waiter whose
        deadline it passes."""
        if until is None:
            self._asleep.pop(sleep, None)
        else:
            self._asleep[sleep] = until
            for at, crossed in self._deadlines:
                if until >= at and not crossed.done():
                    crossed.set_result(None)
        if self.parent is not None:
            self.parent.asleep(sleep, until)


#: Who waits for the work running in this context (each task has its own copy).
_WAITERS: contextvars.ContextVar[_Waiters | None] = contextvars.ContextVar("obsmem_waiters", default=None)
#: Inside a turn's work: what background work it starts waits for (the turn's wait to end).
_GATE: contextvars.ContextVar[asyncio.Future[None] | None] = contextvars.ContextVar("obsmem_gate", default=None)


class WatchedClock:
    """A :class:`~obsmem.clock.Clock` for memory work: the wrapped clock, whose ``sleep`` tells
    the waiters of the work that sleeps (before it sleeps, and to whoever starts waiting while
    it sleeps) when it will end past their deadline."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def now(self) -> datetime:
        return self.clock.now()

    def monotonic(self) -> float:
        return self.clock.monotonic()

    async def sleep(self, seconds: float) -> None:
        waiters = _WAITERS.get()
        if waiters is None:
            await self.clock.sleep(seconds)
            return
        token = object()
        waiters.asleep(id(token), self.clock.monotonic() + max(0.0, seconds))
        try:
            await self.clock.sleep(seconds)
        finally:
            waiters.asleep(id(token), None)


@dataclass(frozen=True, slots=True)
class Waited(Generic[T]):
    """How a bounded wait ended: ``done`` with the work's ``value``, or not (the work goes on).
    ``waited_s`` is the time it took, on the memory's clock."""

    done: bool
    value: T | None
    waited_s: float


class _Keyed:
    """Work a caller waits for, under a key: its task, its waiters, and how it ended. ``gate``
    holds back the background work it starts until its caller stops waiting, so that work
    starts as it would if the caller had run it itself: after the caller's step, not inside it."""

    def __init__(self, waiters: _Waiters, gate: asyncio.Future[None]) -> None:
        self.waiters = waiters
        self.gate = gate
        self.task: asyncio.Task[None] | None = None
        self.detached = False  # nobody waits for its result any more
        self.value: Any = None
        self.error: BaseException | None = None


#: How many failures of its tasks a :class:`BackgroundWork` keeps (``errors``): the newest.
ERRORS_KEPT = 100


def _without_frames(error: BaseException) -> BaseException:
    """``error`` and the errors it was raised from (or while handling), without tracebacks."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return error


class BackgroundWork:
    """A set of owned tasks. ``spawn`` is the handle the engine receives; ``clock`` measures the
    bounds of :meth:`within` and :meth:`settled` (the system clock when not given)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._waiters = _Waiters()
        self._keyed: dict[str, _Keyed] = {}
        # The newest ERRORS_KEPT failures of tasks, without their tracebacks (whose frames would
        # keep what the task worked on: users' messages), for tests and debugging: logged anyway.
        self.errors: list[BaseException] = []

    def _context(self, waiters: _Waiters, gate: asyncio.Future[None] | None = None) -> contextvars.Context:
        """A copy of the current context in which ``waiters`` wait for the work (a buffer
        started by a turn's work is not the turn's to wait for) and ``gate`` holds back what
        it starts."""
        context = contextvars.copy_context()
        context.run(_WAITERS.set, waiters)
        context.run(_GATE.set, gate)
        return context

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None] | None:
        """Start ``work`` now (from inside a turn's work: once the turn stops waiting for it);
        returns its task, or None (closing the coroutine) once closed."""
        if self._closed:
            work.close()
            return None
        gate = _GATE.get()
        if gate is not None and not gate.done():
            work = _after(gate, work)
        task = asyncio.get_running_loop().create_task(
            work, name=f"obsmem:{name}", context=self._context(self._waiters)
        )
        self._own(task)
        return task

    def _own(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            logger.error("obsmem background task %s failed (%s)", task.get_name(), type(error).__name__,
                         extra={"obsmem_error_type": type(error).__name__})
            logger.debug("obsmem background task %s failed", task.get_name(), exc_info=error)
            self.errors.append(_without_frames(error))
            del self.errors[:-ERRORS_KEPT]

    @property
    def pending(self) -> int:
        return len(self._tasks)

    # -- bounded waits ----------------------------------------------------------------------------
    def running(self, key: str) -> bool:
        """Whether work started by :meth:`within` under ``key`` is still running (a caller that
        stopped waiting for it left it behind)."""
        keyed = self._keyed.get(key)
        return keyed is not None and keyed.task is not None and not keyed.task.done()

    def queue(self, key: str, work: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``work()`` under ``key`` once the work running under it now is done, nobody
        waiting for it (a failure is logged). It holds the key at once: :meth:`within` and
        :meth:`finished` for ``key`` wait for both. Refused (nothing runs) once closed."""
        if self._closed:
            return
        previous = self._keyed.get(key)
        loop = asyncio.get_running_loop()
        keyed = _Keyed(_Waiters(parent=self._waiters), loop.create_future())
        keyed.detached = True
        keyed.gate.set_result(None)

        async def run() -> None:
            if previous is not None:
                await self._wait(previous, None)
            await self._run_keyed(keyed, key, work)

        keyed.task = loop.create_task(run(), name=f"obsmem:{key}", context=self._context(keyed.waiters))
        self._keyed[key] = keyed
        self._own(keyed.task)

    async def finished(self, key: str, budget: float | None) -> bool:
        """Wait for the work running under ``key`` (started by :meth:`within`) at most ``budget``
        seconds of the clock (None: as long as it takes); whether it is done (True when none
        runs). Its result and its failure are its starter's, not reported here."""
        keyed = self._keyed.get(key)
        if keyed is None:
            return True
        deadline = None if budget is None else self.clock.monotonic() + max(0.0, budget)
        return await self._wait(keyed, deadline)

    async def within(
        self, key: str, work: Callable[[], Coroutine[Any, Any, T]], budget: float | None
    ) -> Waited[T]:
        """Run ``work()`` once the work already running under ``key`` is done, waiting for both
        at most ``budget`` seconds of the clock in all (None: as long as it takes).

        Returns ``Waited(done=True, value)`` when the work finished in time (its exception, if
        it failed, is raised here), else ``Waited(done=False)``: the work goes on as an owned
        task (or, when the earlier work is still running, was not started), and a failure it
        meets later is logged, not raised.
        """
        started = self.clock.monotonic()
        deadline = None if budget is None else started + max(0.0, budget)
        previous = self._keyed.get(key)
        if previous is not None and not await self._wait(previous, deadline):
            return Waited(False, None, self.clock.monotonic() - started)
        if self._closed:  # nothing may be left behind any more: run it here
            return Waited(True, await work(), self.clock.monotonic() - started)
        loop = asyncio.get_running_loop()
        keyed = _Keyed(_Waiters(parent=self._waiters), loop.create_future())
        task = loop.create_task(
            self._run_keyed(keyed, key, work), name=f"obsmem:{key}",
            context=self._context(keyed.waiters, keyed.gate),
        )
        keyed.task = task
        self._keyed[key] = keyed
        self._own(task)
        try:
            finished = await self._wait(keyed, deadline)
        finally:
            keyed.detached = not task.done()
            if not keyed.gate.done():
                keyed.gate.set_result(None)
        if not finished:
            return Waited(False, None, self.clock.monotonic() - started)
        if keyed.error is not None:
            raise keyed.error
        return Waited(True, keyed.value, self.clock.monotonic() - started)

    async def _run_keyed(self, keyed: _Keyed, key: str, work: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``work()`` for a caller that may stop waiting (see :meth:`within`)."""
        try:
            keyed.value = await work()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not keyed.detached:
                keyed.error = exc  # the waiter raises it
            elif isinstance(exc, ObsmemError):  # reported already (events, markers); nobody to raise it to
                telemetry.log_failure(logger, "obsmem: memory work %s failed after its turn went on", key, error=exc)
            else:
                raise
        finally:
            if self._keyed.get(key) is keyed:
                del self._keyed[key]
            if keyed.detached and not keyed.gate.done():
                keyed.gate.set_result(None)

    async def _wait(self, keyed: _Keyed, deadline: float | None) -> bool:
        """Wait for ``keyed``'s task until ``deadline``; whether it finished."""
        task = keyed.task
        if task is None or task.done():
            return True
        if deadline is None:
            await asyncio.wait({task})
            return True
        crossed = keyed.waiters.add(deadline)
        try:
            return await self._until(lambda: task.done(), {task}, crossed, deadline)
        finally:
            keyed.waiters.remove(crossed)

    async def _until(
        self,
        finished: Callable[[], bool],
        tasks: set[asyncio.Task[None]] | Callable[[], set[asyncio.Task[None]]],
        crossed: asyncio.Future[None],
        deadline: float,
    ) -> bool:
        """Wait until ``finished()``, the deadline passes on the clock, or the work is about to
        sleep past it (``crossed``); whether it finished."""
        while not finished():
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0 or crossed.done():
                return False
            waiting = tasks() if callable(tasks) else tasks
            await asyncio.wait({*waiting, crossed}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        return True

    # -- lifetime ---------------------------------------------------------------------------------
    async def settled(self, *, rounds: int = 100, timeout: float | None = None) -> bool:
        """Wait until no task is running, including tasks started by finishing tasks; with
        ``timeout``, for at most that many seconds of the clock. Whether everything finished."""
        if timeout is None:
            for _ in range(rounds):
                if not self._tasks:
                    return True
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
            return not self._tasks
        deadline = self.clock.monotonic() + max(0.0, timeout)
        crossed = self._waiters.add(deadline)
        try:
            return await self._until(lambda: not self._tasks, lambda: set(self._tasks), crossed, deadline)
        finally:
            self._waiters.remove(crossed)

    async def aclose(self, *, timeout: float | None = None) -> None:
        """Cancel whatever is still running and wait for it (at most ``timeout`` seconds, real
        time: cancelled work only unwinds); later spawns are refused."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        if timeout is None:
            await asyncio.gather(*tasks, return_exceptions=True)
            return
        _, stuck = await asyncio.wait(tasks, timeout=max(timeout, 0.01))
        if stuck:
            logger.warning("obsmem: %d background task(s) did not stop within %g s of being cancelled",
                           len(stuck), timeout)


async def _after(gate: asyncio.Future[None], work: Coroutine[Any, Any, None]) -> None:
    """``work``, once ``gate`` is done (waited for without cancelling it: others share it)."""
    try:
        await asyncio.wait({gate})
    except asyncio.CancelledError:
        work.close()
        raise
    await work
