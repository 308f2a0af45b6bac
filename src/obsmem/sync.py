"""A blocking facade over :class:`~obsmem.memory.Memory` for code that is not async.

There is one implementation (async); this module only forwards calls to it on a private event
loop running in one owned thread (the "portal" pattern), so sync and async users can never see
different behaviour. It refuses to run inside a running event loop, where blocking would
deadlock: there, use ``await`` on ``Memory`` directly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import weakref
from collections.abc import (
    AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence,
)
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from obsmem.calls import UsageReport
from obsmem.errors import InvalidInputError, ObsmemError, StoreClosedError
from obsmem.memory import Memory
from obsmem.om.context import ContextWindow
from obsmem.om.engine import CycleOutcome
from obsmem.om.recall.render import DEFAULT_TOKEN_BUDGET, Detail, RecallMode, RecallResult
from obsmem.om.recall.tool import ToolFlavor
from obsmem.om.receipts import Receipt
from obsmem.om.status import ThreadStatus
from obsmem.storage.contract import ObservationRecord
from obsmem.turn import Turn
from obsmem.types import Message, Thread

if TYPE_CHECKING:  # the knowledge package loads only when knowledge is used
    from obsmem.knowledge import Record
    from obsmem.knowledge.agents import AgentRun

__all__ = ["SyncMemory", "SyncTurn"]

T = TypeVar("T")


def _closed(message: str) -> StoreClosedError:
    """A StoreClosedError (what the async Memory raises once closed) saying what closed it."""
    error = StoreClosedError()
    error.args = (message,)
    return error


class _Portal:
    """An event loop on a dedicated thread; ``call`` runs a coroutine there and waits.

    Every call is answered, whatever becomes of the loop. ``close`` refuses new calls, lets those
    in flight finish (for at most its ``grace``; an ``interruptible`` one, a ``watch``, not at
    all), cancels the rest, which raise StoreClosedError, then stops the loop. If the loop thread
    stops any other way (a SystemExit or KeyboardInterrupt raised in work on it), the calls still
    waiting and every later one raise StoreClosedError naming what stopped it. A caller
    interrupted while it waits (Ctrl-C) has its call cancelled, and waits for that, before the
    interruption reaches it (as ``asyncio.run`` cancels what Ctrl-C interrupts). In a process
    forked from the one that made it, the portal has no thread (a fork copies only the forking
    one): every call there is refused, and closing it there does nothing (the loop, its thread
    and the store are the parent's).
    """

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()  # guards _state and _waiting
        self._state: Literal["open", "closing", "closed", "dead"] = "open"
        self._stopped_by: BaseException | None = None
        # What callers wait for, until answered: what _run answers if the loop stops first.
        self._waiting: set[concurrent.futures.Future[Any]] = set()
        # The calls running on the loop (touched on the loop thread only): task -> (interruptible, future).
        self._tasks: dict[asyncio.Task[Any], tuple[bool, concurrent.futures.Future[Any]]] = {}
        # A daemon thread, so a program that forgets close() still exits; close() (or the
        # context manager, or garbage collection via weakref.finalize) stops it properly.
        self._thread = threading.Thread(target=self._run, name="obsmem-sync", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._loop.run_forever()
        except BaseException as exc:  # noqa: BLE001 - reported to every caller instead
            self._stopped_by = exc
        finally:
            with self._lock:
                self._state = "closed" if self._state in ("closing", "closed") else "dead"
                waiting, self._waiting = self._waiting, set()
            refusal = self._refusal() or _closed("This SyncMemory has been closed; create a new one.")
            for future in waiting:  # nothing will run these now: answer them
                _answer(future, refusal)
            self._loop.close()

    def _refusal(self) -> ObsmemError | None:
        """Why a call cannot run now (None: it can)."""
        if os.getpid() != self._pid:
            return InvalidInputError(
                f"This SyncMemory was made in process {self._pid}, and this process ({os.getpid()}) was "
                "forked from it: its event loop thread does not survive a fork. Create a new SyncMemory in "
                "the child, after the fork (e.g. in gunicorn's post_fork hook, or run without --preload)."
            )
        if self._state == "dead":
            return _closed(
                f"This SyncMemory's event loop thread stopped ({self._stopped_by!r} was raised on it); "
                "create a new one."
            )
        if self._state != "open":
            return _closed("This SyncMemory has been closed; create a new one.")
        return None

    def check(self) -> None:
        """Raise what a call would raise now, if anything."""
        refusal = self._refusal()
        if refusal is not None:
            raise refusal

    @property
    def closed(self) -> bool:
        return self._refusal() is not None

    def call(self, coro: Coroutine[Any, Any, T], *, interruptible: bool = False) -> T:
        """Run ``coro`` on the loop and wait for it; ``interruptible``: ``close`` cancels it at once
        instead of waiting for it (a wait that may never end, such as a ``watch``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise InvalidInputError(
                "SyncMemory was called from inside a running event loop; use obsmem.Memory with await instead."
            )
        # A forked child is refused before any lock: the fork may have copied one held by a thread it dropped.
        if os.getpid() != self._pid:
            coro.close()
            self.check()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        return self._wait(
            future, lambda: self._submit(coro, future, interruptible=interruptible, closing=False)
        )

    def _submit(
        self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T], *, interruptible: bool,
        closing: bool,
    ) -> None:
        with self._lock:
            refusal = self._refusal()
            if closing and self._state == "open":
                self._state, refusal = "closing", None
            if refusal is not None:
                coro.close()
                raise refusal
            self._waiting.add(future)  # under the lock: _run answers it if the loop stops first
            self._loop.call_soon_threadsafe(self._start, coro, future, interruptible)

    def _start(
        self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T], interruptible: bool
    ) -> None:
        if future.done():  # already answered (its caller was interrupted before it started)
            coro.close()
            return
        task = self._loop.create_task(coro)
        self._tasks[task] = (interruptible, future)
        task.add_done_callback(lambda done: self._finish(done, future))

    def _finish(self, task: asyncio.Task[T], future: concurrent.futures.Future[T]) -> None:
        self._tasks.pop(task, None)
        if task.cancelled():  # by close (or its caller's interruption, which it raises instead)
            closing = self._state != "open"
            _answer(future, _closed("This SyncMemory was closed while this call was running.") if closing
                    else concurrent.futures.CancelledError())
        elif (error := task.exception()) is not None:
            _answer(future, error)
        elif not future.done():
            future.set_result(task.result())

    def _wait(self, future: concurrent.futures.Future[T], submit: Callable[[], None]) -> T:
        """``submit()`` the call ``future`` answers, and wait for it."""
        try:
            submit()
            return future.result()
        except BaseException:
            with self._lock:
                submitted = future in self._waiting  # then someone answers it (see _run)
            if submitted and not future.done():  # the caller was interrupted (Ctrl-C) while it waited
                with contextlib.suppress(RuntimeError):  # the loop is closed: _run answered it
                    self._loop.call_soon_threadsafe(self._cancel, future)
                concurrent.futures.wait([future])  # the call stops before the caller goes on
            raise
        finally:
            with self._lock:
                self._waiting.discard(future)

    def _cancel(self, future: concurrent.futures.Future[Any]) -> None:
        """On the loop: stop the call ``future`` waits for (its caller was interrupted)."""
        for task, (_, waited) in self._tasks.items():
            if waited is future:
                task.cancel()
                return
        _answer(future, _closed("This call was interrupted before it started."))

    async def _shutdown(self, aclose: Callable[[], Awaitable[None]] | None, grace: float | None) -> None:
        """On the loop: let the calls in flight finish (``grace`` seconds at most), cancel the rest,
        run ``aclose``, cancel what is left on the loop (as ``asyncio.run`` does), stop the loop."""
        me = asyncio.current_task()
        try:
            calls = {task: interruptible for task, (interruptible, _) in self._tasks.items()
                     if task is not me}
            for task, interruptible in calls.items():
                if interruptible:
                    task.cancel()
            if calls:
                _, late = await asyncio.wait(calls, timeout=grace)
                await _cancelled(late)
            if aclose is not None:
                await aclose()
        finally:
            try:
                await _cancelled({task for task in asyncio.all_tasks() if task is not me})
                await self._loop.shutdown_asyncgens()
            finally:
                self._loop.stop()

    def close(self, aclose: Callable[[], Awaitable[None]] | None = None, grace: float | None = None) -> None:
        """Refuse new calls, finish (``grace`` seconds at most; None: no bound) or cancel those in
        flight, await ``aclose()`` and stop the loop. Closing again waits for the first close."""
        if os.getpid() != self._pid:
            return  # a forked child: the loop, its thread and the store are the parent's
        shutdown: concurrent.futures.Future[None] = concurrent.futures.Future()
        coro = self._shutdown(aclose, grace)
        if threading.current_thread() is self._thread:  # closed from the loop itself (a finalizer run
            with contextlib.suppress(ObsmemError):  # there): it stops once the callback running returns
                self._submit(coro, shutdown, interruptible=False, closing=True)
            return
        try:
            # Closed or closing already, or its thread stopped on its own: StoreClosedError.
            with contextlib.suppress(StoreClosedError):
                self._wait(shutdown, lambda: self._submit(coro, shutdown, interruptible=False, closing=True))
        finally:
            self._thread.join()


