"""The owner of every background task obsmem starts.

Buffered observation and reflection run while the actor's turn goes on, but nothing here is
fire-and-forget: each task is registered with one owner (the ``Memory``), its exception is
always retrieved and logged (never "Task exception was never retrieved"), ``settled()`` waits
for the work to finish, and ``aclose()`` cancels what is left and waits for it. There is no
process-global state: two ``Memory`` objects have two owners.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["BackgroundWork"]

logger = logging.getLogger("obsmem")


class BackgroundWork:
    """A set of owned tasks. ``spawn`` is the handle the engine receives."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.errors: list[BaseException] = []

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None] | None:
        """Start ``work`` now; returns its task, or None (closing the coroutine) once closed."""
        if self._closed:
            work.close()
            return None
        task = asyncio.get_running_loop().create_task(work, name=f"obsmem:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self.errors.append(error)
            logger.error("obsmem background task %s failed: %r", task.get_name(), error, exc_info=error)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def settled(self, *, rounds: int = 100) -> None:
        """Wait until no task is running, including tasks started by finishing tasks."""
        for _ in range(rounds):
            if not self._tasks:
                return
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel whatever is still running and wait for it; later spawns are refused."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
