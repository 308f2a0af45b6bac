"""Refusing a knowledge store inherited through ``os.fork()``.

A store that owns a connection on a worker thread (:class:`~obsmem.storage.connection.ConnectionThread`:
the SQLite and PostgreSQL knowledge stores) does not survive a fork (multiprocessing's 'fork',
gunicorn ``--preload`` with a module-level ``Knowledge``): the child has none of the parent's
threads, so a call queued for the store's thread would wait forever, and the connection is the
parent's (SQLite forbids using it in the child; a PostgreSQL socket shared by two processes
interleaves their messages). :class:`ForkRefusal` refuses such a call at once with a typed
error saying what to do, and makes ``close()`` in the child only mark its copy closed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, TypeVar

from obsmem.errors import InvalidInputError

__all__ = ["ForkRefusal"]

T = TypeVar("T")


class ForkRefusal:
    """Mixin, listed before :class:`~obsmem.storage.connection.ConnectionThread`: every call of
    a copy of the store in a forked child raises :class:`~obsmem.errors.InvalidInputError`."""

    _closed: bool
    _pid: int
    _what: str

    def _note_process(self, what: str) -> None:
        """Called in ``__init__``: the process whose thread and connection these are."""
        self._pid = os.getpid()
        self._what = what

    def _forked(self) -> bool:
        return os.getpid() != self._pid

    def _check_process(self) -> None:
        if self._forked():
            raise InvalidInputError(
                f"This knowledge store ({self._what}) was opened in process {self._pid}, and this process "
                f"({os.getpid()}) was forked from it: its worker thread and its connection do not survive "
                "a fork. Open a new Knowledge (or store) in the child, after the fork (e.g. in gunicorn's "
                "post_fork hook, or with multiprocessing's 'spawn' start method)."
            )

    async def _on_thread(self, fn: Callable[..., T], *args: Any) -> T:
        self._check_process()
        return await super()._on_thread(fn, *args)  # type: ignore[misc, no-any-return]

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        self._check_process()
        return super()._submit(fn, *args)  # type: ignore[misc, no-any-return]

    async def close(self) -> None:
        """In a forked child only mark this copy closed: the thread, the connection and the file
        are the parent's."""
        if self._forked():
            self._closed = True
            return
        await super().close()  # type: ignore[misc]
