"""Small reads on the caller's thread: a turn's hot reads without a thread hand-off.

Every SQLite call of a store runs on the store's worker thread (see the store's docstring), so
that nothing blocks the event loop. A hand-off to that thread and back costs little on an idle
machine, but it is two thread wake-ups, and on a loaded one each waits for a CPU: a turn's
reads (its thread, the window its context is built from, the application's instructions) paid more for the hand-offs than
for the reads. So the few reads a turn makes on every step may run where they are called,
when all of this holds — otherwise they go to the worker thread as before:

* **A read-only connection of their own** (``PRAGMA query_only``), opened on the worker thread
  after the store's own connection (so migrations ran first). In WAL mode a reader never waits
  for a writer, and with a busy timeout of 0 a read that would wait (a checkpoint restarting the
  log, a recovery) fails at once and goes to the worker thread: it never sleeps here.
* **Bounded work**: the reader refuses (``TooLarge``) a result above :data:`MAX_ROWS` rows or
  :data:`MAX_CHARS` stored characters, and the read goes to the worker thread; so a read done
  here decodes at most a window's worth of rows, whatever the thread holds.
* **Never waited for**: the connection is used by one caller at a time (a lock taken without
  blocking); a caller that finds it in use (another event loop's thread) goes to the worker.

Writes never run on this connection: a commit waits for the disk (fsync) and for other
writers. (A turn's save may write its rows on the caller's thread through the store's own
connection, never waiting either, and commit on another thread: ``SQLiteStore._save_here``.)
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["MAX_CHARS", "MAX_ROWS", "InlineReader", "TooLarge", "open_reader"]

T = TypeVar("T")

MAX_ROWS = 128  # rows one inline read may decode
MAX_CHARS = 512_000  # stored characters one inline read may decode

#: What :meth:`InlineReader.run` returns when the read did not run here.
MISS = object()


class TooLarge(Exception):
    """Raised by an inline read whose result is above the bounds: read it on the worker thread."""


def open_reader(path: str) -> sqlite3.Connection:
    """A read-only connection usable from any thread (one at a time), never waiting on a lock."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


class InlineReader:
    """The store's inline read connection (see the module docstring); empty until attached."""

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def attached(self) -> bool:
        return self._conn is not None

    def attach(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T | object:
        """``fn`` in one read transaction on this thread, or :data:`MISS` when it did not run here
        (no connection yet, in use, busy, too large, or an SQLite error: the worker thread then
        runs it and reports any real error). Errors ``fn`` raises on purpose (obsmem errors, such
        as an unknown thread) come out as they are."""
        conn = self._conn
        if conn is None or not self._lock.acquire(blocking=False):
            self.misses += 1
            return MISS
        try:
            if self._conn is None:  # closed meanwhile
                self.misses += 1
                return MISS
            conn.execute("BEGIN")
            try:
                result = fn(conn)
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
            self.hits += 1
            return result
        except (TooLarge, sqlite3.Error):
            self.misses += 1
            return MISS
        finally:
            self._lock.release()

    def in_use(self) -> bool:
        """Whether a read holds the connection now (in a forked child: held at the fork)."""
        return self._lock.locked()

    def detach(self) -> sqlite3.Connection | None:
        """Take the connection out without closing it (no read can use it afterwards)."""
        conn, self._conn = self._conn, None
        return conn

    def close(self) -> None:
        """Close the connection (waits for a read in progress, which is short by construction)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
