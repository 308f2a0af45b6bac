"""The PostgreSQL store: obsmem shared by many processes on many machines.

``open_store("postgresql://user@host/db")`` builds it (needs ``pip install 'obsmem[postgres]'``).

Design choices, and why:

* **Concurrency only through the database.** There is no lock in this process. Observation
  records are written by one-statement compare-and-set (``UPDATE … WHERE version = expected``;
  see :mod:`obsmem.storage.postgres.records`), so ``expected_version`` holds across processes,
  a lost race shows up as ``stale``, and no row lock is held while this process runs other
  coroutines. Leases serialise on ``pg_advisory_xact_lock`` for their key; the work queue is
  claimed with ``FOR UPDATE SKIP LOCKED``, so claimers never wait on each other.
* **Seq is commit order within a thread.** A sequence alone would let a message that took seq 10
  commit after one that took 11; a reader that saw 11 would move a cursor past 10 and never
  observe it. ``save_messages`` therefore inserts with one statement that first locks the
  thread's row (``FOR NO KEY UPDATE``) and only then draws seqs: writers of one thread queue,
  writers of different threads do not.
* **Read committed plus retries.** Transactions run at PostgreSQL's default isolation. A
  serialisation failure, a deadlock or a unique-key race (two processes inserting the same id or
  the first head of a lineage at once) rolls the transaction back; it is retried a few times
  from the start, where the re-read sees the winner and answers as the contract says.
* **A connection pool** (psycopg_pool), opened on first use, which is also when pending schema
  migrations run (``postgres_migrations``; safe when many processes start at once).
* **JSON documents** next to query columns (see :mod:`obsmem.storage.postgres.migrations`).
* **Errors are translated at the boundary**: callers only ever see obsmem errors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import BaseModel, ValidationError

from obsmem.errors import (
    ConfigError,
    InvalidInputError,
    MessageNotFoundError,
    MigrationError,
    ObsmemError,
    StorageError,
    StoreClosedError,
    ThreadChangedError,
    ThreadNotFoundError,
)
from obsmem.calls import ModelCall, UsageRow
from obsmem.redact import redact_secrets
from obsmem.storage import ledger, paging
from obsmem.storage.decoded import LONG_ROW_CHARS, DecodedMessages, LongRows
from obsmem.storage.forgetting import forgotten_ids
from obsmem.storage.postgres import leases as postgres_leases
from obsmem.storage.migrations import MIGRATE_MODES, migrate_mode
from obsmem.storage.postgres import migrations as postgres_migrations
from obsmem.storage.postgres import records as postgres_records
from obsmem.storage.postgres import work as postgres_work
from obsmem.storage.contract import (
    ClosingContext,
    DeadWork,
    Lease,
    LeaseCounts,
    ObservationRecord,
    SECTION_NEEDLE,
    ThreadPage,
    WindowMark,
    WorkCounts,
    WorkItem,
    WriteResult,
    check_page_limit,
    lineage_key,
    same_message,
    MAX_FORGOTTEN_IDS,
    saves_forgotten,
)
from obsmem.storage.rules import (
    check_limit,
    check_lineage,
    check_successor,
    check_message_owner,
    check_storable,
    claim_expiry,
    lease_expiry,
    merge_parts,
    receipt_threads,
    without_receipt_threads,
    work_available_at,
)
from obsmem.types import DataPart, Message, Thread, long_texts

__all__ = [
    "MIGRATE_MODES", "PostgresStore", "migrate_database", "migrate_mode", "pending_migrations", "redact_url",
]

T = TypeVar("T")
logger = logging.getLogger(__name__)
ModelT = TypeVar("ModelT", bound=BaseModel)
Conn = psycopg.AsyncConnection[Any]

RETRIES = 8
# A pooled connection idle longer than this is checked (an empty query) before use; one used more
# recently is handed out as it is. A connection that still turns out dead fails its statement with
# a lost-connection error, and _run then checks the whole pool and retries.
CHECK_IDLE_S = 1.0
#: The shortest first wait for a pooled connection, whatever ``retry_s`` is left (see ``_run``).
POOL_WAIT_MIN_S = 1.0
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected, pg_errors.UniqueViolation)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MESSAGE_SELECT = (
    "SELECT m.seq, m.thread_id, t.resource_id, m.doc FROM messages AS m JOIN threads AS t ON t.id = m.thread_id"
)
# A thread's messages with after < seq <= last: the bounds are row comparisons on (thread_id, seq),
# not ``thread_id = %s``, so that only the messages_by_thread index can serve them, in order and
# from the first wanted row. With an equality the planner may instead walk messages_pkey (seq)
# and filter out other threads' messages whenever the thread holds more than a few percent of
# the table (it assumes the thread's rows are spread evenly over seq): the newest 10 messages
# of a thread whose messages are older than the others' then read every newer message. Only
# messages_by_thread gives rows in (thread_id, seq) order, which ORDER BY asks for below.
_THREAD_MESSAGES = (
    "SELECT m.seq, m.thread_id, t.resource_id, m.doc FROM threads AS t, messages AS m "
    "WHERE t.id = %(thread)s AND (m.thread_id, m.seq) > (%(thread)s, %(after)s) "
    "AND (m.thread_id, m.seq) <= (%(thread)s, %(last)s)"
)
_SEQ_MIN, _SEQ_MAX = -(2**63), 2**63 - 1  # bigint: the type of seq, and of a bound an index of seq takes
# The ordering guard of save_messages: the thread's newest message after a seq that calls or
# answers a tool. Row-comparison bounds, as _THREAD_MESSAGES, and for the same reason: with
# ``thread_id = %s AND seq > %s`` the generic plan of the prepared statement (a busy connection's)
# walked messages_pkey from the newest message of the store down to the bound, so a turn on a
# thread whose last message was old read every message written since, in every thread.
_NEWER_TOOL_MESSAGE = (
    "SELECT seq FROM messages WHERE (thread_id, seq) > (%(thread)s, %(after)s) "
    f"AND (thread_id, seq) <= (%(thread)s, {_SEQ_MAX}) AND strpos(doc, %(needle)s) > 0 "
    "ORDER BY thread_id DESC, seq DESC LIMIT 1"
)
# list_resource_messages_after: the named threads (ids and cursors, two arrays) from their cursor
# on, then the resource's other threads whole; each part a range of messages_by_thread per thread
# (row-comparison bounds, as in _THREAD_MESSAGES), so nothing at or below a cursor is read.
_RESOURCE_MESSAGES_AFTER = (
    "SELECT m.seq, m.thread_id, t.resource_id, m.doc "
    "FROM unnest(%(ids)s::text[], %(after)s::bigint[]) AS c (thread_id, after) "
    "JOIN threads AS t ON t.id = c.thread_id "
    "JOIN messages AS m ON (m.thread_id, m.seq) > (c.thread_id, c.after) "
    f"AND (m.thread_id, m.seq) <= (c.thread_id, {_SEQ_MAX}) "
    "WHERE t.resource_id = %(resource)s AND t.id IS DISTINCT FROM %(exclude)s "
    "UNION ALL "
    "SELECT m.seq, m.thread_id, t.resource_id, m.doc FROM threads AS t "
    f"JOIN messages AS m ON (m.thread_id, m.seq) > (t.id, {_SEQ_MIN}) AND (m.thread_id, m.seq) <= (t.id, {_SEQ_MAX}) "
    "WHERE t.resource_id = %(resource)s AND t.id IS DISTINCT FROM %(exclude)s "
    "AND NOT (t.id = ANY (%(ids)s::text[])) "
    "ORDER BY 1"
)
# read_window in one statement (one snapshot, one round trip): row kind 0 is the live head
# (version, superseded_by, doc), kind 1 a message after the head's cursor for the thread (the
# _MESSAGE_SELECT columns, bounded as in _THREAD_MESSAGES), kind 2 says the thread exists. The
# cursor is read from the head's document by the server, as ObservationRecord.cursor reads it
# (threads -> id -> cursor, else 0).
_WINDOW_SELECT = (
    "WITH head AS (SELECT version, superseded_by, doc FROM observation_records "
    "  WHERE lineage = %(lineage)s AND superseded_by IS NULL) "
    "SELECT 0 AS kind, NULL::bigint AS seq, NULL::text, NULL::text, version, superseded_by, doc FROM head "
    "UNION ALL "
    "SELECT 1, m.seq, m.thread_id, t.resource_id, NULL, NULL, m.doc FROM threads AS t, messages AS m "
    "WHERE t.id = %(thread)s AND (m.thread_id, m.seq) > (%(thread)s, COALESCE("
    "  (SELECT (doc::json -> 'threads' -> %(thread)s ->> 'cursor')::bigint FROM head), 0)) "
    f"AND (m.thread_id, m.seq) <= (%(thread)s, {_SEQ_MAX}) "
    "UNION ALL "
    "SELECT 2, NULL, NULL, NULL, NULL, NULL, NULL FROM threads WHERE id = %(thread)s "
    "ORDER BY kind, seq"
)


# -- row mapping ----------------------------------------------------------------------------------


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _doc(model: BaseModel, *, exclude: set[str] | None = None) -> str:
    return json.dumps(model.model_dump(mode="json", exclude=exclude))


_TABLES = {"Thread": "threads", "Message": "messages"}


def _load(cls: type[ModelT], doc: str, **columns: Any) -> ModelT:
    try:
        return cls.model_validate({**json.loads(doc), **columns})
    except (ValidationError, TypeError, ValueError) as exc:  # a corrupted or hand-edited doc column
        known = ", ".join(f"{name} {value!r}" for name, value in columns.items() if name != "resource_id")
        where = f"table {_TABLES.get(cls.__name__, cls.__name__)}" + (f", row with {known}" if known else "")
        raise StorageError(f"A stored {cls.__name__} row could not be decoded ({where}): {exc}") from exc


def _message(row: Sequence[Any]) -> Message:
    seq, thread_id, resource_id, doc = row
    return _load(Message, doc, seq=seq, thread_id=thread_id, resource_id=resource_id)


def _seq_bounds(after_seq: int, before_seq: int | None) -> tuple[int, int]:
    """``after_seq < seq < before_seq`` as ``after < seq <= last`` within a bigint's range: a bound
    beyond it selects what it did (seqs are positive bigints) and stays a bigint, so the index
    takes it (a larger integer goes to the server as ``numeric``, which no index of seq takes)."""
    last = _SEQ_MAX if before_seq is None else before_seq - 1
    return min(max(after_seq, _SEQ_MIN), _SEQ_MAX), min(max(last, _SEQ_MIN), _SEQ_MAX)


def _check_page(limit: int | None, offset: int) -> None:
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidInputError("limit and offset must not be negative.")


# -- the adapter ----------------------------------------------------------------------------------


class PostgresStore(ClosingContext):
    """A :class:`~obsmem.storage.contract.Store` in a PostgreSQL database.

    Constructing it does no I/O. The first operation opens the pool (``min_size`` to
    ``max_size`` connections) and, by ``migrate``, brings the schema up to date: ``"auto"``
    (or True, the default) applies pending migrations, ``"check"`` only reads them and raises
    :class:`~obsmem.errors.MigrationError` naming them when the schema is behind (so the
    application's database user needs no DDL rights; run ``obsmem migrate``), ``"never"`` (or
    False) does neither. An unreachable server or a schema written by a newer obsmem surfaces
    as :class:`~obsmem.errors.StorageError` / :class:`~obsmem.errors.MigrationError` from that
    first call.

    Operating it: every pooled connection is checked before use (a connection the server
    dropped in a restart is replaced, not handed out); a lost connection or an unreachable
    server is retried with backoff for up to ``retry_s`` seconds (never a write whose commit may
    have happened); each session gets ``statement_timeout_s`` and ``lock_timeout_s`` (None: the
    server's setting), so a locked table fails a call in seconds instead of hanging it, and a
    transaction idle for longer than ``statement_timeout_s`` is ended (see ``_configure``); errors
    name their cause (the server is unreachable, a timeout, the pool is exhausted).
    """

    url: str

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 10, connect_timeout_s: float = 15.0,
        migrate: bool | str = True, statement_timeout_s: float | None = 30.0, lock_timeout_s: float | None = 10.0,
        retry_s: float = 10.0,
    ) -> None:
        self.url = url
        self.min_size = _whole("min_size", min_size, minimum=0)
        self.max_size = _whole("max_size", max_size, minimum=max(1, self.min_size))
        self.connect_timeout_s = _seconds("connect_timeout_s", connect_timeout_s)
        self.migrate_mode = migrate_mode(migrate)
        self.migrate_on_open = self.migrate_mode == "auto"
        self.statement_timeout_s = None if statement_timeout_s is None else _seconds("statement_timeout_s",
                                                                                     statement_timeout_s)
        self.lock_timeout_s = None if lock_timeout_s is None else _seconds("lock_timeout_s", lock_timeout_s)
        self.retry_s = _seconds("retry_s", retry_s, allow_zero=True)
        self._pool: AsyncConnectionPool[Conn] | None = None
        self.check_idle_s = CHECK_IDLE_S  # see _check
        self._used: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()
        self._decoded = DecodedMessages()
        self._long_rows = LongRows()
        self._opening: asyncio.Future[AsyncConnectionPool[Conn]] | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self.url)!r})"

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        pool = self._pool
        if pool is None and self._opening is not None:
            try:
                pool = await self._opening
            except ObsmemError:  # the open failed: there is nothing to close
                pool = None
        if pool is not None:
            await pool.close()

    # -- plumbing ---------------------------------------------------------------------------------
    async def _connections(self) -> AsyncConnectionPool[Conn]:
        if self._closed:
            raise StoreClosedError()
        if self._pool is not None:
            return self._pool
        if self._opening is None:  # the first caller opens; concurrent first callers await it
            self._opening = asyncio.ensure_future(self._open())
        try:
            return await asyncio.shield(self._opening)
        except BaseException:
            if self._opening.done() and self._opening.exception() is not None:
                self._opening = None  # a failed open is retried by the next call
            raise

    async def _open(self) -> AsyncConnectionPool[Conn]:
        where = redact_url(self.url)
        if self.migrate_mode == "auto":
            await asyncio.to_thread(migrate_database, self.url, self.connect_timeout_s, idle_s=self.statement_timeout_s)
        elif self.migrate_mode == "check":
            behind = await asyncio.to_thread(pending_migrations, self.url, self.connect_timeout_s)
            if behind:
                raise MigrationError(
                    f"The PostgreSQL schema at {where} is behind this obsmem: {len(behind)} migration(s) "
                    f"pending ({', '.join(behind)}). Run: obsmem migrate --store URL (as a user with DDL "
                    "rights), or open the store with migrate='auto'."
                )
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self.url, min_size=self.min_size, max_size=self.max_size, open=False,
            kwargs={"autocommit": True}, timeout=self.connect_timeout_s, name="obsmem",
            configure=self._configure, check=self._check,
            reconnect_timeout=max(60.0, self.retry_s),
        )
        try:
            await pool.open(wait=True, timeout=self.connect_timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise StorageError(
                f"Cannot connect to PostgreSQL at {where}: {exc}. Check that the server is running "
                "and the URL (host, port, user, database) is right."
            ) from exc
        self._pool = pool
        return pool

    async def _check(self, conn: Conn) -> None:
        """Before a pooled connection is handed out: one idle for ``check_idle_s`` or more (or
        never used) is checked with an empty query, so one the server dropped in a restart is
        replaced; a busy process reuses its connections within milliseconds and skips the round
        trip (one per store call otherwise). One that died meanwhile fails its statement, and
        ``_run`` checks the pool and retries."""
        used = self._used.get(conn)
        if used is None or time.monotonic() - used >= self.check_idle_s:
            await AsyncConnectionPool.check_connection(conn)

    async def _configure(self, conn: Conn) -> None:
        """Each new session: the statement and lock timeouts (autocommit, so they persist).

        A transaction left idle longer than ``statement_timeout_s`` is ended by the server too
        (``idle_in_transaction_session_timeout``): a process that stops between two statements
        of a transaction (a blocked event loop, SIGSTOP, a paused VM) would otherwise hold its
        row locks, a thread's among them, for as long as it stands still, and every other
        process's write to that thread would fail with lock_timeout until then. Its connection
        is then lost before COMMIT, so its call is retried from the start when it goes on."""
        timeouts = (("statement_timeout", self.statement_timeout_s), ("lock_timeout", self.lock_timeout_s),
                    ("idle_in_transaction_session_timeout", self.statement_timeout_s))
        for name, seconds in timeouts:
            if seconds is not None:
                await conn.execute(f"SET {name} = {int(seconds * 1000)}")

    async def _run(self, fn: Callable[[Conn], Awaitable[T]], *, transaction: bool = True) -> T:
        """Run ``fn`` on a pooled connection (in one transaction unless ``transaction=False``);
        retry the whole of it after a lost race, and after a lost connection or an unreachable
        server (with backoff, for up to ``retry_s``), unless the connection went during COMMIT.

        A statement cut off by a lost connection is rolled back by the server; the one case
        where it may have been applied, a reply lost after the commit, is safe to repeat for
        the single-statement (autocommit) writes: each is a compare-and-set or fenced by a
        token, so a repeat answers "stale" / False, as after a lost race; a repeated enqueue
        coalesces with the item the first one wrote, and a repeated claim claims the next item
        while the first, never answered, expires and is taken over (as when a worker dies). A
        multi-statement transaction whose COMMIT was cut off is not repeated: that error says so.

        The first lost connection of a call checks every idle pooled connection (replacing the
        dead: a server restart kills them all) and retries at once; later ones back off.

        The wait for a pooled connection is bounded by what is left of ``retry_s`` (at least
        ``POOL_WAIT_MIN_S``): a server that refuses connections fails the call then, not after
        the pool's ``connect_timeout_s``. When that wait runs out while the server answers, the
        pool is only busy, and the call waits on for the rest of ``connect_timeout_s``."""
        where = redact_url(self.url)
        delay = 0.005
        conflicts = 0
        reconnect_delay = 0.05
        checked = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_s
        busy_until: float | None = None  # set once the server answered a pool wait that ran out
        while True:
            pool = await self._connections()
            committing = False
            now = loop.time()
            if busy_until is not None:
                wait = max(busy_until - now, 0.001)
            else:
                wait = min(self.connect_timeout_s, max(deadline - now, POOL_WAIT_MIN_S))
            try:
                async with pool.connection(timeout=wait) as conn:
                    busy_until = None  # a retry after this one waits for the pool afresh
                    if not transaction:
                        result = await fn(conn)
                    else:
                        async with conn.transaction():
                            result = await fn(conn)
                            committing = True
                    self._used[conn] = time.monotonic()
                    return result
            except ObsmemError:
                raise
            except _RETRYABLE as exc:
                conflicts += 1
                if conflicts == RETRIES:
                    raise StorageError(f"PostgreSQL store {where} kept conflicting: {exc}") from exc
                await asyncio.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.2)
            except (pg_errors.QueryCanceled, pg_errors.LockNotAvailable) as exc:
                raise StorageError(self._timeout_message(exc)) from exc
            except (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError, psycopg.InternalError) as exc:
                if not isinstance(exc, PoolTimeout) and not _connection_lost(exc):
                    raise StorageError(f"PostgreSQL store {where} failed: {exc}") from exc
                if committing:  # the connection went during COMMIT: the transaction may have been applied
                    raise StorageError(
                        f"The connection to PostgreSQL at {where} was lost while committing; the write may "
                        f"or may not have been applied: {exc}"
                    ) from exc
                if isinstance(exc, PoolTimeout) and busy_until is None and wait < self.connect_timeout_s:
                    unreachable = await self._probe()
                    if unreachable is None:  # the server answers: the pool is busy, wait for it
                        busy_until = now + self.connect_timeout_s
                        continue
                    if loop.time() + reconnect_delay > deadline:
                        raise StorageError(self._unreachable_message(unreachable)) from exc
                if not isinstance(exc, PoolTimeout) and not checked:
                    # A pooled connection the server dropped (a restart): check the idle ones,
                    # replacing the dead, and retry at once.
                    checked = True
                    await pool.check()
                    continue
                now = asyncio.get_running_loop().time()
                if now + reconnect_delay > deadline:
                    raise StorageError(await self._unavailable_message(exc)) from exc
                logger.debug("obsmem: PostgreSQL at %s unavailable (%s); retrying in %.2fs",
                             where, redact_secrets(exc), reconnect_delay)
                await asyncio.sleep(reconnect_delay * (1 + random.random() / 2))
                reconnect_delay = min(reconnect_delay * 2, 2.0)
            except psycopg.Error as exc:
                raise StorageError(f"PostgreSQL store {where} failed: {exc}") from exc

    def _timeout_message(self, exc: psycopg.Error) -> str:
        where = redact_url(self.url)
        if isinstance(exc, pg_errors.LockNotAvailable):
            return (f"PostgreSQL at {where}: a lock was not granted within lock_timeout "
                    f"({self.lock_timeout_s}s; another session holds it): {exc}")  # fmt: skip
        return (f"PostgreSQL at {where}: a statement was cancelled (statement_timeout {self.statement_timeout_s}s, "
                f"or an administrator): {exc}")  # fmt: skip

    async def _probe(self) -> psycopg.Error | None:
        """Connect once outside the pool: the server's refusal, or None when it answers."""
        try:
            probe = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(min(self.connect_timeout_s, 5)))
            )
        except psycopg.Error as cause:
            return cause
        await probe.close()
        return None

    def _unreachable_message(self, cause: psycopg.Error) -> str:
        return (f"Cannot reach PostgreSQL at {redact_url(self.url)} (retried for {self.retry_s:g}s): "
                f"{redact_secrets(cause)}. Check that the server is running and reachable.")

    async def _unavailable_message(self, exc: BaseException) -> str:
        """Why no connection: the server cannot be reached (its own error), or the pool is full."""
        where = redact_url(self.url)
        cause = await self._probe()
        if cause is not None:
            return self._unreachable_message(cause)
        if isinstance(exc, PoolTimeout):
            return (f"No PostgreSQL connection became free within {self.connect_timeout_s}s ({where}): all "
                    f"{self.max_size} pooled connections are busy; raise max_size (pool_max_size) or the "
                    "server's max_connections.")  # fmt: skip
        return f"The connection to PostgreSQL at {where} kept failing (retried for {self.retry_s:g}s): {exc}"

    async def _read(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        # Reads run in autocommit: one statement is atomic by itself, and skipping BEGIN/COMMIT
        # saves two round trips on the calls an agent makes most. A read that needs a second
        # statement (did the thread exist?) asks it only when the first came back empty.
        return await self._run(fn, transaction=False)

    # -- schema -----------------------------------------------------------------------------------
    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Apply (or, with ``dry_run``, list) the pending migrations, on a connection of its own."""
        if self._closed:
            raise StoreClosedError()
        if dry_run:
            return await asyncio.to_thread(pending_migrations, self.url, self.connect_timeout_s)
        return await asyncio.to_thread(migrate_database, self.url, self.connect_timeout_s, idle_s=self.statement_timeout_s)

    # -- threads ----------------------------------------------------------------------------------
    @staticmethod
    async def _get_thread(conn: Conn, thread_id: str, lock: str = "") -> Thread | None:
        cur = await conn.execute(f"SELECT version, doc FROM threads WHERE id = %s {lock}", (thread_id,))
        row = await cur.fetchone()
        return _load(Thread, row[1], version=row[0]) if row else None

    @classmethod
    async def _require_thread(cls, conn: Conn, thread_id: str, lock: str = "") -> Thread:
        thread = await cls._get_thread(conn, thread_id, lock)
        if thread is None:
            raise ThreadNotFoundError(thread_id)
        return thread

    async def create_thread(self, thread: Thread) -> Thread:
        check_storable(thread)

        async def op(conn: Conn) -> Thread:
            await conn.execute(
                "INSERT INTO threads (id, resource_id, created_us, version, doc) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (thread.id, thread.resource_id, _micros(thread.created_at), thread.version, _doc(thread)),
            )
            return await self._require_thread(conn, thread.id)

        return await self._run(op)

    async def get_thread(self, thread_id: str) -> Thread | None:
        return await self._read(lambda conn: self._get_thread(conn, thread_id))

    async def list_threads(
        self, resource_id: str, *, limit: int = 100, offset: int = 0, after: str | None = None,
        since: datetime | None = None, newest_first: bool = False, before: str | None = None,
    ) -> list[Thread]:
        _check_page(limit, offset)
        if newest_first or before is not None:
            mark = paging.newest_arguments(newest_first, since, before)
            return await self._read(lambda conn: self._newest_page(conn, resource_id, limit, offset, after, mark))
        since_us = None if since is None else _micros(since)
        return await self._read(
            lambda conn: self._thread_page(conn, resource_id, limit, offset, after, since_us)
        )

    async def list_all_threads(
        self, *, limit: int = 100, offset: int = 0, after: str | None = None, since: datetime | None = None
    ) -> list[Thread]:
        _check_page(limit, offset)
        since_us = None if since is None else _micros(since)
        return await self._read(lambda conn: self._thread_page(conn, None, limit, offset, after, since_us))

    @classmethod
    async def _thread_page(
        cls, conn: Conn, resource_id: str | None, limit: int, offset: int, after: str | None,
        since_us: int | None,
    ) -> list[Thread]:
        """A page of threads (:func:`~obsmem.storage.paging.thread_page_sql`) in one statement; a
        second only when the page is empty, to tell the end of the listing from a missing cursor."""
        query = paging.thread_page_sql("%s", "version, doc", resource_id, after, limit, offset, since_us)
        cur = await conn.execute(*query)
        page = [_load(Thread, doc, version=version) for version, doc in await cur.fetchall()]
        if not page and after is not None:
            await cls._require_thread(conn, after)
        return page

    @classmethod
    async def _newest_page(
        cls, conn: Conn, resource_id: str, limit: int, offset: int, after: str | None, before: int | None
    ) -> ThreadPage:
        """A page of threads most recently active first (:func:`~obsmem.storage.paging.newest_page_sql`)."""
        query = paging.newest_page_sql("%s", "version, doc, activity", resource_id, after, before, limit, offset)
        cur = await conn.execute(*query)
        rows = await cur.fetchall()
        if not rows and after is not None:
            await cls._require_thread(conn, after)
        page = [_load(Thread, doc, version=version) for version, doc, _ in rows]
        return ThreadPage(page, [str(activity) for _, _, activity in rows])

    async def update_thread(self, thread: Thread, *, expected_version: int) -> Thread | None:
        check_storable(thread)

        async def op(conn: Conn) -> Thread | None:
            stored = await self._get_thread(conn, thread.id, "FOR NO KEY UPDATE")
            if stored is None or stored.version != expected_version:
                return None
            if thread.resource_id != stored.resource_id:
                raise InvalidInputError(
                    f"Thread '{thread.id}' belongs to resource '{stored.resource_id}'; "
                    "a thread cannot move to another resource."
                )
            updated = thread.model_copy(update={"version": expected_version + 1, "created_at": stored.created_at})
            await conn.execute(
                "UPDATE threads SET version = %s, doc = %s WHERE id = %s",
                (updated.version, _doc(updated), thread.id),
            )
            return updated

        return await self._run(op)

    def forget_cached(self) -> None:
        """Drop the messages this store keeps decoded (:class:`~obsmem.storage.decoded.DecodedMessages`,
        keyed by the rows' text): ``Memory`` calls it after a delete or a forget, so no copy of
        what went stays in this process."""
        self._decoded.clear()
        self._long_rows.clear()

    async def delete_thread(self, thread_id: str) -> bool:
        async def op(conn: Conn) -> bool:
            # One statement: its messages and its thread-scoped records go by ON DELETE CASCADE.
            cur = await conn.execute("DELETE FROM threads WHERE id = %s", (thread_id,))
            return cur.rowcount > 0

        return await self._run(op, transaction=False)

    # -- messages ---------------------------------------------------------------------------------
    def _message(self, row: Sequence[Any]) -> Message:
        """The message a ``_MESSAGE_SELECT`` row holds, decoded once per distinct content (a
        long row once per distinct document, what its long texts keep worked out then: see
        :class:`~obsmem.storage.decoded.LongRows`; :meth:`_messages` decodes it off the loop)."""
        doc = row[3]
        if len(doc) >= LONG_ROW_CHARS:
            columns = tuple(row[:3])
            kept = self._long_rows.get(columns, doc)
            if kept is None:
                kept = long_texts(_message(row))  # hashed and searched here, once
                self._long_rows.put(columns, doc, kept, json.dumps(kept.metadata))
            return kept
        key = tuple(row)
        message = self._decoded.get(key)
        if message is None:
            message = _message(row)
            self._decoded.put(key, message, json.dumps(message.metadata))
        return message

    async def _messages(self, rows: Sequence[Sequence[Any]]) -> list[Message]:
        """:meth:`_message` of each row; on a worker thread when one of them is a long row not
        decoded yet (a pasted log: its JSON, hash and reminder search are linear in its text),
        so the event loop does none of that work."""
        if any(len(row[3]) >= LONG_ROW_CHARS and not self._long_rows.holds(tuple(row[:3]), row[3]) for row in rows):
            return await asyncio.to_thread(lambda: [self._message(row) for row in rows])
        return [self._message(row) for row in rows]

    async def _select_messages(self, conn: Conn, ids: list[str]) -> dict[str, Message]:
        cur = await conn.execute(f"{_MESSAGE_SELECT} WHERE m.id = ANY(%s)", (list(dict.fromkeys(ids)),))
        return {m.id: m for m in await self._messages(await cur.fetchall())}

    async def save_messages(
        self, thread_id: str, messages: list[Message], *, after_seq: int | None = None
    ) -> list[Message]:
        """The save is one transaction: the thread's row is locked first and its forgotten ids
        read from it (see the contract); with ``after_seq`` (the ordering guard) its newer messages
        that call or answer a tool are looked for next (a statement of its own, so it sees every
        save that held the lock before; the document's text names a ``tool_call_id`` only for such
        parts, text quoting one is escaped); then the rows are written, new ones with one
        statement that locks the thread's row again before drawing their seqs (so seq follows
        commit order within the thread). Re-saved ids are updated in place. Inside
        :func:`~obsmem.storage.contract.rewriting` with no guard, that statement alone (committed
        at once; no lock held while this process does anything else)."""

        keep = saves_forgotten()

        async def guarded(conn: Conn) -> list[Message]:
            async with conn.transaction():
                thread = await self._require_thread(conn, thread_id, "FOR NO KEY UPDATE")
                if after_seq is not None:
                    cur = await conn.execute(_NEWER_TOOL_MESSAGE, {
                        "thread": thread_id, "after": _seq_bounds(after_seq, None)[0], "needle": '"tool_call_id": ',
                    })
                    row = await cur.fetchone()
                    if row is not None:  # a newer message that calls or answers a tool
                        raise ThreadChangedError(thread_id, after_seq, row[0])
                # The thread's forgotten ids, read from its row locked: a forget notes them there
                # (an update of the row) before it rewrites. Never stored again.
                forgotten = frozenset() if keep else forgotten_ids(thread)
                if len(forgotten) >= MAX_FORGOTTEN_IDS:  # the row's list is full: every id is in the table
                    forgotten = forgotten | await _forgotten_among(conn, thread_id, [m.id for m in messages])
                kept = [m for m in messages if m.id not in forgotten]
                # A reply's receipt names no thread deleted while it was made: the threads it names
                # are read locked (a delete of one waits for this save, then finds the reply).
                named = {t for m in kept for t in receipt_threads(m.metadata)} - {thread_id}
                if named:
                    cur = await conn.execute(
                        "SELECT id FROM threads WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE", (sorted(named),)
                    )
                    kept = without_receipt_threads(kept, named - {row[0] for row in await cur.fetchall()})
                return await op(conn, thread, kept)

        async def op(
            conn: Conn, thread: Thread | None = None, messages: list[Message] = messages
        ) -> list[Message]:
            if thread is None:
                thread = await self._require_thread(conn, thread_id)
            if not messages:
                return []
            check_storable(messages=messages)
            for message in messages:
                check_message_owner(message, thread)
            existing = await self._select_messages(conn, [m.id for m in messages])
            for message in messages:
                found = existing.get(message.id)
                if found is not None and found.thread_id != thread_id:
                    raise InvalidInputError(
                        f"Message '{message.id}' already belongs to another thread; "
                        f"it cannot also be saved into thread '{thread_id}'. Give it a new id."
                    )
            fresh: dict[str, Message] = {}
            for message in messages:  # the last copy of an id within the batch wins, at its first seq
                if message.id not in existing:
                    fresh.setdefault(message.id, message)
                    fresh[message.id] = fresh[message.id].model_copy(
                        update={"role": message.role, "parts": message.parts, "metadata": message.metadata}
                    )
            if len(fresh) == len(messages):
                return await self._write_messages(conn, thread, messages, fresh, existing)
            # The batch also rewrites stored messages: all of it commits together, or none.
            async with conn.transaction():
                return await self._write_messages(conn, thread, messages, fresh, existing)

        # A rewrite of obsmem's own (keep) with no ordering guard: one statement, committed at once.
        return await self._run(op if after_seq is None and keep else guarded, transaction=False)

    @staticmethod
    async def _write_messages(
        conn: Conn, thread: Thread, messages: list[Message], fresh: dict[str, Message], existing: dict[str, Message]
    ) -> list[Message]:
        exclude = {"seq", "thread_id", "resource_id"}
        thread_id = thread.id
        stored: dict[str, Message] = {}
        if fresh:
            order = list(fresh)
            cur = await conn.execute(
                "WITH thread AS (SELECT id FROM threads WHERE id = %s FOR NO KEY UPDATE), "
                "inserted AS (INSERT INTO messages (seq, id, thread_id, doc) "
                "SELECT nextval('messages_seq'), v.id, thread.id, v.doc FROM thread, "
                "unnest(%s::text[], %s::text[]) WITH ORDINALITY AS v (id, doc, n) ORDER BY v.n "
                "RETURNING seq, id), "
                # the thread's activity (the newest-first listing), in the insert's statement
                "active AS (UPDATE threads SET activity = nextval('thread_activity_seq') FROM thread "
                "WHERE threads.id = thread.id) "
                "SELECT seq, id FROM inserted",
                (thread_id, order, [_doc(fresh[i], exclude=exclude) for i in order]),
            )
            seqs = {row[1]: row[0] for row in await cur.fetchall()}
            if len(seqs) != len(order):
                raise ThreadNotFoundError(thread_id)  # deleted between our read and the insert
            for message_id in order:
                stored[message_id] = fresh[message_id].model_copy(
                    update={"seq": seqs[message_id], "thread_id": thread_id, "resource_id": thread.resource_id}
                )
        for message in messages:  # same id again: keep seq and created_at, replace the content
            found = existing.get(message.id)
            if found is None:
                continue
            updated = found.model_copy(
                update={"role": message.role, "parts": message.parts, "metadata": message.metadata}
            )
            await conn.execute(
                "UPDATE messages SET doc = %s WHERE id = %s", (_doc(updated, exclude=exclude), message.id)
            )
            stored[message.id] = updated
        return [stored[m.id] for m in messages]

    async def list_messages(
        self,
        thread_id: str,
        *,
        after_seq: int = 0,
        before_seq: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Message]:
        _check_page(limit, 0)
        after, last = _seq_bounds(after_seq, before_seq)
        params: dict[str, Any] = {"thread": thread_id, "after": after, "last": last, "limit": limit}
        order = " ORDER BY m.thread_id DESC, m.seq DESC" if newest_first else " ORDER BY m.thread_id, m.seq"
        sql = _THREAD_MESSAGES + order + (" LIMIT %(limit)s" if limit is not None else "")

        async def op(conn: Conn) -> list[Message]:
            cur = await conn.execute(sql, params)
            found = await self._messages(await cur.fetchall())
            if not found:
                await self._require_thread(conn, thread_id)
            return found

        return await self._read(op)

    async def list_resource_messages(self, resource_id: str, *, after_seq: int = 0) -> list[Message]:
        async def op(conn: Conn) -> list[Message]:
            cur = await conn.execute(
                f"{_MESSAGE_SELECT} WHERE t.resource_id = %s AND m.seq > %s ORDER BY m.seq", (resource_id, after_seq)
            )
            return await self._messages(await cur.fetchall())

        return await self._read(op)

    async def list_resource_messages_after(
        self, resource_id: str, cursors: Mapping[str, int], *, exclude_thread_id: str | None = None
    ) -> list[Message]:
        named = list(cursors)
        params = {
            "ids": named, "after": [int(cursors[t]) for t in named], "resource": resource_id,
            "exclude": exclude_thread_id,
        }

        async def op(conn: Conn) -> list[Message]:
            cur = await conn.execute(_RESOURCE_MESSAGES_AFTER, params)
            return await self._messages(await cur.fetchall())

        return await self._read(op)

    async def get_messages(self, message_ids: list[str]) -> list[Message]:
        async def op(conn: Conn) -> list[Message]:
            found = await self._select_messages(conn, message_ids)
            return sorted(found.values(), key=lambda m: m.seq or 0)

        return await self._read(op)

    async def add_message_parts(self, message_id: str, parts: list[DataPart]) -> Message:
        """Optimistic: merge into what was read, write only if the document is still that one."""
        return await self._run(lambda conn: self._add_parts(conn, message_id, parts), transaction=False)

    async def _add_parts(self, conn: Conn, message_id: str, parts: list[DataPart]) -> Message:
        for _ in range(20):
            cur = await conn.execute(
                "SELECT m.seq, m.thread_id, t.resource_id, m.doc FROM messages AS m "
                "JOIN threads AS t ON t.id = m.thread_id WHERE m.id = %s", (message_id,)
            )
            row = await cur.fetchone()
            if row is None:
                raise MessageNotFoundError(message_id)
            stored = (await self._messages([row]))[0]
            merged = merge_parts(stored.parts, parts)
            if len(merged) == len(stored.parts):
                return stored
            updated = stored.model_copy(update={"parts": merged})
            written = await conn.execute(
                "UPDATE messages SET doc = %s WHERE id = %s AND doc = %s",
                (_doc(updated, exclude={"seq", "thread_id", "resource_id"}), message_id, row[3]),
            )
            if written.rowcount == 1:
                return updated
        raise StorageError(f"Adding parts to message '{message_id}' kept losing races with other writers.")

    async def rewrite_message(self, message: Message, *, expected: Message) -> bool:
        """:func:`~obsmem.storage.contract.rewrite_message_if_unchanged`: the stored document is
        read and compared, and written only if it is still the one read (one statement, as
        :meth:`add_message_parts`)."""
        check_storable(messages=[message])

        async def op(conn: Conn) -> bool:
            cur = await conn.execute(
                "SELECT m.seq, m.thread_id, t.resource_id, m.doc FROM messages AS m "
                "JOIN threads AS t ON t.id = m.thread_id WHERE m.id = %s", (message.id,)
            )
            row = await cur.fetchone()
            if row is None:
                return False
            stored = (await self._messages([row]))[0]
            if not same_message(stored, expected):
                return False
            updated = stored.model_copy(
                update={"role": message.role, "parts": message.parts, "metadata": message.metadata}
            )
            written = await conn.execute(
                "UPDATE messages SET doc = %s WHERE id = %s AND doc = %s",
                (_doc(updated, exclude={"seq", "thread_id", "resource_id"}), message.id, row[3]),
            )
            return written.rowcount == 1

        return await self._run(op, transaction=False)

    async def delete_messages(self, message_ids: list[str]) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute("DELETE FROM messages WHERE id = ANY(%s)", (list(dict.fromkeys(message_ids)),))
            return cur.rowcount

        return await self._run(op, transaction=False)

    async def note_forgotten_ids(self, thread_id: str, ids: list[str]) -> None:
        """Keep ``ids`` as forgotten message ids of the thread, every one (see
        :func:`~obsmem.storage.contract.note_forgotten_ids`); they go with the thread."""
        async def op(conn: Conn) -> None:
            await self._require_thread(conn, thread_id, "FOR KEY SHARE")
            await conn.execute(
                "INSERT INTO forgotten_ids (thread_id, message_id) SELECT %s, unnest(%s::text[]) "
                "ON CONFLICT DO NOTHING",
                (thread_id, list(dict.fromkeys(ids))),
            )

        await self._run(op)

    async def list_forgotten_ids(self, thread_id: str) -> list[str]:
        """Every forgotten message id of the thread, in no particular order."""
        async def op(conn: Conn) -> list[str]:
            cur = await conn.execute("SELECT message_id FROM forgotten_ids WHERE thread_id = %s", (thread_id,))
            return [row[0] for row in await cur.fetchall()]

        return await self._read(op)

    async def forgotten_among(self, thread_id: str, ids: list[str]) -> frozenset[str]:
        """Which of ``ids`` the thread's forgotten message ids hold (reads those ids only)."""
        return await self._read(lambda conn: _forgotten_among(conn, thread_id, ids))

    async def count_messages(self, thread_id: str) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = %s", (thread_id,))
            row = await cur.fetchone()
            count = int(row[0]) if row else 0
            if count == 0:
                await self._require_thread(conn, thread_id)
            return count

        return await self._read(op)

    # -- observation records (SQL in postgres_records: one-statement compare-and-set) -------------
    async def get_head(self, lineage: str) -> ObservationRecord | None:
        return await self._read(lambda conn: postgres_records.head(conn, lineage))

    async def read_window(self, lineage: str, thread_id: str) -> tuple[ObservationRecord | None, list[Message]]:
        """:func:`~obsmem.storage.contract.read_window` in one statement: one snapshot and one
        round trip for the head, the messages after its cursor and whether the thread exists."""

        async def op(conn: Conn) -> tuple[ObservationRecord | None, list[Message]]:
            cur = await conn.execute(_WINDOW_SELECT, {"lineage": lineage, "thread": thread_id})
            head: ObservationRecord | None = None
            messages: list[Message] = []
            exists = False
            rows: list[tuple[Any, ...]] = []
            for kind, *row in await cur.fetchall():
                if kind == 0:
                    head = postgres_records.decode(row[3:])
                elif kind == 1:
                    rows.append((*row[:3], row[5]))
                else:
                    exists = True
            if not exists:
                raise ThreadNotFoundError(thread_id)
            messages = await self._messages(rows)
            return head, messages

        return await self._read(op)

    async def get_record(self, record_id: str) -> ObservationRecord | None:
        return await self._read(lambda conn: postgres_records.get(conn, record_id))

    async def list_generations(
        self, lineage: str, *, limit: int = 100, offset: int = 0
    ) -> list[ObservationRecord]:
        _check_page(limit, offset)
        return await self._read(lambda conn: postgres_records.list_generations(conn, lineage, limit, offset))

    async def create_record(self, record: ObservationRecord) -> WriteResult:
        check_lineage(record)
        return await self._run(lambda conn: postgres_records.create(conn, record), transaction=False)

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        return await self._run(
            lambda conn: postgres_records.update(conn, record, expected_version), transaction=False
        )

    async def update_record_marking(
        self, record: ObservationRecord, *, expected_version: int, message_id: str, parts: list[DataPart], lineage: str
    ) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
        """:func:`~obsmem.storage.contract.update_record_marking`: the compare-and-set and, when it
        applies, the parts on the message, in one transaction (the parts under a savepoint: a
        message gone, or parts that fail, never undo the record). No window marks (this store
        keeps none): the caller's kept window of that thread is read again."""

        async def op(conn: Conn) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
            return await self._marking(conn, await postgres_records.update(conn, record, expected_version),
                                       message_id, parts)  # fmt: skip

        return await self._run(op)

    async def create_generation_marking(
        self, current: ObservationRecord, successor: ObservationRecord, *, expected_version: int, message_id: str,
        parts: list[DataPart], lineage: str,
    ) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
        """:func:`~obsmem.storage.contract.create_generation_marking`: the new generation and, when
        it applies, the parts on the message, in one transaction (the parts under a savepoint, as
        :meth:`update_record_marking`)."""
        check_successor(current, successor)

        async def op(conn: Conn) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
            result = await postgres_records.create_generation(conn, current, successor, expected_version)
            return await self._marking(conn, result, message_id, parts)

        return await self._run(op)

    async def _marking(
        self, conn: Conn, result: WriteResult, message_id: str, parts: list[DataPart]
    ) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
        """After a head write (``result``) in ``conn``'s transaction: when it applied, ``parts`` on
        the message under a savepoint (a message gone, or parts that fail, never undo the write)."""
        if result.status != "applied":
            return result, None, None, None
        try:
            async with conn.transaction():  # a savepoint
                message = await self._add_parts(conn, message_id, parts)
        except (ObsmemError, psycopg.Error) as exc:
            if isinstance(exc, psycopg.OperationalError) or (
                conn.info.transaction_status != psycopg.pq.TransactionStatus.INTRANS
            ):
                raise  # the connection or the whole transaction failed: nothing is written
            if not isinstance(exc, MessageNotFoundError):
                logger.warning("obsmem: markers left out of a record write: %s", type(exc).__name__)
            return result, None, None, None
        return result, message, None, None

    async def create_generation(
        self, current: ObservationRecord, successor: ObservationRecord, *, expected_version: int
    ) -> WriteResult:
        check_successor(current, successor)
        return await self._run(
            lambda conn: postgres_records.create_generation(conn, current, successor, expected_version),
            transaction=False,
        )

    async def delete_lineage(self, lineage: str) -> int:
        return await self._run(lambda conn: postgres_records.delete_lineage(conn, lineage), transaction=False)

    async def rewrite_generation(
        self, record: ObservationRecord, *, expected: ObservationRecord | None = None
    ) -> bool:
        return await self._run(lambda conn: postgres_records.rewrite(conn, record, expected), transaction=False)

    # -- leases (SQL in postgres_leases) ----------------------------------------------------------
    async def acquire_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        expires_at = lease_expiry(key, owner, ttl_s, now)
        # Its own transaction, pipelined (two round trips; see postgres_leases.acquire).
        return await self._run(
            lambda conn: postgres_leases.acquire(conn, key, owner, now, expires_at), transaction=False
        )

    async def renew_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        expires_at = lease_expiry(key, owner, ttl_s, now)
        return await self._run(lambda conn: postgres_leases.renew(conn, key, owner, now, expires_at))

    async def release_lease(self, key: str, owner: str) -> bool:
        return await self._run(lambda conn: postgres_leases.release(conn, key, owner), transaction=False)

    async def get_lease(self, key: str) -> Lease | None:
        return await self._read(lambda conn: postgres_leases.get(conn, key))

    async def list_leases(self, prefix: str = "") -> list[Lease]:
        return await self._read(lambda conn: postgres_leases.list_by_prefix(conn, prefix))

    async def lease_page(self, prefix: str = "", *, limit: int, after_key: str | None = None) -> list[Lease]:
        """:func:`~obsmem.storage.contract.lease_page`: ``limit`` rows at most."""
        check_page_limit(limit)
        return await self._read(lambda conn: postgres_leases.page_by_prefix(conn, prefix, limit, after_key))

    async def count_leases(self, prefix: str = "", *, now: datetime) -> LeaseCounts:
        """:func:`~obsmem.storage.contract.count_leases`: counted in SQL."""
        return await self._read(lambda conn: postgres_leases.count_by_prefix(conn, prefix, now))

    # -- working memory ---------------------------------------------------------------------------
    async def get_working_memory(self, key: str) -> str | None:
        async def op(conn: Conn) -> str | None:
            cur = await conn.execute("SELECT text FROM working_memory WHERE key = %s", (key,))
            row = await cur.fetchone()
            return str(row[0]) if row else None

        return await self._read(op)

    async def set_working_memory(self, key: str, text: str) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO working_memory (key, text, updated_at) VALUES (%s, %s, now()) "
                "ON CONFLICT (key) DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at",
                (key, text),
            )

        await self._run(op)

    async def replace_working_memory(self, key: str, text: str | None, *, expected: str) -> bool:
        """:func:`~obsmem.storage.contract.replace_working_memory_if_unchanged`: one statement."""

        async def op(conn: Conn) -> bool:
            if text is None:
                cur = await conn.execute(
                    "DELETE FROM working_memory WHERE key = %s AND text = %s", (key, expected)
                )
            else:
                cur = await conn.execute(
                    "UPDATE working_memory SET text = %s, updated_at = now() WHERE key = %s AND text = %s",
                    (text, key, expected),
                )
            return cur.rowcount > 0

        return await self._run(op, transaction=False)

    async def delete_working_memory(self, key: str) -> bool:
        async def op(conn: Conn) -> bool:
            cur = await conn.execute("DELETE FROM working_memory WHERE key = %s", (key,))
            return cur.rowcount > 0

        return await self._run(op, transaction=False)

    # -- work queue (SQL in postgres_work) --------------------------------------------------------
    async def enqueue_work(
        self, kind: str, target: str, *, now: datetime, payload: dict[str, Any] | None = None,
        delay_s: float = 0.0,
    ) -> WorkItem:
        available_at = work_available_at(kind, target, now, delay_s)
        # One statement (insert or coalesce), atomic by itself: no BEGIN/COMMIT round trips.
        return await self._run(
            lambda conn: postgres_work.enqueue(conn, kind, target, now, available_at, payload), transaction=False
        )

    async def claim_work(
        self, owner: str, *, ttl_s: float, now: datetime, kinds: tuple[str, ...] | None = None, limit: int = 1
    ) -> list[WorkItem]:
        expires_at = claim_expiry(owner, ttl_s, now)
        check_limit(limit)
        # One statement (pick with SKIP LOCKED, then update), atomic by itself: no BEGIN/COMMIT.
        return await self._run(
            lambda conn: postgres_work.claim(conn, owner, now, expires_at, kinds, limit), transaction=False
        )

    async def renew_work(self, item: WorkItem, *, ttl_s: float, now: datetime) -> WorkItem | None:
        expires_at = claim_expiry(item.claimed_by or "", ttl_s, now)
        return await self._run(lambda conn: postgres_work.renew(conn, item, now, expires_at))

    async def complete_work(self, item: WorkItem) -> bool:
        return await self._run(lambda conn: postgres_work.complete(conn, item), transaction=False)

    async def release_work(
        self, item: WorkItem, *, now: datetime, delay_s: float = 0.0, error: str | None = None,
        count_attempt: bool = True,
    ) -> bool:
        available_at = work_available_at(item.kind, item.target, now, delay_s)
        return await self._run(lambda conn: postgres_work.release(conn, item, available_at, error, count_attempt))

    async def wake_work(self, kind: str, target: str, *, now: datetime) -> bool:
        now = work_available_at(kind, target, now, 0.0)  # checks the arguments
        # One statement, atomic by itself: no BEGIN/COMMIT round trips.
        return await self._run(lambda conn: postgres_work.wake(conn, kind, target, now), transaction=False)

    async def bury_work(self, item: WorkItem, *, now: datetime, error: str | None = None) -> bool:
        work_available_at(item.kind, item.target, now, 0.0)  # checks now
        return await self._run(lambda conn: postgres_work.bury(conn, item, now, error))

    async def list_dead_work(self, kind: str | None = None) -> list[DeadWork]:
        return await self._read(lambda conn: postgres_work.list_dead(conn, kind))

    async def dead_work_page(self, *, limit: int, before_id: int | None = None) -> list[DeadWork]:
        """:func:`~obsmem.storage.contract.dead_work_page`: ``limit`` rows at most."""
        check_page_limit(limit)
        return await self._read(lambda conn: postgres_work.dead_page(conn, limit, before_id))

    async def count_dead_work(self) -> int:
        """:func:`~obsmem.storage.contract.count_dead_work`: counted in SQL."""
        return await self._read(postgres_work.count_dead)

    async def retry_dead_work(self, dead_id: int, *, now: datetime) -> WorkItem | None:
        work_available_at("retry", str(dead_id), now, 0.0)  # checks now
        return await self._run(lambda conn: postgres_work.retry_dead(conn, dead_id, now))

    async def count_work(self, *, now: datetime) -> list[WorkCounts]:
        """:func:`~obsmem.storage.contract.count_work`: counted in SQL, one row per kind."""
        return await self._read(lambda conn: postgres_work.count_kinds(conn, now))

    async def has_work(self, kind: str) -> bool:
        """:func:`~obsmem.storage.contract.has_work`: one row at most."""
        return await self._read(lambda conn: postgres_work.has_kind(conn, kind))

    async def list_work(self, kind: str | None = None) -> list[WorkItem]:
        return await self._read(lambda conn: postgres_work.list_items(conn, kind))

    async def delete_work(self, target: str) -> int:
        async def op(conn: Conn) -> int:
            await conn.execute("DELETE FROM dead_work WHERE target = %s", (target,))
            cur = await conn.execute("DELETE FROM work_items WHERE target = %s", (target,))
            return cur.rowcount

        return await self._run(op)

    # -- cost ledger (SQL in obsmem.storage.ledger) ---------------------------------------------
    async def record_model_calls(self, calls: Sequence[ModelCall]) -> int:
        """One transaction (a ledger batch is never repeated after a cut-off COMMIT: see _run)."""
        rows = [ledger.insert_params(call) for call in calls]

        async def op(conn: Conn) -> int:
            async with conn.cursor() as cur:
                await cur.executemany(ledger.insert_sql("%s"), rows)
            return len(rows)

        return await self._run(op) if rows else 0

    async def usage_rows(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[UsageRow]:
        ledger.check_window(since, until)
        sql, params = ledger.usage_sql("%s", thread_id, resource_id, since, until)

        async def op(conn: Conn) -> list[UsageRow]:
            cur = await conn.execute(sql, params)
            return [ledger.usage_row(tuple(r)) for r in await cur.fetchall()]

        return await self._read(op)

    async def delete_model_calls(self, *, thread_id: str | None = None, resource_id: str | None = None) -> int:
        sql, params = ledger.delete_sql("%s", thread_id, resource_id)

        async def op(conn: Conn) -> int:
            cur = await conn.execute(sql, params)
            return cur.rowcount

        return await self._run(op, transaction=False)

    async def section_messages_page(self, thread_id: str, *, after_seq: int = 0, limit: int) -> list[Message]:
        """:func:`~obsmem.storage.contract.section_messages`: the thread's first ``limit`` messages
        after ``after_seq`` whose document holds a section tag, by seq (:meth:`_holding_page`)."""
        return await self._holding_page(thread_id, SECTION_NEEDLE, after_seq, limit)

    async def metadata_messages_page(
        self, thread_id: str, *, needle: str, after_seq: int = 0, limit: int
    ) -> list[Message]:
        """:func:`~obsmem.storage.contract.metadata_messages`: the thread's first ``limit``
        messages after ``after_seq`` whose document holds ``needle`` (anywhere: the caller checks
        the metadata), by seq (:meth:`_holding_page`)."""
        return await self._holding_page(thread_id, needle, after_seq, limit)

    async def _holding_page(self, thread_id: str, needle: str, after_seq: int, limit: int) -> list[Message]:
        """The thread's first ``limit`` messages after ``after_seq`` whose document holds
        ``needle``, by seq; a range of messages_by_thread from ``after_seq`` on (bounded as
        :meth:`list_messages`), only those rows handed out. Unknown thread → ThreadNotFoundError."""
        check_page_limit(limit)
        after, last = _seq_bounds(after_seq, None)
        params: dict[str, Any] = {
            "thread": thread_id, "after": after, "last": last, "limit": limit, "needle": needle,
        }
        sql = (
            _THREAD_MESSAGES + " AND strpos(m.doc, %(needle)s) > 0 ORDER BY m.thread_id, m.seq LIMIT %(limit)s"
        )

        async def op(conn: Conn) -> list[Message]:
            cur = await conn.execute(sql, params)
            found = await self._messages(await cur.fetchall())
            if not found:
                await self._require_thread(conn, thread_id)
            return found

        return await self._read(op)

    async def resource_orgs(self, resource_id: str) -> list[str | None]:
        """:func:`~obsmem.storage.contract.resource_orgs`: ``SELECT DISTINCT`` of the documents'
        ``org_id`` over the resource's range of threads_by_resource, in SQL; one row per org
        handed out. PostgreSQL's JSON functions refuse a document holding an escaped NUL (a
        thread's metadata, title or org may hold one): those rows, rare, are left out of it and
        their documents read here instead, :data:`_NUL_PAGE` at a time."""
        params: dict[str, Any] = {"resource": resource_id, "nul": _NUL_ESCAPE, "limit": _NUL_PAGE}
        distinct = (
            "SELECT DISTINCT doc::json ->> 'org_id' FROM threads "
            "WHERE resource_id = %(resource)s AND strpos(doc, %(nul)s) = 0"
        )
        with_nul = (
            "SELECT created_us, pk, doc FROM threads WHERE resource_id = %(resource)s "
            "AND (created_us, pk) > (%(created)s, %(pk)s) AND strpos(doc, %(nul)s) > 0 "
            "ORDER BY created_us, pk LIMIT %(limit)s"
        )

        async def op(conn: Conn) -> list[str | None]:
            cur = await conn.execute(distinct, params)
            orgs: set[str | None] = {row[0] for row in await cur.fetchall()}
            created, pk = -(2**63), -(2**63)
            while True:
                cur = await conn.execute(with_nul, {**params, "created": created, "pk": pk})
                rows = await cur.fetchall()
                orgs.update(_load(Thread, doc).org_id for _, _, doc in rows)
                if len(rows) < _NUL_PAGE:
                    return list(orgs)
                created, pk = rows[-1][0], rows[-1][1]

        return await self._read(op)

    async def resource_totals(self, resource_id: str, *, scope: str) -> tuple[int, int, int]:
        """:func:`~obsmem.storage.contract.resource_totals`: aggregates in SQL over the resource's
        range of threads_by_resource, each thread's messages counted from messages_by_thread and
        its head read from the one-head index (thread scope); one row of numbers handed out. A
        record's ``total_tokens_observed`` is read from its document with any escaped NUL replaced
        for the cast only (PostgreSQL's JSON functions refuse one; the number is not text)."""
        tokens = f"(replace(r.doc, '{_NUL_ESCAPE}', '\\ufffd')::json ->> 'total_tokens_observed')::bigint"
        own = (
            f"(SELECT {tokens} FROM observation_records r "
            "WHERE r.lineage = 'thread:' || t.id AND r.superseded_by IS NULL)"
        )
        sql = (
            "SELECT COUNT(*), "
            "COALESCE(SUM((SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id)), 0), "
            f"COALESCE(SUM({own if scope == 'thread' else 0}), 0) "
            "FROM threads t WHERE t.resource_id = %s"
        )
        shared = (
            f"SELECT {tokens} FROM observation_records r WHERE r.lineage = %s AND r.superseded_by IS NULL"
        )

        async def op(conn: Conn) -> tuple[int, int, int]:
            cur = await conn.execute(sql, (resource_id,))
            row = await cur.fetchone()
            threads, messages, observed = row if row else (0, 0, 0)
            if scope == "resource" and threads:
                cur = await conn.execute(shared, (lineage_key("resource", None, resource_id),))
                head = await cur.fetchone()
                observed = head[0] if head and head[0] is not None else 0
            return int(threads), int(messages), int(observed)

        return await self._read(op)



#: An escaped NUL as a stored document spells it (JSON text), which PostgreSQL's JSON functions
#: cannot turn into text; and how many such thread rows :meth:`PostgresStore.resource_orgs` reads a time.
_NUL_ESCAPE = "\\u0000"
_NUL_PAGE = 500

def migrate_database(url: str, connect_timeout_s: float = 15.0, *, idle_s: float | None = 30.0) -> list[str]:
    """Apply pending migrations to the database at ``url`` (blocking); returns what ran.

    Each step holds the migrations' lock in its transaction, and every process opening the
    database waits for it. ``idle_s`` (the store's ``statement_timeout_s``): the server ends this
    session's transaction once it is left idle that long, so a migrator that stops inside a step
    (SIGSTOP, a paused VM) holds no other process's start up beyond it (its step is rolled back and
    run again by the next migrator). A step's own statements (an index build) are not bounded."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(connect_timeout_s))) as conn:
            if idle_s is not None:  # (a SET, not libpq's options: those may come in the URL)
                conn.execute(f"SET idle_in_transaction_session_timeout = {int(idle_s * 1000)}")
            return postgres_migrations.migrate(conn)
    except psycopg.Error as exc:
        raise StorageError(
            f"Cannot migrate the PostgreSQL database at {redact_url(url)}: {exc}. Check that the server is "
            "running, the URL is right and the user may create tables."
        ) from exc


def pending_migrations(url: str, connect_timeout_s: float = 15.0) -> list[str]:
    """Names of the migrations the database at ``url`` still lacks (read-only, blocking)."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(connect_timeout_s))) as conn:
            return postgres_migrations.pending(conn)
    except psycopg.Error as exc:
        raise StorageError(f"Cannot read the migrations of {redact_url(url)}: {exc}") from exc


# The server ended the session: class 08, an administrator or a shutdown (57P01-57P03), an idle
# session (57P05), and a transaction left idle or open too long (25P03, 25P04: see _configure).
# Its open transaction, if any, was rolled back, never committed: the call is retried. (25P03 and
# 25P04 come as psycopg.InternalError, which _run catches for them; any other is not retried.)
_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03", "57P05", "25P03", "25P04")


async def _forgotten_among(conn: Conn, thread_id: str, ids: list[str]) -> frozenset[str]:
    cur = await conn.execute(
        "SELECT message_id FROM forgotten_ids WHERE thread_id = %s AND message_id = ANY(%s)",
        (thread_id, list(dict.fromkeys(ids))),
    )
    return frozenset(row[0] for row in await cur.fetchall())


def _connection_lost(exc: psycopg.Error) -> bool:
    """A lost or refused connection (worth retrying), as opposed to an error in the statement."""
    state = exc.sqlstate
    if state is None:  # raised by the client: the connection broke or could not be made
        return True
    return state.startswith(_CONNECTION_STATES[0]) or state in _CONNECTION_STATES[1:]




def _whole(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(name, f"got {value!r}", allowed=f"a whole number >= {minimum}")
    return value


def _seconds(name: str, value: object, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0 or (
        value == 0 and not allow_zero
    ):
        bound = " >= 0" if allow_zero else " > 0"
        raise ConfigError(name, f"got {value!r}", allowed=f"a finite number of seconds{bound}")
    return float(value)


def redact_url(url: str) -> str:
    """The URL without its password, for messages (:func:`obsmem.redact.redact_secrets`)."""
    return redact_secrets(url)
