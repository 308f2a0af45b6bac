"""One worker thread that owns one blocking database connection.

SQLite connections (and the knowledge store's synchronous psycopg connection) must be used from
the thread that made them, and their calls block. So each such adapter runs every operation on
its own single thread, in submission order, and closes the connection there after the calls
already queued have finished. This mixin is that plumbing, shared by the adapters that need it.

An adapter may also *claim* the connection while its thread is idle (nothing queued or
running, :meth:`ConnectionThread._claim_idle`) and use it where it is called, with no hand-off;
it then ends the claim on a second thread (:meth:`ConnectionThread._finish_claim`: a commit that
waits for the disk) or drops it. Until then every job of the thread waits for the connection,
so none runs inside the claimant's transaction, whichever thread queued it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from obsmem.errors import StoreClosedError

__all__ = ["ConnectionThread"]

T = TypeVar("T")

#: The longest :meth:`ConnectionThread._finish_claim` waits for its second thread to pick the
#: claim's end up (a thread's wake-up: tens of microseconds on an idle machine).
HANDOFF_WAIT_S = 0.001


class ConnectionThread:
    """Mixin: ``_on_thread(fn, *args)`` runs ``fn`` on the connection's thread; ``close()`` ends it.

    Subclasses call :meth:`_start_thread` in ``__init__`` and implement ``_close_connection``
    (run on the thread, once).
    """

    _executor: ThreadPoolExecutor
    _closed: bool

    def _start_thread(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-commit")
        self._closed = False
        self._jobs = 0  # queued or running on the thread, plus a claim (see _claim_idle)
        self._jobs_lock = threading.Lock()
        self._conn_lock = threading.Lock()  # held by the job or the claim using the connection

    def _close_connection(self) -> None:
        raise NotImplementedError

    async def _on_thread(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StoreClosedError()
        return await self._submit(fn, *args)

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` queued on the thread, counted until it has run, or until it is cancelled
        before it started (its caller was cancelled: it never runs then)."""
        with self._jobs_lock:
            self._jobs += 1
        try:
            job = self._executor.submit(self._job, fn, args)
        except BaseException:
            self._done()
            raise
        job.add_done_callback(lambda done: self._done() if done.cancelled() else None)
        return asyncio.wrap_future(job)

    def _job(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            with self._conn_lock:  # waits for a claim to end (see _claim_idle)
                return fn(*args)
        finally:
            self._done()

    def _done(self) -> None:
        with self._jobs_lock:
            self._jobs -= 1

    def _claim_idle(self) -> bool:
        """Claim the connection when nothing is queued or running on its thread: True, and until
        the claim ends (:meth:`_finish_claim`, :meth:`_drop_claim`) the caller alone uses it;
        jobs queued meanwhile wait, and run after the claim's end. False (nothing claimed) when
        the thread has work or the connection is closing. Never waits."""
        with self._jobs_lock:
            if self._jobs or self._closed or not self._conn_lock.acquire(blocking=False):
                return False
            self._jobs = 1
            return True

    def _drop_claim(self) -> None:
        """End a claim here (the connection left as it was found: no open transaction)."""
        self._conn_lock.release()
        self._done()

    def _finish_claim(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """End a claim with ``fn()`` on a second thread (a commit, which waits for the disk): the
        jobs queued meanwhile run once it returns. It runs whatever happens to the returned
        future: cancelling that (a caller's timeout) only stops the waiting, never the commit,
        which holds the connection (and the database's write lock) until it has run."""

        started = threading.Event()

        def finish() -> T:
            started.set()
            try:
                return fn()
            finally:
                self._drop_claim()

        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        job = self._finisher.submit(finish)  # raises (shut down): still claimed, the caller drops it
        # Hand the interpreter lock over until ``fn`` is under way (at most HANDOFF_WAIT_S). The
        # caller goes on with Python work meant to overlap the commit (a turn builds its context
        # while the disk syncs); without this the second thread waited for the lock until that
        # work was done (the interpreter's switch interval is 5 ms), and the disk sync began only
        # then: nothing overlapped. The commit's ``execute`` leaves the lock while the disk syncs,
        # and the caller has it back. The claim left the second thread idle, so it starts at once.
        started.wait(HANDOFF_WAIT_S)

        def report(ran: Future[T]) -> None:
            try:
                loop.call_soon_threadsafe(_settle, done, ran)
            except RuntimeError:  # the loop is closed: nobody waits
                pass

        job.add_done_callback(report)
        return done

    async def close(self) -> None:
        """Close the connection after the operations already queued have finished. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._submit(self._close_connection)
        finally:
            self._executor.shutdown(wait=False)
            self._finisher.shutdown(wait=False)


def _settle(done: asyncio.Future[T], ran: Future[T]) -> None:
    """``done`` (on its loop) as ``ran`` ended, unless its waiter gave up (cancelled) already."""
    if done.done():
        return
    error = ran.exception()
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(ran.result())
