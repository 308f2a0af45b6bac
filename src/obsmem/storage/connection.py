"""One worker thread that owns one blocking database connection.

SQLite connections (and the knowledge store's synchronous psycopg connection) must be used from
the thread that made them, and their calls block. So each such adapter runs every operation on
its own single thread, in submission order, and closes the connection there after the calls
already queued have finished. This mixin is that plumbing, shared by the adapters that need it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from obsmem.errors import StoreClosedError

__all__ = ["ConnectionThread"]

T = TypeVar("T")


class ConnectionThread:
    """Mixin: ``_on_thread(fn, *args)`` runs ``fn`` on the connection's thread; ``close()`` ends it.

    Subclasses call :meth:`_start_thread` in ``__init__`` and implement ``_close_connection``
    (run on the thread, once).
    """

    _executor: ThreadPoolExecutor
    _closed: bool

    def _start_thread(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._closed = False

    def _close_connection(self) -> None:
        raise NotImplementedError

    async def _on_thread(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StoreClosedError()
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def close(self) -> None:
        """Close the connection after the operations already queued have finished. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._close_connection)
        finally:
            self._executor.shutdown(wait=False)
