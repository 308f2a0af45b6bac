"""Erased text out of a SQLite file's write-ahead log, not only out of its tables.

In WAL mode a commit appends the new version of every page it changed to the ``-wal`` file; the
database file gets them at the next checkpoint. After a hard delete (forgetting a value,
deleting a thread or a resource, purging knowledge) every read sees the new pages, but the log
still holds the *old* ones, with the erased text, until SQLite happens to overwrite them: a copy
of the files taken meanwhile shows it. (``PRAGMA secure_delete = ON``, set by both SQLite stores,
zeroes the freed space *inside* the pages that reach the database file.)

So an erase ends with :func:`truncate_wal`: ``PRAGMA wal_checkpoint(TRUNCATE)`` copies every
page to the database file and truncates the log to zero bytes. That needs every other
connection to be done with the log: a connection holding a read snapshot (a long read in
another process) keeps the log, and then the checkpoint reports busy. ``RESTART`` needs the
same, so it is no fallback; waiting longer would stall the store's worker thread and every call
queued behind it. The bound: :data:`TRIES` tries, each waiting at most :data:`WAIT_S` in
SQLite's busy handler, :data:`PAUSE_S` apart (under a second in all). When the log stays
pinned, the store keeps the truncation *pending* and retries it, without waiting, after each of
its later writes until one succeeds; until then the erased pages stay in the ``-wal`` file
(SQLite overwrites the log from its start once the readers move on, and closing the last
connection deletes it).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Final

__all__ = ["PAUSE_S", "TRIES", "WAIT_S", "LogTruncation", "truncate_wal"]

TRIES: Final = 3
WAIT_S: Final = 0.25  # the busy handler's wait within one try
PAUSE_S: Final = 0.05  # between tries


def truncate_wal(conn: sqlite3.Connection, *, busy_timeout_s: float, wait: bool = True) -> bool:
    """Checkpoint the whole log into the database file and truncate it to zero bytes; True when
    done, False when another connection kept it busy (see the module doc for the bound).

    ``conn`` must be outside a transaction; its busy timeout is set back to ``busy_timeout_s``.
    ``wait=False``: one try that never waits (the retry after a later write).
    """
    tries = TRIES if wait else 1
    conn.execute(f"PRAGMA busy_timeout = {int(WAIT_S * 1000) if wait else 0}")
    try:
        for attempt in range(tries):
            if attempt:
                time.sleep(PAUSE_S)
            try:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError as exc:  # "database is locked": another checkpoint
                if not _is_busy(exc):
                    raise
                continue
            if not busy:
                return True
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")


class LogTruncation:
    """A store's log truncation (on its connection's thread): :meth:`now` after an erase, and,
    while a reader kept the log, :meth:`after_write` retries it without waiting."""

    def __init__(self, busy_timeout_s: float) -> None:
        self.busy_timeout_s = busy_timeout_s
        self.pending = False

    def now(self, conn: sqlite3.Connection) -> bool:
        """:func:`truncate_wal`; False (and pending) when a reader kept the log."""
        self.pending = not truncate_wal(conn, busy_timeout_s=self.busy_timeout_s)
        return not self.pending

    def after_write(self, conn: sqlite3.Connection) -> None:
        """After a committed write: the pending truncation, one try that never waits."""
        if self.pending:
            try:
                self.pending = not truncate_wal(conn, busy_timeout_s=self.busy_timeout_s, wait=False)
            except sqlite3.Error:  # the write committed: report it so, and try again next time
                pass


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    text = str(exc).lower()
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in text or "busy" in text