def _answer(future: concurrent.futures.Future[Any], error: BaseException) -> None:
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        future.set_exception(error)


async def _cancelled(tasks: set[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has stopped."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)


class SyncTurn:
    def __init__(self, portal: _Portal, turn: Turn) -> None:
        self._portal = portal
        self._turn = turn

    @property
    def context(self) -> ContextWindow:
        return self._turn.context

    @property
    def trimmed(self) -> int:
        """How many of the oldest raw messages the latest context left out (see :class:`Turn`)."""
        return self._turn.trimmed

    @property
    def waited(self) -> bool:
        return self._turn.waited

    @property
    def began_seq(self) -> int | None:
        """The seq of the turn's first message: pass it as ``resume_turn(since_seq=...)`` where
        another worker continues the turn (see :attr:`Turn.began_seq`)."""
        return self._turn.began_seq

    @property
    def thread(self) -> Thread:
        return self._turn.thread

    @property
    def model(self) -> str | None:
        return self._turn.model

    @property
    def max_wait(self) -> float | None:
        return self._turn.max_wait

    @property
    def outcomes(self) -> list[CycleOutcome]:
        return self._turn.outcomes

    @property
    def steps(self) -> int:
        return self._turn.steps

    @property
    def ended(self) -> bool:
        return self._turn.ended

    @property
    def waited_out(self) -> int:
        return self._turn.waited_out

    def step(self, responses: Sequence[Message | dict[str, Any]]) -> ContextWindow:
        return self._portal.call(self._turn.step(responses))

    def end(self, responses: Sequence[Message | dict[str, Any]] = ()) -> None:
        self._portal.call(self._turn.end(responses))

    def __enter__(self) -> SyncTurn:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.end()


class SyncMemory:
    """The same arguments as :class:`Memory`; every method blocks until done.

    Use it as a context manager (or call ``close()``) so its loop thread is stopped.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._portal = _Portal()
        try:
            self._memory = self._portal.call(_build(*args, **kwargs))
        except BaseException:
            self._portal.close()
            raise
        self._finalizer = weakref.finalize(self, _close_quietly, self._portal, self._memory)

    @property
    def memory(self) -> Memory:
        return self._memory

    def close(self) -> None:
        """Finish the calls other threads are waiting on (``close_timeout`` seconds at most; a
        ``watch`` is not waited for), cancel the rest (they raise StoreClosedError), then close
        the memory. Calls made after it, and a second ``close()``, behave as on a closed
        :class:`Memory`: StoreClosedError, and nothing."""
        self._finalizer.detach()
        self._portal.close(self._memory.aclose, self._memory.close_timeout)

    def __enter__(self) -> SyncMemory:
        self._portal.check()  # a with block re-entered after it closed the memory
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def create_thread(
        self, thread_id: str, resource_id: str, *, title: str | None = None,
        metadata: dict[str, Any] | None = None, org_id: str | None = None,
    ) -> Thread:
        return self._portal.call(
            self._memory.create_thread(thread_id, resource_id, title=title, metadata=metadata, org_id=org_id)
        )

    def create_thread_made(
        self, thread_id: str, resource_id: str, *, title: str | None = None,
        metadata: dict[str, Any] | None = None, org_id: str | None = None,
    ) -> tuple[Thread, bool]:
        return self._portal.call(
            self._memory.create_thread_made(thread_id, resource_id, title=title, metadata=metadata, org_id=org_id)
        )

    def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread:
        return self._portal.call(self._memory.get_thread(thread_id, resource_id=resource_id))

    def list_threads(
        self, resource_id: str, *, limit: int = 100, offset: int = 0, after: str | None = None,
        newest_first: bool = False, before: str | None = None,
    ) -> list[Thread]:
        return self._portal.call(
            self._memory.list_threads(
                resource_id, limit=limit, offset=offset, after=after, newest_first=newest_first, before=before
            )
        )

    def unfinished_delete(self, thread_id: str) -> Thread | None:
        return self._portal.call(self._memory.unfinished_delete(thread_id))

    def unfinished_deletes(self, resource_id: str) -> list[Thread]:
        return self._portal.call(self._memory.unfinished_deletes(resource_id))

    def delete_thread(self, thread_id: str, *, actor: str | None = None) -> bool:
        return self._portal.call(self._memory.delete_thread(thread_id, actor=actor))

    def delete_resource(
        self, resource_id: str, *, knowledge_within: str | None = None, actor: str | None = None
    ) -> dict[str, int]:
        return self._portal.call(
            self._memory.delete_resource(resource_id, knowledge_within=knowledge_within, actor=actor)
        )

    def forget(
        self, value: str, *, thread_id: str | None = None, resource_id: str | None = None,
        knowledge_within: str | None = None, actor: str | None = None,
    ) -> dict[str, int]:
        return self._portal.call(self._memory.forget(
            value, thread_id=thread_id, resource_id=resource_id, knowledge_within=knowledge_within,
            actor=actor,
        ))  # fmt: skip

    def reindex_groups(self, *, thread_id: str | None = None, resource_id: str | None = None) -> int:
        return self._portal.call(self._memory.reindex_groups(thread_id=thread_id, resource_id=resource_id))

    # -- knowledge (Memory(knowledge=...)) ---------------------------------------------------------
    def pin(self, thread_id: str, text: str, *, level: Literal["thread", "resource"] = "resource",
            reason: str = "pinned by the user") -> Record:
        return self._portal.call(self._memory.pin(thread_id, text, level=level, reason=reason))

    def unpin(self, thread_id: str, record_id: str, *, reason: str = "unpinned by the user") -> Record:
        return self._portal.call(self._memory.unpin(thread_id, record_id, reason=reason))

    def list_pins(self, thread_id: str) -> list[Record]:
        return self._portal.call(self._memory.list_pins(thread_id))

    def curate_knowledge(self, thread_id: str, *, force: bool = True) -> AgentRun:
        return self._portal.call(self._memory.curate_knowledge(thread_id, force=force))

    def capture_knowledge(self, thread_id: str) -> list[AgentRun]:
        return self._portal.call(self._memory.capture_knowledge(thread_id))

    def redacted(self, text: str) -> str:
        return self._memory.redacted(text)

    def settled(self) -> None:
        """:meth:`Memory.settled`, blocking: until no background memory work runs and the cost
        ledger has written every call recorded so far."""
        self._portal.call(self._memory.settled())

    def save_messages(self, thread_id: str, messages: Sequence[Message | dict[str, Any]]) -> list[Message]:
        return self._portal.call(self._memory.save_messages(thread_id, messages))

    def list_messages(self, thread_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[Message]:
        return self._portal.call(self._memory.list_messages(thread_id, after_seq=after_seq, limit=limit))

    def begin_turn(
        self, *, thread_id: str, resource_id: str | None = None,
        messages: Sequence[Message | dict[str, Any]] = (), model: str | None = None,
    ) -> SyncTurn:
        turn = self._memory.begin_turn(
            thread_id=thread_id, resource_id=resource_id, messages=messages, model=model
        )
        return SyncTurn(self._portal, self._portal.call(turn))

    def resume_turn(
        self, *, thread_id: str, model: str | None = None, since_seq: int | None = None
    ) -> SyncTurn:
        """:meth:`Memory.resume_turn`, blocking: a turn another worker began (pass its
        ``began_seq`` as ``since_seq``), continued here."""
        turn = self._memory.resume_turn(thread_id=thread_id, model=model, since_seq=since_seq)
        return SyncTurn(self._portal, self._portal.call(turn))

    @contextlib.contextmanager
    def turn(
        self, *, thread_id: str, resource_id: str | None = None,
        messages: Sequence[Message | dict[str, Any]] = (), model: str | None = None,
    ) -> Iterator[SyncTurn]:
        """``with memory.turn(...) as turn:`` — begins a turn and always ends it."""
        turn = self.begin_turn(thread_id=thread_id, resource_id=resource_id, messages=messages, model=model)
        try:
            yield turn
        finally:
            turn.end()

    def get_context(self, thread_id: str) -> ContextWindow:
        return self._portal.call(self._memory.get_context(thread_id))

    def observe(self, thread_id: str) -> CycleOutcome:
        return self._portal.call(self._memory.observe(thread_id))

    def reflect(self, thread_id: str, *, guidance: str | None = None) -> CycleOutcome:
        return self._portal.call(self._memory.reflect(thread_id, guidance=guidance))

    def get_record(self, thread_id: str) -> ObservationRecord | None:
        return self._portal.call(self._memory.get_record(thread_id))

    def list_generations(self, thread_id: str, *, limit: int = 100) -> list[ObservationRecord]:
        return self._portal.call(self._memory.list_generations(thread_id, limit=limit))

    def get_working_memory(self, thread_id: str) -> str | None:
        return self._portal.call(self._memory.get_working_memory(thread_id))

    def get_observations(self, thread_id: str) -> str:
        """:meth:`Memory.get_observations`, blocking: the observations the thread's context shows."""
        return self._portal.call(self._memory.get_observations(thread_id))

    def get_instructions(self, thread_id: str) -> list[Message]:
        return self._portal.call(self._memory.get_instructions(thread_id))

    def recall(
        self,
        thread_id: str,
        *,
        mode: RecallMode = "messages",
        group_id: str | None = None,
        cursor: str | None = None,
        target_thread_id: str | None = None,
        anchor: Literal["start", "end"] = "start",
        query: str | None = None,
        page: int = 1,
        limit: int = 20,
        detail: Detail = "low",
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        char_offset: int = 0,
    ) -> RecallResult:
        """:meth:`Memory.recall`, blocking (retrieval mode only)."""
        return self._portal.call(
            self._memory.recall(
                thread_id, mode=mode, group_id=group_id, cursor=cursor, target_thread_id=target_thread_id,
                anchor=anchor, query=query, page=page, limit=limit, detail=detail, token_budget=token_budget,
                char_offset=char_offset,
            )
        )

    def recall_tool(self, *, flavor: ToolFlavor = "generic") -> dict[str, Any]:
        return self._memory.recall_tool(flavor=flavor)

    def call_recall_tool(
        self, thread_id: str, args: Mapping[str, Any] | None, *, token_budget: int = DEFAULT_TOKEN_BUDGET
    ) -> dict[str, Any]:
        """:meth:`Memory.call_recall_tool`, blocking: answer one ``recall`` tool call."""
        return self._portal.call(self._memory.call_recall_tool(thread_id, args, token_budget=token_budget))

    # -- status, receipts, usage (issue 21) ------------------------------------------------------
    def usage(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        since: datetime | date | None = None,
        until: datetime | date | None = None,
    ) -> UsageReport:
        """:meth:`Memory.usage`, blocking: the cost ledger summed per UTC day, role and model."""
        return self._portal.call(
            self._memory.usage(thread_id=thread_id, resource_id=resource_id, since=since, until=until)
        )

    def status(self, thread_id: str) -> ThreadStatus:
        """:meth:`Memory.status`, blocking: the thread's memory state now."""
        return self._portal.call(self._memory.status(thread_id))

    def watch(self, thread_id: str, *, interval_s: float = 0.5) -> Iterator[ThreadStatus]:
        """:meth:`Memory.watch` as a blocking generator: the status now, then again each time it
        changes, forever (each ``next`` blocks until a change). Break out of the loop (or
        ``close()`` the generator) to stop watching."""
        # Memory.watch is an async generator: aclose() ends it (and its wake-up registration)
        stream = cast(AsyncGenerator[ThreadStatus, None], self._memory.watch(thread_id, interval_s=interval_s))
        try:
            while True:
                try:
                    yield self._portal.call(_next(stream), interruptible=True)
                except StopAsyncIteration:
                    return
        finally:
            if not self._portal.closed:
                self._portal.call(stream.aclose())

    def receipt(self, message_id: str) -> Receipt | None:
        """:meth:`Memory.receipt`, blocking: the receipt an assistant reply was made from."""
        return self._portal.call(self._memory.receipt(message_id))

    def receipt_sources(self, receipt: Receipt) -> dict[str, list[Message]]:
        """:meth:`Memory.receipt_sources`, blocking: each group's messages and the raw tail's."""
        return self._portal.call(self._memory.receipt_sources(receipt))


async def _next(stream: AsyncIterator[T]) -> T:
    return await stream.__anext__()


def _close_quietly(portal: _Portal, memory: Memory) -> None:
    """Finalizer for a SyncMemory that was never closed: finish its work, stop its loop."""
    with contextlib.suppress(Exception):  # interpreter shutdown: nothing useful to report to
        portal.close(memory.aclose, memory.close_timeout)


async def _build(*args: Any, **kwargs: Any) -> Memory:
    # Built on the portal's loop so any loop-bound resources belong to it.
    return Memory(*args, **kwargs)
