"""Erased text out of a SQLite file's write-ahead log and out of every page of the file, not only
out of its tables.

In WAL mode a commit appends the new version of every page it changed to the ``-wal`` file; the
database file gets them at the next checkpoint. After a hard delete (forgetting a value,
deleting a thread or a resource, purging knowledge) every read sees the new pages, but the log
still holds the *old* ones, with the erased text, until SQLite happens to overwrite them: a copy
of the files taken meanwhile shows it.

The pages themselves keep copies too. ``PRAGMA secure_delete = ON`` (set by both SQLite stores)
zeroes the space a delete or an update frees, but not everything: when a row grows (a message
saved again under its id, with more parts) and its page overflows, SQLite's b-tree balancing
moves cells to a sibling page and rebuilds the page *without* zeroing the space the moved cells
held. The live row is then in one page and a stale copy of it in the unused space of another
live leaf page, where no delete ever reaches: when that row is later erased, its live cell is
zeroed and the copy stays in the database file (found on ``messages`` leaf pages; any table's
pages can hold them, the knowledge store's too).

So an erase ends with :meth:`LogTruncation.now`:

1. :func:`rebuild` runs ``VACUUM``, which builds a fresh copy of the database from the live rows
   alone and writes every page of it back (through the log, in WAL mode): no page, gap,
   free-list or overflow page of the old file survives. Its cost is linear in the size of the
   file (it reads and writes every page, and needs temporary space about the file's size), on
   every erase: erasing is rare, and a hard delete that leaves a copy in the file is no delete.
   ``VACUUM`` keeps every ``INTEGER PRIMARY KEY`` (all obsmem tables have one, or a text key)
   and the ``AUTOINCREMENT`` counters.
2. :func:`truncate_wal`: ``PRAGMA wal_checkpoint(TRUNCATE)`` copies every page to the database
   file (shrinking it to the rebuilt size) and truncates the log to zero bytes.

``VACUUM`` takes the write lock like any write (a reader's snapshot does not stop it); the
checkpoint needs every other connection to be done with the log: a connection holding a read
snapshot (a long read in another process) keeps the log, and then the checkpoint reports busy.
``RESTART`` needs the same, so it is no fallback; waiting longer would stall the store's worker
thread and every call queued behind it. The bound, for each of the two steps: :data:`TRIES`
tries, each waiting at most :data:`WAIT_S` in SQLite's busy handler, :data:`PAUSE_S` apart
(under a second each). When a step cannot be done, the store keeps it *pending* and retries it
(the rebuild, then the truncation), without waiting, after each of its later writes until it
succeeds; until then the erased pages stay in the ``-wal`` file or the stale copies in the
database file (SQLite overwrites the log from its start once the readers move on, and closing
the last connection deletes it).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Final

__all__ = ["PAUSE_S", "TRIES", "WAIT_S", "LogTruncation", "rebuild", "truncate_wal"]

TRIES: Final = 3
WAIT_S: Final = 0.25  # the busy handler's wait within one try
PAUSE_S: Final = 0.05  # between tries


def truncate_wal(conn: sqlite3.Connection, *, busy_timeout_s: float, wait: bool = True) -> bool:
    """Checkpoint the whole log into the database file and truncate it to zero bytes; True when
    done, False when another connection kept it busy (see the module doc for the bound).

    ``conn`` must be outside a transaction; its busy timeout is set back to ``busy_timeout_s``.
    ``wait=False``: one try that never waits (the retry after a later write).
    """

    def checkpoint() -> bool:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return not busy

    return _bounded(conn, checkpoint, busy_timeout_s=busy_timeout_s, wait=wait)


def rebuild(conn: sqlite3.Connection, *, busy_timeout_s: float, wait: bool = True) -> bool:
    """``VACUUM``: every page of the database rebuilt from the live rows, so no stale copy of an
    erased row is left in the unused space of a page (see the module doc; linear in the size of
    the file). True when done, False when another writer kept the write lock (or a statement of
    this connection is still running); the same bound as :func:`truncate_wal`.

    ``conn`` must be outside a transaction; its busy timeout is set back to ``busy_timeout_s``.
    """

    def vacuum() -> bool:
        conn.execute("VACUUM")
        return True

    return _bounded(conn, vacuum, busy_timeout_s=busy_timeout_s, wait=wait)


def _bounded(
    conn: sqlite3.Connection, step: Callable[[], bool], *, busy_timeout_s: float, wait: bool
) -> bool:
    """``step`` tried :data:`TRIES` times (once, never waiting, without ``wait``); False when it
    stayed busy."""
    tries = TRIES if wait else 1
    conn.execute(f"PRAGMA busy_timeout = {int(WAIT_S * 1000) if wait else 0}")
    try:
        for attempt in range(tries):
            if attempt:
                time.sleep(PAUSE_S)
            try:
                if step():
                    return True
            except sqlite3.OperationalError as exc:  # "database is locked": another writer or checkpoint
                if not _is_busy(exc):
                    raise
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")


class LogTruncation:
    """A store's clean-up after an erase (on its connection's thread): :meth:`now` rebuilds the
    file and truncates its log, and, while a writer or a reader kept either step from running,
    :meth:`after_write` retries it without waiting."""

    def __init__(self, busy_timeout_s: float) -> None:
        self.busy_timeout_s = busy_timeout_s
        self.rebuild_pending = False
        self.pending = False

    def now(self, conn: sqlite3.Connection) -> bool:
        """:func:`rebuild`, then :func:`truncate_wal`; False (and pending) when another
        connection kept either from running."""
        self.rebuild_pending = not rebuild(conn, busy_timeout_s=self.busy_timeout_s)
        self.pending = not truncate_wal(conn, busy_timeout_s=self.busy_timeout_s)
        return not (self.rebuild_pending or self.pending)

    def after_write(self, conn: sqlite3.Connection) -> None:
        """After a committed write: the pending steps, one try each that never waits."""
        try:
            if self.rebuild_pending and rebuild(conn, busy_timeout_s=self.busy_timeout_s, wait=False):
                self.rebuild_pending = False
                self.pending = True  # the rebuilt pages are in the log: into the file with them
            if self.pending:
                self.pending = not truncate_wal(conn, busy_timeout_s=self.busy_timeout_s, wait=False)
        except sqlite3.Error:  # the write committed: report it so, and try again next time
            pass


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    text = str(exc).lower()
    return (
        code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
        or "locked" in text
        or "busy" in text
        or "statements in progress" in text  # VACUUM while a statement of this connection runs
    )
