"""The SQLite store: obsmem's embedded default, one file shared safely by many processes.

Design choices, and why:

* **WAL mode** lets readers proceed while one writer commits, which is the shape of an agent:
  many reads of context, short writes at the end of a step. ``synchronous`` stays at SQLite's
  default (FULL): a committed message survives even a power cut, and writes are rare enough
  that the extra fsync does not matter.
* **Compare-and-set through the database, not through locks in this process.** Several engines,
  in one process or many, may open the same file. Every operation that reads a row and then
  writes depending on what it read runs inside ``BEGIN IMMEDIATE``: the transaction takes the
  database's write lock *before* the read, so no other connection (in any process) can commit
  between our read and our write. That is what makes ``expected_version`` checks hold across
  processes. A deferred ``BEGIN`` would not do: two readers could both read version 3 and the
  second writer would then fail with a busy error instead of seeing ``stale``.
* **busy_timeout plus a bounded retry.** Waiting writers queue inside SQLite for up to the busy
  timeout; if SQLite still answers ``SQLITE_BUSY``/"database is locked", the whole transaction
  (which was rolled back) is retried a few times with a short backoff, then reported as a
  :class:`~obsmem.errors.StorageError`: with the defaults, 5 tries of 10 s, about 51 s in all.
  Once the store is closing it is not tried again (:class:`~obsmem.errors.StoreClosedError`),
  so a close waits for one try at most.
* **One dedicated worker thread per store.** ``sqlite3`` calls block, so they must stay off the
  event loop. A single-thread executor owns the connection (it is created on that thread, and
  ``sqlite3`` enforces that only its thread uses it), and it serialises this store's
  operations, so two coroutines never share a half-finished transaction. A cancelled caller
  does not interrupt the worker: the operation still commits or rolls back as a whole. The
  one exception: the small reads a turn makes on every step (its thread, its window, its
  instructions) run where they are called, on a read-only connection that never waits and refuses large results
  (:mod:`obsmem.storage.sqlite.inline`); whatever it refuses goes to the worker thread. And a
  turn's save, when the worker thread is idle, writes its rows where it is called (the write
  lock taken without waiting, the same bounds) and hands only the commit, which waits for the
  disk, to a second thread (:meth:`SQLiteStore._save_here`); the worker's jobs wait for it.
* **Window marks** (:data:`~obsmem.storage.contract.WindowMark`): triggers give each thread a
  message revision, one more for every insert, update or delete of one of its messages, by any
  connection or program. With the thread's row key (never reused) and the live head's id and
  version it marks a thread's window; the
  engine keeps the window it read or wrote and reads one row to check it (:mod:`obsmem.om.windows`).
* **JSON columns** hold parts, metadata, per-thread states and buffered chunks; rows round-trip
  through ``model_dump(mode="json")`` and ``model_validate``, so what comes back equals what
  went in. Datetimes keep their UTC offset.
* **Hard deletes leave no bytes behind.** ``secure_delete`` zeroes the space a delete or an
  update frees, and after an erase (``Memory.forget``, ``delete_thread``, ``delete_resource``)
  :meth:`SQLiteStore.truncate_wal` rebuilds the file with ``VACUUM`` (SQLite's page balancing
  leaves stale copies of moved rows in the unused space of live pages, which no delete zeroes)
  and moves the log into the file and truncates it, so the erased text is left neither in the
  database file nor in the ``-wal`` file (:mod:`obsmem.storage.sqlite.wal`). The cost: every
  erase reads and writes the whole file (about 70 ms for a 5 MB file of 10,000 messages).
* **Errors are translated at the boundary**: callers only ever see obsmem errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

import platformdirs
from pydantic import BaseModel, ValidationError

from obsmem.errors import (
    MigrationError,
    InvalidInputError,
    MessageNotFoundError,
    ObsmemError,
    StorageError,
    StoreClosedError,
    ThreadChangedError,
    ThreadNotFoundError,
)
from obsmem.calls import ModelCall, UsageRow
from obsmem.files import prepare_database_file, untouched_reader
from obsmem.storage import ledger, migrations, paging
from obsmem.storage.connection import ConnectionThread
from obsmem.storage.decoded import DecodedMessages
from obsmem.storage.forgetting import FORGOTTEN_JSON_PATH, parse_forgotten_ids
from obsmem.storage.contract import (
    ClosingContext,
    DeadWork,
    Lease,
    LeaseCounts,
    SECTION_NEEDLE,
    ObservationRecord,
    ThreadPage,
    WindowMark,
    WorkCounts,
    WorkItem,
    WriteResult,
    check_page_limit,
    committed,
    lineage_key,
    rewrite_message_by_save,
    same_message,
    same_record,
    save_guarded,
    MAX_FORGOTTEN_IDS,
    saves_forgotten,
)
from obsmem.storage.notes import ERASE_UNFINISHED as ERASE_NOTE
from obsmem.storage.rules import (
    advanced_threads,
    check_cursors_forward,
    receipt_threads,
    removed_threads,
    without_receipt_threads,
    check_limit,
    check_lineage,
    check_successor,
    ThreadOwner,
    check_message_owner,
    check_storable,
    check_same_identity,
    claim_expiry,
    lease_expiry,
    merge_parts,
    rewritten_generation,
    work_available_at,
)
from obsmem.storage.sqlite import inline
from obsmem.storage.sqlite import leases as sqlite_leases
from obsmem.storage.sqlite import work as sqlite_work
from obsmem.storage.sqlite.wal import LogTruncation
from obsmem.types import DataPart, Message, Thread, long_texts

__all__ = ["SQLiteStore", "default_data_dir", "default_store_path", "prepare_database_file"]

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)
Conn = sqlite3.Connection

BUSY_TIMEOUT_S = 10.0
BUSY_RETRIES = 5
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_JSON_COLUMNS = frozenset(
    {"metadata", "parts", "threads", "buffered_chunks", "buffered_reflection", "config"}
)
_STORE_ONLY_COLUMNS = frozenset({"pk", "created_us", "message_rev", "activity"})
_MESSAGE_SELECT = (
    "SELECT m.seq, m.id, m.thread_id, m.role, m.parts, m.created_at, m.metadata, t.resource_id "
    "FROM messages AS m JOIN threads AS t ON t.id = m.thread_id"
)
# list_resource_messages_after: the threads ?1 names (a JSON object, thread id -> cursor) from
# their cursor on, then the resource's other threads whole; each part an index range per thread
# (messages_by_thread), so nothing at or below a cursor is read. The IN list is built once. CROSS
# JOIN keeps the threads outside: with statistics saying a resource's threads hold most messages,
# the planner would otherwise scan all of them; and a small threads table would be scanned whole.
_RESOURCE_MESSAGES_AFTER = (
    "SELECT m.seq, m.id, m.thread_id, m.role, m.parts, m.created_at, m.metadata, t.resource_id "
    "FROM json_each(?1) AS c CROSS JOIN threads AS t CROSS JOIN messages AS m "
    "WHERE t.id = c.key AND m.thread_id = c.key AND m.seq > c.value AND t.resource_id = ?2 AND c.key IS NOT ?3 "
    "UNION ALL "
    "SELECT m.seq, m.id, m.thread_id, m.role, m.parts, m.created_at, m.metadata, t.resource_id "
    "FROM threads AS t INDEXED BY threads_by_resource CROSS JOIN messages AS m WHERE m.thread_id = t.id AND "
    "t.resource_id = ?2 AND t.id IS NOT ?3 AND t.id NOT IN (SELECT key FROM json_each(?1)) "
    "ORDER BY 1"
)
_MESSAGE_COLUMNS = ("seq", "id", "thread_id", "role", "parts", "created_at", "metadata", "resource_id")
_IN_CHUNK = 500  # stay far below SQLite's bound-parameter limit


def default_data_dir() -> Path:
    """``$OBSMEM_HOME`` when set, else the platform's per-user data folder for obsmem."""
    home = os.environ.get("OBSMEM_HOME")
    return Path(home).expanduser() if home else Path(platformdirs.user_data_dir("obsmem"))


def default_store_path() -> Path:
    """Where ``open_store()`` keeps its database when no URL is given."""
    return default_data_dir() / "obsmem.db"


# -- the file -------------------------------------------------------------------------------------

# The private-file rule (prepare_database_file) is shared with the knowledge and vector stores,
# so it lives in the foundation, obsmem.files; it stays importable from here.


# -- row mapping ----------------------------------------------------------------------------------


def _micros(value: datetime) -> int:
    """Microseconds since the epoch: a sort key that is right whatever the offsets are."""
    return (value - _EPOCH) // timedelta(microseconds=1)


def _columns(model: BaseModel) -> dict[str, Any]:
    data = model.model_dump(mode="json")
    return {k: json.dumps(v) if k in _JSON_COLUMNS and v is not None else v for k, v in data.items()}


_TABLES = {"Thread": "threads", "Message": "messages", "ObservationRecord": "observation_records"}


def _model(cls: type[ModelT], row: sqlite3.Row | dict[str, Any]) -> ModelT:
    data: dict[str, Any] = {}
    fields = dict(row)
    where = f"table {_TABLES.get(cls.__name__, cls.__name__)}, row id {fields.get('id', fields.get('pk'))!r}"
    for key, value in fields.items():
        if key in _STORE_ONLY_COLUMNS:
            continue
        if key in _JSON_COLUMNS and value is not None:
            try:
                value = json.loads(value)
            except (TypeError, ValueError) as exc:  # a corrupted or hand-edited column
                raise StorageError(
                    f"A stored {cls.__name__} could not be decoded ({where}): "
                    f"column {key} is not JSON ({exc})."
                ) from exc
        data[key] = value
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise StorageError(f"A stored {cls.__name__} row could not be decoded ({where}): {exc}") from exc


def _insert(conn: Conn, table: str, values: dict[str, Any]) -> None:
    names = ", ".join(values)
    params = ", ".join(f":{name}" for name in values)
    conn.execute(f"INSERT INTO {table} ({names}) VALUES ({params})", values)


def _update(conn: Conn, table: str, key: str, values: dict[str, Any]) -> None:
    assignments = ", ".join(f"{name} = :{name}" for name in values if name != key)
    conn.execute(f"UPDATE {table} SET {assignments} WHERE {key} = :{key}", values)


#: How many too-large windows a store remembers (see ``SQLiteStore._window``).
_LARGE_WINDOWS_KEPT = 256


def _check_small(rows: Sequence[sqlite3.Row]) -> None:
    """Raise ``TooLarge`` for rows above an inline read's bounds (:mod:`~obsmem.storage.sqlite.inline`)."""
    if len(rows) > inline.MAX_ROWS:
        raise inline.TooLarge()
    chars = 0
    for row in rows:
        chars += sum(len(v) for v in row if isinstance(v, str))
        if chars > inline.MAX_CHARS:
            raise inline.TooLarge()


def _mark(conn: Conn, lineage: str, thread_id: str) -> WindowMark | None:
    """The window's mark (:data:`~obsmem.storage.contract.WindowMark`); None: no such thread."""
    row = conn.execute(
        "SELECT t.pk, t.message_rev, r.id, r.version FROM threads AS t LEFT JOIN observation_records AS r "
        "ON r.lineage = ? AND r.superseded_by IS NULL WHERE t.id = ?",
        (lineage, thread_id),
    ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]), row[2], row[3])


def _transaction(conn: Conn, begin: str, fn: Callable[[Conn], T]) -> T:
    conn.execute(begin)
    try:
        result = fn(conn)
        conn.execute("COMMIT")
        return result
    except BaseException:
        _roll_back(conn)
        raise


def _check_newest(conn: Conn, thread_id: str, after_seq: int) -> None:
    """The ordering guard (:meth:`~obsmem.storage.contract.Store.save_messages`): raise
    ThreadChangedError when ``thread_id`` holds a message newer than ``after_seq`` that calls or
    answers a tool (its parts name a ``tool_call_id``; text merely quoting one is JSON-escaped
    and never matches, and a false match would only cost the caller a re-check). A step down the
    thread's (thread_id, seq) index, then the few newer rows.

    Also when the thread holds no message at or before ``after_seq`` (``after_seq`` > 0): every
    message the caller checked against was deleted since (the thread deleted and started again
    under its id by another process, every message removed), so a place checked against them
    (a tool result after its call) is no place in the thread now. seq is never reused, so a
    thread started again holds only newer ones. One more step down the same index."""
    row = conn.execute(
        "SELECT seq FROM messages WHERE thread_id = ? AND seq > ? AND instr(parts, ?) > 0 ORDER BY seq DESC LIMIT 1",
        (thread_id, after_seq, _TOOL_PART),
    ).fetchone()
    if row is not None:
        raise ThreadChangedError(thread_id, after_seq, row[0])
    if after_seq > 0 and conn.execute(
        "SELECT 1 FROM messages WHERE thread_id = ? AND seq <= ? LIMIT 1", (thread_id, after_seq)
    ).fetchone() is None:
        newest = conn.execute("SELECT max(seq) FROM messages WHERE thread_id = ?", (thread_id,)).fetchone()[0]
        error = ThreadChangedError(thread_id, after_seq, newest or 0)
        error.args = (
            f"Thread '{thread_id}' changed: it holds no message at or before seq {after_seq} (the newest the "
            "save was checked against): those messages were deleted (the thread deleted and started again, "
            "say); nothing was saved.",
        )
        raise error


#: What a stored message's parts hold when it calls or answers a tool (json.dumps's spelling;
#: found with instr, a plain substring search: LIKE took four times as long).
_TOOL_PART = '"tool_call_id": '


def _noted(done: asyncio.Future[None]) -> None:
    """A commit nobody awaits (its caller failed already): its error, if any, is read, so that
    it is not reported as never retrieved."""
    if not done.cancelled():
        done.exception()


def _roll_back(conn: Conn) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # never mask the original error
            pass


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # primary code of an extended one
    text = str(exc).lower()
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in text or "busy" in text


# -- a fork -----------------------------------------------------------------------------------------

#: Every SQLiteStore made in this process (see _let_go_after_fork).
_STORES: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()
#: Database files this process may not open: it was forked while a thread of its parent was using
#: them (see _let_go_after_fork). Inherited by later forks, as the copies are.
_FORKED_MID_CALL: set[str] = set()


def _let_go_after_fork() -> None:
    """In a child just forked (``os.register_at_fork``): close the SQLite connections it inherited.

    SQLite keeps, per process, one record of the locks the process holds on each open file,
    shared by all its connections to that file. A fork copies that record with the connections,
    but the system's locks (POSIX advisory locks) are not inherited. A connection the child then
    opens on the same file (a new ``Memory`` in a worker, as the README says to make) shares the
    copied record: it believes the database's shared lock already held and never takes it, so the
    parent, closing its last connection, sees nobody using the file, checkpoints and deletes the
    ``-wal`` file, and what the child commits afterwards goes into a deleted file: lost. Closing the
    inherited connections here, before anything else runs in the child, drops that record, so the
    child's own connections take real locks. Closing them in the child releases nothing of the
    parent's (a process's locks are its own); their close cannot checkpoint either (the parent's
    shared lock keeps it from the exclusive lock that needs). A connection some thread was using
    at the fork (its lock held, maybe mid-transaction, SQLite's own mutexes held) is left alone,
    and so is every other then (SQLite's mutexes are shared by a file's connections, some by all):
    closing it could wait forever or undo the parent's half-written transaction in the log index
    both processes map. The files of those copies are then refused in this process
    (:func:`_refuse_forked_mid_call`): a connection opened here would share the copied record,
    which may say this process holds the write lock (every write would wait and fail) or a read
    lock it does not hold.
    """
    stores = list(_STORES)
    if any(store._conn_lock.locked() or store._inline.in_use() for store in stores):
        # The copies stay as they are (the store refuses every call here: _check_process).
        _FORKED_MID_CALL.update(_file_key(store.path) for store in stores if store._conn is not None)
        return
    for store in stores:
        conns = [store._inline.detach(), store._conn]
        store._conn = None
        for conn in conns:
            try:
                if conn is not None and not conn.in_transaction:
                    conn.close()
            except Exception:  # noqa: BLE001 - a copy the child never uses: nothing to report
                pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_let_go_after_fork)


def _file_key(path: Path) -> str:
    """The database file ``path`` names, whatever the spelling (links resolved)."""
    return os.path.realpath(path)


def _refuse_forked_mid_call(path: Path) -> None:
    """Raise StorageError when this process may not open ``path`` (see :func:`_let_go_after_fork`)."""
    if _FORKED_MID_CALL and _file_key(path) in _FORKED_MID_CALL:
        raise StorageError(
            f"SQLite store {path}: this process ({os.getpid()}) was forked while its parent was using this "
            "database (an obsmem call was running on another thread). The copies of the parent's SQLite "
            "connections hold its lock records, which a connection opened here would share: its writes "
            "would wait and fail ('database is locked'), its reads would not be protected. Fork while no "
            "obsmem call runs (e.g. gunicorn --preload: make no obsmem call before the fork), or start "
            "workers with multiprocessing's 'spawn' or 'forkserver' method."
        )


# -- the adapter ----------------------------------------------------------------------------------


class SQLiteStore(ConnectionThread, ClosingContext):
    """A :class:`~obsmem.storage.contract.Store` in one SQLite file (created on first use).

    Constructing it does no I/O: the file is opened, switched to WAL and migrated by the
    worker thread on the first operation, so a database written by a newer obsmem surfaces
    as :class:`~obsmem.errors.MigrationError` from that first call.

    The file is private: a new folder is created 0700 and a new database 0600 (its ``-wal``
    and ``-shm`` alike), whatever the umask; an existing file keeps its mode. An existing empty
    (0-byte) file is refused with :class:`~obsmem.errors.StorageError` naming it, since obsmem
    never leaves one and opening it would silently start a new memory in place of a lost one;
    only an explicit :meth:`migrate` initialises it. See :func:`prepare_database_file`.

    ``migrate``: ``"auto"`` (or True, the default) applies pending migrations on first use;
    ``"check"`` refuses a database whose schema is behind (or missing) with
    :class:`~obsmem.errors.MigrationError` naming the pending migrations, and creates nothing
    (run ``obsmem migrate --store URL``); ``"never"`` (or False) does neither.
    """

    url: str

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, busy_timeout: float = BUSY_TIMEOUT_S,
        migrate: object = "auto",
    ) -> None:
        self.path = (
            Path(path).expanduser().absolute() if path is not None else default_store_path().absolute()
        )
        self.url = f"sqlite:///{self.path}"
        self.busy_timeout = busy_timeout
        self.migrate_mode = migrations.migrate_mode(migrate)
        self._pid = os.getpid()  # the process whose threads and connections these are (see _check_process)
        self._start_thread("obsmem-sqlite")
        _STORES.add(self)  # its connections are let go in a forked child (_let_go_after_fork)
        self._conn: Conn | None = None  # touched only on the worker thread
        self._log = LogTruncation(self.busy_timeout)  # used on the worker thread
        self._decoded = DecodedMessages()  # on the worker thread, and by inline reads
        self._inline = inline.InlineReader()  # a turn's small reads, where they are called
        # Windows an inline read found too large, by (lineage, thread): the cursor they were read
        # from (see _window; only the inline reads, on the caller's thread, touch it).
        self._large_windows: dict[tuple[str, str], int] = {}

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- plumbing: everything below runs on the worker thread ---------------------------------
    def _check_process(self) -> None:
        """Refuse a call in a process forked from the one that made this store (multiprocessing's
        'fork', gunicorn ``--preload``): a fork copies only the forking thread, so the worker
        thread that owns the connection is not there (a call queued for it would wait forever),
        and SQLite forbids using a connection opened before a fork in the child."""
        if os.getpid() != self._pid:
            raise InvalidInputError(
                f"This SQLite store ({self.path}) was opened in process {self._pid}, and this process "
                f"({os.getpid()}) was forked from it: its worker thread and its SQLite connection do not "
                "survive a fork. Create a new Memory (or store) in the child, after the fork (e.g. in "
                "gunicorn's post_fork hook, or with multiprocessing's 'spawn' start method)."
            )

    async def _on_thread(self, fn: Callable[..., T], *args: Any) -> T:
        self._check_process()
        return await super()._on_thread(fn, *args)

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        self._check_process()
        return super()._submit(fn, *args)

    async def close(self) -> None:
        """Close the connection after the operations already queued have finished. Idempotent.
        In a forked child it only marks this copy closed: the thread, the connection and the
        file are the parent's (see :meth:`_check_process`)."""
        if os.getpid() != self._pid:
            self._closed = True
            return
        await super().close()

    async def _call(self, fn: Callable[[Conn], T]) -> T:
        return await self._on_thread(self._run, fn)

    async def _write(self, fn: Callable[[Conn], T]) -> T:
        return await self._call(lambda conn: self._written(conn, _transaction(conn, "BEGIN IMMEDIATE", fn)))

    def _written(self, conn: Conn, result: T) -> T:
        self._log.after_write(conn)
        return result

    def forget_cached(self) -> None:
        """Drop the messages this store keeps decoded (:class:`~obsmem.storage.decoded.DecodedMessages`,
        keyed by the rows' text): ``Memory`` calls it after a delete or a forget, so no copy of
        what went stays in this process."""
        self._decoded.clear()
        self._large_windows.clear()

    def _note_large_window(self, known: tuple[str, str], after: int) -> None:
        """Remember that ``known``'s window from cursor ``after`` is too large to read inline."""
        windows = self._large_windows
        try:
            windows.pop(known, None)
            while len(windows) >= _LARGE_WINDOWS_KEPT:
                windows.pop(next(iter(windows)))
        except (StopIteration, RuntimeError, KeyError):  # cleared meanwhile (a forget)
            windows.clear()
        windows[known] = after

    async def truncate_wal(self) -> bool:
        """Rebuild the database file (``VACUUM``), then move the write-ahead log into it and
        truncate the log to zero bytes, so neither a stale copy of an erased row in a page's
        unused space nor the old versions of the pages an erase changed are left in the files.

        ``Memory.forget``, ``delete_thread`` and ``delete_resource`` call it when they are done;
        its cost is linear in the size of the file. Returns False when another connection kept
        either step from running after a bounded wait (a writer holding the lock, a read
        snapshot holding the log; under a second each, see :mod:`obsmem.storage.sqlite.wal`):
        that step is then retried, without waiting, after each later write of this store until
        it succeeds. Done, it takes off the note :meth:`note_erase` left."""
        return await self._call(self._cleaned)

    async def note_erase(self) -> None:
        """An erase begins: noted in the file (a row of ``working_memory`` under
        :data:`ERASE_NOTE`, no text of the erase) until :meth:`truncate_wal` has rebuilt the file
        and truncated its log. A process killed in between (SIGKILL, the OOM killer) leaves the
        note, and the next open of the file does that clean-up first: the erased text is not left
        in the ``-wal`` file (or a page's unused space) while the restarted app runs."""

        def op(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO working_memory (key, text, updated_at) VALUES (?, '', ?) ON CONFLICT (key) DO NOTHING",
                (ERASE_NOTE, datetime.now(UTC).isoformat()),
            )

        await self._write(op)

    def _cleaned(self, conn: Conn) -> bool:
        """:meth:`LogTruncation.now`, and when both steps were done, the erase note off."""
        if not self._log.now(conn):
            return False
        try:
            _transaction(conn, "BEGIN IMMEDIATE", lambda c: c.execute("DELETE FROM working_memory WHERE key = ?", (ERASE_NOTE,)))
        except sqlite3.Error:  # (busy: the note stays, and the next open cleans once more; the files are clean)
            pass
        return True

    def _finish_cut_off_erase(self, conn: Conn) -> None:
        """At open: the clean-up of an erase whose process died before it (see :meth:`note_erase`)."""
        try:
            noted = conn.execute("SELECT 1 FROM working_memory WHERE key = ?", (ERASE_NOTE,)).fetchone()
            if noted is not None:
                self._cleaned(conn)  # kept busy by another connection: retried after the next writes
        except sqlite3.Error:  # (a schema this obsmem does not migrate here: nothing to finish)
            pass

    async def _read(self, fn: Callable[[Conn], T]) -> T:
        # A deferred transaction gives a multi-statement read one consistent snapshot.
        return await self._call(lambda conn: _transaction(conn, "BEGIN", fn))

    def _own(self, *names: str) -> bool:
        """Whether the methods ``names`` are this class's own on this store (not a subclass's,
        nor replaced on the instance): only then may a combined write stand in for them. A
        wrapper that names the method it wraps (``functools.wraps``: one that only watches, a
        counter, a timer) is transparent; any other replacement is called."""
        for name in names:
            method = getattr(self, name)
            while not hasattr(method, "__func__") and hasattr(method, "__wrapped__"):
                method = method.__wrapped__
            if getattr(method, "__func__", None) is not getattr(SQLiteStore, name):
                return False
        return True

    async def _small_read(self, fn: Callable[[Conn, bool], T]) -> T:
        """A read a turn makes on every step: done here when :mod:`~obsmem.storage.sqlite.inline`
        allows (``fn(conn, True)`` raises ``TooLarge`` above its bounds), else on the worker
        thread (``fn(conn, False)``)."""
        if self._closed:
            raise StoreClosedError()
        self._check_process()
        result = self._inline.run(lambda conn: fn(conn, True))
        if result is not inline.MISS:
            return result  # type: ignore[return-value]
        return await self._read(lambda conn: fn(conn, False))

    def _run(self, fn: Callable[[Conn], T]) -> T:
        delay = 0.05
        for attempt in range(BUSY_RETRIES):
            try:
                return fn(self._connection())
            except ObsmemError:
                raise
            except OSError as exc:  # e.g. the data folder cannot be created
                raise StorageError(f"SQLite store {self.path} cannot be opened: {exc}") from exc
            except sqlite3.Error as exc:
                if _is_busy(exc) and attempt < BUSY_RETRIES - 1:
                    if not self._closed:
                        time.sleep(delay)
                        delay *= 2
                    if self._closed:  # closing: not tried again (rolled back, nothing was written),
                        raise StoreClosedError() from exc  # so a close waits for one try at most
                    continue
                raise StorageError(f"SQLite store {self.path} failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _prepare_file(self, *, allow_empty: bool = False) -> None:
        """Make the folder (0700) and the database file (0600) when they are missing, and refuse
        an empty file unless ``allow_empty``: see :func:`prepare_database_file`."""
        prepare_database_file(self.path, allow_empty=allow_empty)

    def _connection(self) -> Conn:
        if self._conn is not None:
            return self._conn
        if self.migrate_mode != "auto" and not self.path.exists():
            raise MigrationError(
                f"There is no obsmem database at {self.path} (the store was opened with "
                f"migrate='{self.migrate_mode}', which creates nothing). Run: obsmem migrate --store "
                f"sqlite:///{self.path}, or open the store with migrate='auto'."
            )
        _refuse_forked_mid_call(self.path)
        self._prepare_file()
        # Used by one thread at a time: the worker, or a claim (see _save_here).
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            # Forgetting and deleting are hard deletes: zero the space they free instead of
            # leaving the deleted text readable in the file's free pages and cells. (Not enough
            # alone: see truncate_wal, which rebuilds the file after an erase.)
            conn.execute("PRAGMA secure_delete = ON")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StorageError(f"Could not switch {self.path} to WAL mode (got '{mode}').")
            conn.execute("PRAGMA foreign_keys = ON")
            if self.migrate_mode == "auto":
                migrations.migrate(conn)
            elif self.migrate_mode == "check" and (behind := migrations.pending(conn)):
                raise MigrationError(
                    f"The SQLite schema at {self.path} is behind this obsmem: {len(behind)} migration(s) "
                    f"pending ({', '.join(behind)}). Run: obsmem migrate --store sqlite:///{self.path}, "
                    "or open the store with migrate='auto'."
                )
            self._finish_cut_off_erase(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        try:
            self._inline.attach(inline.open_reader(str(self.path)))
        except sqlite3.Error:  # reads then all go through this thread
            pass
        return conn

    def _close_connection(self) -> None:
        self._inline.close()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- schema ---------------------------------------------------------------------------------
    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Apply (or, with ``dry_run``, list) the pending migrations of the file.

        Runs on the store's thread over a connection of its own, so the names reflect the file
        as found, even when this store has already opened (and so migrated) it. Unlike every
        other operation, it accepts an empty file: migrating one is asking for it to be set up.
        """
        return await self._on_thread(self._migrate_file, dry_run)

    def _migrate_file(self, dry_run: bool) -> list[str]:
        try:
            if dry_run:
                return self._pending_in_file()
            self._prepare_file(allow_empty=True)  # an explicit migration may initialise an empty file
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            try:
                return migrations.migrate(conn)
            finally:
                conn.close()
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"Cannot migrate the SQLite store {self.path}: {exc}") from exc

    def _pending_in_file(self) -> list[str]:
        """The steps a migration would apply, writing nothing (:func:`~obsmem.files.untouched_reader`):
        a missing file has every step pending."""
        conn = untouched_reader(self.path, self.busy_timeout)
        if conn is None:
            return migrations.SQLITE_MIGRATIONS.names()
        try:
            return migrations.pending(conn)
        finally:
            conn.close()

    # -- threads --------------------------------------------------------------------------------
    @staticmethod
    def _get_thread(conn: Conn, thread_id: str) -> Thread | None:
        row = conn.execute("SELECT * FROM threads WHERE id = ?", (thread_id,)).fetchone()
        return _model(Thread, row) if row else None

    @classmethod
    def _require_thread(cls, conn: Conn, thread_id: str) -> Thread:
        thread = cls._get_thread(conn, thread_id)
        if thread is None:
            raise ThreadNotFoundError(thread_id)
        return thread

    async def create_thread(self, thread: Thread) -> Thread:
        check_storable(thread)

        def op(conn: Conn) -> Thread:
            existing = self._get_thread(conn, thread.id)
            if existing is None:
                _insert(conn, "threads", {**_columns(thread), "created_us": _micros(thread.created_at)})
                existing = self._require_thread(conn, thread.id)
            return existing

        return await self._write(op)

    async def get_thread(self, thread_id: str) -> Thread | None:
        def op(conn: Conn, bounded: bool) -> Thread | None:
            row = conn.execute("SELECT * FROM threads WHERE id = ?", (thread_id,)).fetchone()
            if bounded:
                _check_small([row] if row else [])
            return _model(Thread, row) if row else None

        return await self._small_read(op)

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
    def _thread_page(
        cls, conn: Conn, resource_id: str | None, limit: int, offset: int, after: str | None,
        since_us: int | None,
    ) -> list[Thread]:
        """A page of threads (:func:`~obsmem.storage.paging.thread_page_sql`)."""
        query = paging.thread_page_sql("?", "*", resource_id, after, limit, offset, since_us)
        rows = conn.execute(*query).fetchall()
        if not rows and after is not None:  # the end of the listing, or no thread to page after?
            cls._require_thread(conn, after)
        return [_model(Thread, row) for row in rows]

    @classmethod
    def _newest_page(
        cls, conn: Conn, resource_id: str, limit: int, offset: int, after: str | None, before: int | None
    ) -> ThreadPage:
        """A page of threads most recently active first (:func:`~obsmem.storage.paging.newest_page_sql`)."""
        rows = conn.execute(*paging.newest_page_sql("?", "*", resource_id, after, before, limit, offset)).fetchall()
        if not rows and after is not None:
            cls._require_thread(conn, after)
        return ThreadPage([_model(Thread, row) for row in rows], [str(row["activity"]) for row in rows])

    async def update_thread(self, thread: Thread, *, expected_version: int) -> Thread | None:
        check_storable(thread)

        def op(conn: Conn) -> Thread | None:
            stored = self._get_thread(conn, thread.id)
            if stored is None or stored.version != expected_version:
                return None
            if thread.resource_id != stored.resource_id:
                raise InvalidInputError(
                    f"Thread '{thread.id}' belongs to resource '{stored.resource_id}'; "
                    "a thread cannot move to another resource."
                )
            updated = thread.model_copy(
                update={"version": expected_version + 1, "created_at": stored.created_at}
            )
            _update(conn, "threads", "id", _columns(updated))
            return self._get_thread(conn, thread.id)

        return await self._write(op)

    async def delete_thread(self, thread_id: str) -> bool:
        def op(conn: Conn) -> bool:
            # Messages go by ON DELETE CASCADE; the thread's own lineage is deleted explicitly
            # (resource-scoped records outlive any one thread).
            conn.execute(
                "DELETE FROM observation_records WHERE lineage = ?", (lineage_key("thread", thread_id, ""),)
            )
            return conn.execute("DELETE FROM threads WHERE id = ?", (thread_id,)).rowcount > 0

        return await self._write(op)

    # -- messages -------------------------------------------------------------------------------
    def _message(self, row: sqlite3.Row | tuple[Any, ...]) -> Message:
        """The message a ``_MESSAGE_SELECT`` row (or its values, in that order) holds, decoded
        once per distinct content."""
        key = tuple(row)
        message = self._decoded.get(key)
        if message is None:
            fields = dict(zip(_MESSAGE_COLUMNS, key, strict=True))
            message = long_texts(_model(Message, fields))  # hashed here (the worker, for a long row)
            self._decoded.put(key, message, fields["metadata"])
        return message

    def _select_messages(self, conn: Conn, ids: list[str]) -> dict[str, Message]:
        found: dict[str, Message] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            marks = ", ".join("?" for _ in chunk)
            for row in conn.execute(f"{_MESSAGE_SELECT} WHERE m.id IN ({marks})", chunk):
                found[row["id"]] = self._message(row)
        return found

    async def save_messages(
        self, thread_id: str, messages: list[Message], *, after_seq: int | None = None
    ) -> list[Message]:
        keep = saves_forgotten()
        return await self._write(
            lambda conn: self._save(conn, thread_id, messages, after_seq=after_seq, keep_forgotten=keep)
        )

    async def save_messages_marked(
        self, thread_id: str, messages: list[Message], lineage: str, *, after_seq: int | None = None
    ) -> tuple[list[Message], WindowMark | None, WindowMark | None]:
        """:func:`~obsmem.storage.contract.save_marked`: the save and the window's marks around
        it, in one write transaction; the new rows as a read would give them."""
        if not self._own("save_messages"):
            # A subclass that saves its own way (redacting, say) is called as it is: no marks.
            # With the ordering guard when it takes one, else checked just before its save.
            return await save_guarded(self, thread_id, messages, after_seq), None, None

        keep = saves_forgotten()

        def op(conn: Conn) -> tuple[list[Message], WindowMark | None, WindowMark | None]:
            before = _mark(conn, lineage, thread_id)
            saved = self._save(
                conn, thread_id, messages, decoded=True, after_seq=after_seq, keep_forgotten=keep
            )
            after = _mark(conn, lineage, thread_id)
            assert before is not None and after is not None  # _save required the thread
            return saved, before, after

        return await self._write(op)

    async def save_messages_marked_early(
        self, thread_id: str, messages: list[Message], lineage: str, *, after_seq: int | None = None
    ) -> tuple[list[Message], WindowMark | None, WindowMark | None, asyncio.Future[None]]:
        """:func:`~obsmem.storage.contract.save_marked_early`: the new rows and the marks, handed
        back as soon as they are written in the save's transaction; the commit (the disk's
        fsync, most of a save's time) goes on on the worker thread meanwhile, and the returned
        future completes with it. One job on the worker thread, as a save always was: whatever
        is queued after it runs after the commit."""
        loop = asyncio.get_running_loop()
        if not self._own("save_messages"):
            return await save_guarded(self, thread_id, messages, after_seq), None, None, committed()
        if self._closed:
            raise StoreClosedError()
        self._check_process()
        keep = saves_forgotten()
        here = self._save_here(thread_id, messages, lineage, after_seq, keep)
        if here is not None:
            return here
        early: asyncio.Future[tuple[list[Message], WindowMark | None, WindowMark | None]] = loop.create_future()
        sent = False

        def op(conn: Conn) -> None:  # the transaction's body: the rows go out before its COMMIT
            nonlocal sent
            before = _mark(conn, lineage, thread_id)
            saved = self._save(
                conn, thread_id, messages, decoded=True, after_seq=after_seq, keep_forgotten=keep
            )
            after = _mark(conn, lineage, thread_id)
            assert before is not None and after is not None  # _save required the thread
            sent = True
            loop.call_soon_threadsafe(_resolve, early, (saved, before, after))

        def job(conn: Conn) -> None:
            if sent:  # a busy commit is not retried once the rows went out: the save failed
                raise StorageError(f"SQLite store {self.path}: the save's commit failed (database busy)")
            _transaction(conn, "BEGIN IMMEDIATE", op)

        commit: asyncio.Future[None] = self._submit(self._run, job)

        def settled(done: asyncio.Future[None]) -> None:
            error = done.exception() if not done.cancelled() else StoreClosedError()
            if error is not None and not early.done():
                early.set_exception(error)  # failed before the rows went out: nothing was stored

        commit.add_done_callback(settled)
        saved, before, after = await early
        return saved, before, after, commit

    def _save_here(
        self, thread_id: str, messages: list[Message], lineage: str, after_seq: int | None,
        keep_forgotten: bool,
    ) -> tuple[list[Message], WindowMark | None, WindowMark | None, asyncio.Future[None]] | None:
        """:meth:`save_messages_marked_early` without a hand-off to the worker thread, or None
        when it cannot be done here (then the worker thread saves as it always did).

        When the worker thread is idle the connection is claimed (see
        :class:`~obsmem.storage.connection.ConnectionThread`) and the rows are written here: the
        write lock taken without waiting (a busy timeout of 0: another writer holding it sends
        the save to the worker thread, which waits for it), at most a window's worth of rows
        (the inline reads' bounds), no disk sync. Only the ``COMMIT``, which waits for the disk,
        runs on a second thread, and the claim ends with it: every job queued meanwhile runs
        after the commit, as after a save on the worker thread. What runs here is Python work
        that would hold the interpreter lock on the worker thread all the same, and page writes
        bounded like an inline read's."""
        conn = self._conn
        if conn is None or len(messages) > inline.MAX_ROWS or not self._claim_idle():
            return None
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            before = _mark(conn, lineage, thread_id)
            written = self._write_rows(
                conn, thread_id, messages, decoded=True, max_chars=inline.MAX_CHARS, after_seq=after_seq,
                keep_forgotten=keep_forgotten,
            )
            after = _mark(conn, lineage, thread_id)
        except BaseException as exc:
            _roll_back(conn)
            self._drop_claim()
            if isinstance(exc, sqlite3.Error | inline.TooLarge):
                return None  # busy, or anything else: the worker thread saves (and reports a real error)
            raise
        assert before is not None and after is not None  # _save required the thread

        def commit() -> None:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _roll_back(conn)
                raise StorageError(f"SQLite store {self.path}: the save's commit failed: {exc}") from exc
            self._log.after_write(conn)

        try:
            done: asyncio.Future[None] = self._finish_claim(commit)
        except BaseException:
            _roll_back(conn)
            self._drop_claim()
            raise StoreClosedError() from None
        # The new rows decoded while the disk syncs (the commit does not wait for it); what was
        # written was a valid message a moment ago, so this decodes (a failure is the caller's
        # error all the same, the commit's outcome noted so that it is never left unread).
        try:
            saved = self._decode_written(written)
        except BaseException:
            done.add_done_callback(_noted)
            raise
        return saved, before, after, done

    def _save(
        self, conn: Conn, thread_id: str, messages: list[Message], *, decoded: bool = False,
        max_chars: int | None = None, after_seq: int | None = None, keep_forgotten: bool = False,
    ) -> list[Message]:
        """Save ``messages``; return them as stored: copies of the input with their seq, or with
        ``decoded`` as a read would give them (from the JSON written: nothing of the caller's
        objects, no value JSON does not keep). ``max_chars``: raise ``TooLarge`` before writing
        a message that brings the characters written above it. ``after_seq``: the ordering
        guard (:meth:`~obsmem.storage.contract.Store.save_messages`), in the write transaction.
        ``keep_forgotten``: the save is inside :func:`~obsmem.storage.contract.rewriting` (the
        thread's forgotten ids do not stop it)."""
        written = self._write_rows(
            conn, thread_id, messages, decoded=decoded, max_chars=max_chars, after_seq=after_seq,
            keep_forgotten=keep_forgotten,
        )
        return self._decode_written(written)

    def _decode_written(self, written: list[Message | tuple[Any, ...]]) -> list[Message]:
        """:meth:`_write_rows`'s result decoded: each new row as a read would give it."""
        return [m if isinstance(m, Message) else self._message(m) for m in written]

    def _write_rows(
        self, conn: Conn, thread_id: str, messages: list[Message], *, decoded: bool = False,
        max_chars: int | None = None, after_seq: int | None = None, keep_forgotten: bool = False,
    ) -> list[Message | tuple[Any, ...]]:
        """:meth:`_save`, but with ``decoded`` a new row comes back as the values written (in
        ``_MESSAGE_SELECT``'s order), for :meth:`_decode_written`: the save's commit need not wait
        for the decode (:meth:`_save_here` decodes while the disk syncs)."""
        row = conn.execute(
            f"SELECT resource_id, json_extract(metadata, '{FORGOTTEN_JSON_PATH}') FROM threads WHERE id = ?",
            (thread_id,),
        ).fetchone()
        if row is None:
            raise ThreadNotFoundError(thread_id)
        check_storable(messages=messages)
        if after_seq is not None:
            _check_newest(conn, thread_id, after_seq)
        thread = ThreadOwner(thread_id, row[0])  # not the whole row, decoded: only its owner is checked
        if row[1] is not None and not keep_forgotten:  # a forget's messages, read in this write: not stored again
            forgotten = parse_forgotten_ids(row[1])
            if len(forgotten) >= MAX_FORGOTTEN_IDS:  # the row's list is full: every id is in the table
                forgotten = forgotten | self._forgotten_among(conn, thread_id, [m.id for m in messages])
            messages = [m for m in messages if m.id not in forgotten]
        # A reply's receipt names no thread deleted while it was made (rules.without_receipt_threads).
        named = {t for m in messages for t in receipt_threads(m.metadata)} - {thread_id}
        messages = without_receipt_threads(messages, self._deleted(conn, sorted(named)))
        stored: dict[str, Message | tuple[Any, ...]] = {}
        rewritten: list[str] = []
        for message in messages:
            check_message_owner(message, thread)
            row = conn.execute("SELECT thread_id FROM messages WHERE id = ?", (message.id,)).fetchone()
            if row is not None and row["thread_id"] != thread_id:
                raise InvalidInputError(
                    f"Message '{message.id}' already belongs to another thread; "
                    f"it cannot also be saved into thread '{thread_id}'. Give it a new id."
                )
            values = _columns(message)
            if max_chars is not None:
                max_chars -= len(values["parts"]) + len(values["metadata"] or "")
                if max_chars < 0:
                    raise inline.TooLarge()
            if row is None:
                cursor = conn.execute(
                    "INSERT INTO messages (id, thread_id, role, parts, created_at, metadata) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        message.id,
                        thread_id,
                        values["role"],
                        values["parts"],
                        values["created_at"],
                        values["metadata"],
                    ),
                )
                if decoded:
                    stored[message.id] = (
                        cursor.lastrowid, message.id, thread_id, values["role"], values["parts"],
                        values["created_at"], values["metadata"], thread.resource_id,
                    )
                else:
                    stored[message.id] = message.model_copy(
                        update={"seq": cursor.lastrowid, "thread_id": thread_id, "resource_id": thread.resource_id}
                    )
            else:  # same id again: keep seq and created_at, replace the content
                conn.execute(
                    "UPDATE messages SET role = ?, parts = ?, metadata = ? WHERE id = ?",
                    (values["role"], values["parts"], values["metadata"], message.id),
                )
                rewritten.append(message.id)
        # New rows are built from what was written (its seq is the rowid just drawn); only
        # rewritten ones, which keep their stored seq and created_at, are read back.
        if rewritten:
            stored.update(self._select_messages(conn, rewritten))
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
        sql = f"{_MESSAGE_SELECT} WHERE m.thread_id = ? AND m.seq > ?"
        params: list[Any] = [thread_id, after_seq]
        if before_seq is not None:
            sql += " AND m.seq < ?"
            params.append(before_seq)
        sql += " ORDER BY m.seq DESC" if newest_first else " ORDER BY m.seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)

        def op(conn: Conn) -> list[Message]:
            found = [self._message(row) for row in conn.execute(sql, params)]
            if not found:  # a row found proves its thread exists (the query joins threads)
                self._require_thread(conn, thread_id)
            return found

        return await self._read(op)

    async def list_resource_messages(self, resource_id: str, *, after_seq: int = 0) -> list[Message]:
        def op(conn: Conn) -> list[Message]:
            rows = conn.execute(
                f"{_MESSAGE_SELECT} WHERE t.resource_id = ? AND m.seq > ? ORDER BY m.seq",
                (resource_id, after_seq),
            )
            return [self._message(row) for row in rows]

        return await self._read(op)

    async def list_resource_messages_after(
        self, resource_id: str, cursors: Mapping[str, int], *, exclude_thread_id: str | None = None
    ) -> list[Message]:
        named = json.dumps({thread_id: int(cursor) for thread_id, cursor in cursors.items()})

        def op(conn: Conn) -> list[Message]:
            rows = conn.execute(_RESOURCE_MESSAGES_AFTER, (named, resource_id, exclude_thread_id))
            return [self._message(row) for row in rows]

        return await self._read(op)

    async def get_messages(self, message_ids: list[str]) -> list[Message]:
        def op(conn: Conn, bounded: bool) -> list[Message]:
            if bounded:  # a few ids (a turn's instructions, the copies an application sent back)
                unique = list(dict.fromkeys(message_ids))
                if len(unique) > inline.MAX_ROWS:
                    raise inline.TooLarge()
                marks = ", ".join("?" for _ in unique)
                rows = conn.execute(f"{_MESSAGE_SELECT} WHERE m.id IN ({marks})", unique).fetchall() if unique else []
                _check_small(rows)
                found = {row["id"]: self._message(row) for row in rows}
            else:
                found = self._select_messages(conn, message_ids)
            return sorted(found.values(), key=lambda m: m.seq or 0)

        return await self._small_read(op)

    async def add_message_parts(self, message_id: str, parts: list[DataPart]) -> Message:
        return await self._write(lambda conn: self._add_parts(conn, message_id, parts))

    async def add_message_parts_marked(
        self, message_id: str, parts: list[DataPart], lineage: str
    ) -> tuple[Message, WindowMark | None, WindowMark | None]:
        """:func:`~obsmem.storage.contract.add_parts_marked`: the write and the marks of its
        thread's window around it, in one write transaction."""

        if not self._own("add_message_parts"):
            return await self.add_message_parts(message_id, parts), None, None  # a subclass's own way

        def op(conn: Conn) -> tuple[Message, WindowMark | None, WindowMark | None]:
            row = conn.execute("SELECT thread_id FROM messages WHERE id = ?", (message_id,)).fetchone()
            before = _mark(conn, lineage, row[0]) if row is not None else None
            message = self._add_parts(conn, message_id, parts)
            return message, before, _mark(conn, lineage, message.thread_id or "")

        return await self._write(op)

    def _add_parts(self, conn: Conn, message_id: str, parts: list[DataPart]) -> Message:
        stored = self._select_messages(conn, [message_id]).get(message_id)
        if stored is None:
            raise MessageNotFoundError(message_id)
        merged = merge_parts(stored.parts, parts)
        if len(merged) == len(stored.parts):
            return stored
        updated = stored.model_copy(update={"parts": merged})
        conn.execute("UPDATE messages SET parts = ? WHERE id = ?", (_columns(updated)["parts"], message_id))
        return self._select_messages(conn, [message_id])[message_id]

    async def rewrite_message(self, message: Message, *, expected: Message) -> bool:
        """:func:`~obsmem.storage.contract.rewrite_message_if_unchanged`: read, compared and
        written in one write transaction."""
        if not self._own("save_messages"):  # a subclass that saves its own way (redacting, say) is called
            return await rewrite_message_by_save(self, message, expected=expected)

        def op(conn: Conn) -> bool:
            stored = self._select_messages(conn, [message.id]).get(message.id)
            if stored is None or stored.thread_id is None or not same_message(stored, expected):
                return False
            self._save(conn, stored.thread_id, [message], keep_forgotten=True)
            return True

        return await self._write(op)

    async def delete_messages(self, message_ids: list[str]) -> int:
        def op(conn: Conn) -> int:
            unique = list(dict.fromkeys(message_ids))
            gone = 0
            for start in range(0, len(unique), _IN_CHUNK):
                chunk = unique[start : start + _IN_CHUNK]
                marks = ", ".join("?" for _ in chunk)
                gone += conn.execute(f"DELETE FROM messages WHERE id IN ({marks})", chunk).rowcount
            return gone

        return await self._write(op)

    async def note_forgotten_ids(self, thread_id: str, ids: list[str]) -> None:
        """Keep ``ids`` as forgotten message ids of the thread, every one (see
        :func:`~obsmem.storage.contract.note_forgotten_ids`); they go with the thread."""
        def op(conn: Conn) -> None:
            self._require_thread(conn, thread_id)
            conn.executemany(
                "INSERT OR IGNORE INTO forgotten_ids (thread_id, message_id) VALUES (?, ?)",
                [(thread_id, message_id) for message_id in dict.fromkeys(ids)],
            )

        await self._write(op)

    async def list_forgotten_ids(self, thread_id: str) -> list[str]:
        """Every forgotten message id of the thread, in no particular order."""
        def op(conn: Conn) -> list[str]:
            rows = conn.execute("SELECT message_id FROM forgotten_ids WHERE thread_id = ?", (thread_id,))
            return [row[0] for row in rows]

        return await self._read(op)

    async def forgotten_among(self, thread_id: str, ids: list[str]) -> frozenset[str]:
        """Which of ``ids`` the thread's forgotten message ids hold (reads those ids only)."""
        return await self._read(lambda conn: self._forgotten_among(conn, thread_id, ids))

    @staticmethod
    def _forgotten_among(conn: Conn, thread_id: str, ids: list[str]) -> frozenset[str]:
        found: set[str] = set()
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            marks = ", ".join("?" for _ in chunk)
            found.update(row[0] for row in conn.execute(
                f"SELECT message_id FROM forgotten_ids WHERE thread_id = ? AND message_id IN ({marks})",
                (thread_id, *chunk),
            ))
        return frozenset(found)

    async def count_messages(self, thread_id: str) -> int:
        def op(conn: Conn) -> int:
            self._require_thread(conn, thread_id)
            row = conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = ?", (thread_id,)).fetchone()
            return int(row[0])

        return await self._read(op)

    # -- observation records ----------------------------------------------------------------------
    @staticmethod
    def _head(conn: Conn, lineage: str) -> ObservationRecord | None:
        row = conn.execute(
            "SELECT * FROM observation_records WHERE lineage = ? AND superseded_by IS NULL", (lineage,)
        ).fetchone()
        return _model(ObservationRecord, row) if row else None

    @staticmethod
    def _record(conn: Conn, record_id: str) -> ObservationRecord | None:
        row = conn.execute("SELECT * FROM observation_records WHERE id = ?", (record_id,)).fetchone()
        return _model(ObservationRecord, row) if row else None

    @staticmethod
    def _gone(conn: Conn, record: ObservationRecord) -> bool:
        if record.scope != "thread":
            return False
        return conn.execute("SELECT 1 FROM threads WHERE id = ?", (record.thread_id,)).fetchone() is None

    @staticmethod
    def _deleted(conn: Conn, thread_ids: list[str]) -> set[str]:
        """Which of ``thread_ids`` no longer exist: one read of the threads index a 500 of them
        (a reply's receipt in resource scope may name every thread of the user)."""
        gone = set(thread_ids)
        for start in range(0, len(thread_ids), 500):
            chunk = thread_ids[start : start + 500]
            sql = f"SELECT id FROM threads WHERE id IN ({', '.join('?' * len(chunk))})"
            gone -= {row[0] for row in conn.execute(sql, chunk)}
        return gone

    @staticmethod
    def _adds_for_deleted_thread(conn: Conn, stored: ObservationRecord | None, record: ObservationRecord) -> bool:
        return any(
            conn.execute("SELECT 1 FROM threads WHERE id = ?", (tid,)).fetchone() is None
            for tid in sorted(advanced_threads(stored, record))
        )

    @classmethod
    def _stale(cls, conn: Conn, lineage: str) -> WriteResult:
        return WriteResult(status="stale", record=cls._head(conn, lineage))

    @classmethod
    def _insert_record(cls, conn: Conn, record: ObservationRecord) -> ObservationRecord:
        if conn.execute("SELECT 1 FROM observation_records WHERE id = ?", (record.id,)).fetchone():
            raise InvalidInputError(
                f"Observation record id '{record.id}' is already used; ids are never reused."
            )
        _insert(conn, "observation_records", _columns(record))
        stored = cls._record(conn, record.id)
        assert stored is not None
        return stored

    async def get_head(self, lineage: str) -> ObservationRecord | None:
        return await self._read(lambda conn: self._head(conn, lineage))

    async def read_window(self, lineage: str, thread_id: str) -> tuple[ObservationRecord | None, list[Message]]:
        """:func:`~obsmem.storage.contract.read_window` in one read transaction (one snapshot)."""
        return await self._small_read(lambda conn, bounded: self._window(conn, bounded, lineage, thread_id))

    async def read_window_marked(
        self, lineage: str, thread_id: str
    ) -> tuple[ObservationRecord | None, list[Message], WindowMark]:
        """:func:`~obsmem.storage.contract.read_marked_window`: the window and its mark, one snapshot."""

        def op(conn: Conn, bounded: bool) -> tuple[ObservationRecord | None, list[Message], WindowMark]:
            head, messages = self._window(conn, bounded, lineage, thread_id)
            mark = _mark(conn, lineage, thread_id)  # the same snapshot
            if mark is None:
                raise ThreadNotFoundError(thread_id)
            return head, messages, mark

        return await self._small_read(op)

    async def window_mark(self, lineage: str, thread_id: str) -> WindowMark | None:
        """:func:`~obsmem.storage.contract.window_mark`: one indexed row, read inline."""
        return await self._small_read(lambda conn, bounded: _mark(conn, lineage, thread_id))

    def _window(
        self, conn: Conn, bounded: bool, lineage: str, thread_id: str
    ) -> tuple[ObservationRecord | None, list[Message]]:
        row = conn.execute(
            "SELECT * FROM observation_records WHERE lineage = ? AND superseded_by IS NULL", (lineage,)
        ).fetchone()
        head = _model(ObservationRecord, row) if row else None
        query = f"{_MESSAGE_SELECT} WHERE m.thread_id = ? AND m.seq > ? ORDER BY m.seq"
        after = head.cursor(thread_id) if head else 0
        if bounded:
            # A window found too large here at this cursor stays too large until the cursor moves
            # (it only grows): it goes to the worker thread without reading its rows here again
            # (a pasted megabyte waiting to be observed was fetched on the loop at every boundary).
            known = (lineage, thread_id)
            if self._large_windows.get(known) == after:
                raise inline.TooLarge()
            rows = conn.execute(f"{query} LIMIT ?", (thread_id, after, inline.MAX_ROWS + 1)).fetchall()
            try:
                _check_small([row, *rows] if row else rows)
            except inline.TooLarge:
                self._note_large_window(known, after)
                raise
        else:
            rows = conn.execute(query, (thread_id, after)).fetchall()
        messages = [self._message(r) for r in rows]
        if not messages:
            self._require_thread(conn, thread_id)
        return head, messages

    async def get_record(self, record_id: str) -> ObservationRecord | None:
        return await self._read(lambda conn: self._record(conn, record_id))

    async def list_generations(
        self, lineage: str, *, limit: int = 100, offset: int = 0
    ) -> list[ObservationRecord]:
        _check_page(limit, offset)

        def op(conn: Conn) -> list[ObservationRecord]:
            rows = conn.execute(
                "SELECT * FROM observation_records WHERE lineage = ? "
                "ORDER BY generation DESC, pk DESC LIMIT ? OFFSET ?",
                (lineage, limit, offset),
            )
            return [_model(ObservationRecord, row) for row in rows]

        return await self._read(op)

    async def create_record(self, record: ObservationRecord) -> WriteResult:
        check_lineage(record)

        def op(conn: Conn) -> WriteResult:
            if self._gone(conn, record) or self._adds_for_deleted_thread(conn, None, record):
                return WriteResult(status="gone", record=None)
            if self._head(conn, record.lineage) is not None:
                return self._stale(conn, record.lineage)
            stored = self._insert_record(conn, record.model_copy(update={"superseded_by": None}))
            return WriteResult(status="applied", record=stored)

        return await self._write(op)

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        return await self._write(lambda conn: self._update_record(conn, record, expected_version))

    async def update_record_marking(
        self, record: ObservationRecord, *, expected_version: int, message_id: str, parts: list[DataPart], lineage: str
    ) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
        """:func:`~obsmem.storage.contract.update_record_marking`: the compare-and-set and, when it
        applies, the parts on the message with the marks of its window around them, in one write
        transaction (one commit)."""
        if not self._own("update_record", "add_message_parts"):
            return await self.update_record(record, expected_version=expected_version), None, None, None

        def op(conn: Conn) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
            return self._marking(conn, self._update_record(conn, record, expected_version), message_id, parts, lineage)

        return await self._write(op)

    async def create_generation_marking(
        self, current: ObservationRecord, successor: ObservationRecord, *, expected_version: int, message_id: str,
        parts: list[DataPart], lineage: str,
    ) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
        """:func:`~obsmem.storage.contract.create_generation_marking`: the new generation and, when
        it applies, the parts on the message with the marks of its window around them, in one
        write transaction (one commit)."""
        if not self._own("create_generation", "add_message_parts"):
            return await self.create_generation(current, successor, expected_version=expected_version), None, None, None
        check_successor(current, successor)

        def op(conn: Conn) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
            result = self._create_generation(conn, current, successor, expected_version)
            return self._marking(conn, result, message_id, parts, lineage)

        return await self._write(op)

    def _marking(
        self, conn: Conn, result: WriteResult, message_id: str, parts: list[DataPart], lineage: str
    ) -> tuple[WriteResult, Message | None, WindowMark | None, WindowMark | None]:
        """After a head write (``result``) in ``conn``'s transaction: when it applied, ``parts`` on
        the message, under a savepoint (parts that fail never undo the write)."""
        if result.status != "applied":
            return result, None, None, None
        row = conn.execute("SELECT thread_id FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            return result, None, None, None  # the message is gone: the record is written all the same
        before = _mark(conn, lineage, row[0])
        conn.execute("SAVEPOINT obsmem_parts")
        try:
            message = self._add_parts(conn, message_id, parts)
        except (ObsmemError, sqlite3.Error):
            if not conn.in_transaction:
                raise  # SQLite undid the whole transaction (a full disk, an I/O error): nothing is written
            # The parts, not the record, failed: the record is written all the same.
            conn.execute("ROLLBACK TO obsmem_parts")
            conn.execute("RELEASE obsmem_parts")
            return result, None, None, None
        conn.execute("RELEASE obsmem_parts")
        return result, message, before, _mark(conn, lineage, message.thread_id or "")

    def _update_record(self, conn: Conn, record: ObservationRecord, expected_version: int) -> WriteResult:
        stored = self._record(conn, record.id)
        if stored is None or self._gone(conn, stored) or self._adds_for_deleted_thread(conn, stored, record):
            return WriteResult(status="gone", record=None)
        check_same_identity(stored, record)
        if not stored.is_live or stored.version != expected_version:
            return self._stale(conn, stored.lineage)
        check_cursors_forward(stored, record, gone=self._deleted(conn, removed_threads(stored, record)))
        updated = record.model_copy(
            update={
                "version": expected_version + 1,
                "superseded_by": None,
                "created_at": stored.created_at,
            }
        )
        _update(conn, "observation_records", "id", _columns(updated))
        return WriteResult(status="applied", record=self._record(conn, record.id))

    async def create_generation(
        self, current: ObservationRecord, successor: ObservationRecord, *, expected_version: int
    ) -> WriteResult:
        check_successor(current, successor)
        return await self._write(lambda conn: self._create_generation(conn, current, successor, expected_version))

    def _create_generation(
        self, conn: Conn, current: ObservationRecord, successor: ObservationRecord, expected_version: int
    ) -> WriteResult:
        stored = self._record(conn, current.id)
        if stored is None or self._gone(conn, stored) or self._adds_for_deleted_thread(conn, stored, successor):
            return WriteResult(status="gone", record=None)
        if stored.lineage != current.lineage:
            raise InvalidInputError(f"Record '{current.id}' belongs to lineage '{stored.lineage}'.")
        if not stored.is_live or stored.version != expected_version:
            return self._stale(conn, stored.lineage)
        check_cursors_forward(stored, successor, gone=self._deleted(conn, removed_threads(stored, successor)))
        # Retire first: the one-live-head unique index forbids two heads even for a moment.
        conn.execute(
            "UPDATE observation_records SET superseded_by = ?, version = version + 1 WHERE id = ?",
            (successor.id, stored.id),
        )
        new_head = successor.model_copy(
            update={"generation": stored.generation + 1, "version": 1, "superseded_by": None}
        )
        return WriteResult(status="applied", record=self._insert_record(conn, new_head))

    async def delete_lineage(self, lineage: str) -> int:
        def op(conn: Conn) -> int:
            return conn.execute("DELETE FROM observation_records WHERE lineage = ?", (lineage,)).rowcount

        return await self._write(op)

    async def rewrite_generation(
        self, record: ObservationRecord, *, expected: ObservationRecord | None = None
    ) -> bool:
        def op(conn: Conn) -> bool:
            stored = self._record(conn, record.id)
            if stored is None or stored.is_live or (expected is not None and not same_record(stored, expected)):
                return False
            _update(conn, "observation_records", "id", _columns(rewritten_generation(stored, record)))
            return True

        return await self._write(op)

    # -- leases (SQL in sqlite_leases; writes under BEGIN IMMEDIATE) ------------------------------
    async def acquire_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        expires_at = lease_expiry(key, owner, ttl_s, now)
        return await self._write(lambda conn: sqlite_leases.acquire(conn, key, owner, now, expires_at))

    async def renew_lease(self, key: str, owner: str, *, ttl_s: float, now: datetime) -> Lease | None:
        expires_at = lease_expiry(key, owner, ttl_s, now)
        return await self._write(lambda conn: sqlite_leases.renew(conn, key, owner, now, expires_at))

    async def release_lease(self, key: str, owner: str) -> bool:
        return await self._write(lambda conn: sqlite_leases.release(conn, key, owner))

    async def get_lease(self, key: str) -> Lease | None:
        return await self._read(lambda conn: sqlite_leases.get(conn, key))

    async def list_leases(self, prefix: str = "") -> list[Lease]:
        return await self._read(lambda conn: sqlite_leases.list_by_prefix(conn, prefix))

    async def lease_page(self, prefix: str = "", *, limit: int, after_key: str | None = None) -> list[Lease]:
        """:func:`~obsmem.storage.contract.lease_page`: ``limit`` rows at most."""
        check_page_limit(limit)
        return await self._read(lambda conn: sqlite_leases.page_by_prefix(conn, prefix, limit, after_key))

    async def count_leases(self, prefix: str = "", *, now: datetime) -> LeaseCounts:
        """:func:`~obsmem.storage.contract.count_leases`: counted in SQL."""
        return await self._read(lambda conn: sqlite_leases.count_by_prefix(conn, prefix, now))

    # -- working memory ---------------------------------------------------------------------------
    async def get_working_memory(self, key: str) -> str | None:
        def op(conn: Conn) -> str | None:
            row = conn.execute("SELECT text FROM working_memory WHERE key = ?", (key,)).fetchone()
            return str(row[0]) if row else None

        return await self._read(op)

    async def set_working_memory(self, key: str, text: str) -> None:
        def op(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO working_memory (key, text, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at",
                (key, text, datetime.now(UTC).isoformat()),
            )

        await self._write(op)

    async def replace_working_memory(self, key: str, text: str | None, *, expected: str) -> bool:
        """:func:`~obsmem.storage.contract.replace_working_memory_if_unchanged`, in one write
        transaction."""

        def op(conn: Conn) -> bool:
            if text is None:
                deleted = conn.execute("DELETE FROM working_memory WHERE key = ? AND text = ?", (key, expected))
                return deleted.rowcount > 0
            return conn.execute(
                "UPDATE working_memory SET text = ?, updated_at = ? WHERE key = ? AND text = ?",
                (text, datetime.now(UTC).isoformat(), key, expected),
            ).rowcount > 0

        return await self._write(op)

    async def delete_working_memory(self, key: str) -> bool:
        def op(conn: Conn) -> bool:
            return conn.execute("DELETE FROM working_memory WHERE key = ?", (key,)).rowcount > 0

        return await self._write(op)

    # -- work queue (SQL in sqlite_work; writes under BEGIN IMMEDIATE) ---------------------------
    async def enqueue_work(
        self, kind: str, target: str, *, now: datetime, payload: dict[str, Any] | None = None,
        delay_s: float = 0.0,
    ) -> WorkItem:
        available_at = work_available_at(kind, target, now, delay_s)
        return await self._write(lambda conn: sqlite_work.enqueue(conn, kind, target, now, available_at, payload))

    async def claim_work(
        self, owner: str, *, ttl_s: float, now: datetime, kinds: tuple[str, ...] | None = None, limit: int = 1
    ) -> list[WorkItem]:
        expires_at = claim_expiry(owner, ttl_s, now)
        check_limit(limit)
        return await self._write(lambda conn: sqlite_work.claim(conn, owner, now, expires_at, kinds, limit))

    async def renew_work(self, item: WorkItem, *, ttl_s: float, now: datetime) -> WorkItem | None:
        expires_at = claim_expiry(item.claimed_by or "", ttl_s, now)
        return await self._write(lambda conn: sqlite_work.renew(conn, item, now, expires_at))

    async def complete_work(self, item: WorkItem) -> bool:
        return await self._write(lambda conn: sqlite_work.complete(conn, item))

    async def release_work(
        self, item: WorkItem, *, now: datetime, delay_s: float = 0.0, error: str | None = None,
        count_attempt: bool = True,
    ) -> bool:
        available_at = work_available_at(item.kind, item.target, now, delay_s)
        return await self._write(lambda conn: sqlite_work.release(conn, item, available_at, error, count_attempt))

    async def wake_work(self, kind: str, target: str, *, now: datetime) -> bool:
        now = work_available_at(kind, target, now, 0.0)  # checks the arguments
        return await self._write(lambda conn: sqlite_work.wake(conn, kind, target, now))

    async def bury_work(self, item: WorkItem, *, now: datetime, error: str | None = None) -> bool:
        work_available_at(item.kind, item.target, now, 0.0)  # checks now
        return await self._write(lambda conn: sqlite_work.bury(conn, item, now, error))

    async def list_dead_work(self, kind: str | None = None) -> list[DeadWork]:
        return await self._read(lambda conn: sqlite_work.list_dead(conn, kind))

    async def dead_work_page(self, *, limit: int, before_id: int | None = None) -> list[DeadWork]:
        """:func:`~obsmem.storage.contract.dead_work_page`: ``limit`` rows at most."""
        check_page_limit(limit)
        return await self._read(lambda conn: sqlite_work.dead_page(conn, limit, before_id))

    async def count_dead_work(self) -> int:
        """:func:`~obsmem.storage.contract.count_dead_work`: counted in SQL."""
        return await self._read(sqlite_work.count_dead)

    async def retry_dead_work(self, dead_id: int, *, now: datetime) -> WorkItem | None:
        work_available_at("retry", str(dead_id), now, 0.0)  # checks now
        return await self._write(lambda conn: sqlite_work.retry_dead(conn, dead_id, now))

    async def count_work(self, *, now: datetime) -> list[WorkCounts]:
        """:func:`~obsmem.storage.contract.count_work`: counted in SQL, one row per kind."""
        return await self._read(lambda conn: sqlite_work.count_kinds(conn, now))

    async def has_work(self, kind: str) -> bool:
        """:func:`~obsmem.storage.contract.has_work`: one row at most."""
        return await self._read(lambda conn: sqlite_work.has_kind(conn, kind))

    async def list_work(self, kind: str | None = None) -> list[WorkItem]:
        return await self._read(lambda conn: sqlite_work.list_items(conn, kind))

    async def delete_work(self, target: str) -> int:
        def op(conn: Conn) -> int:
            conn.execute("DELETE FROM dead_work WHERE target = ?", (target,))
            return conn.execute("DELETE FROM work_items WHERE target = ?", (target,)).rowcount

        return await self._write(op)

    # -- cost ledger (SQL in obsmem.storage.ledger) ---------------------------------------------
    async def record_model_calls(self, calls: Sequence[ModelCall]) -> int:
        rows = [ledger.insert_params(call) for call in calls]

        def op(conn: Conn) -> int:
            conn.executemany(ledger.insert_sql("?"), rows)
            return len(rows)

        return await self._write(op) if rows else 0

    async def usage_rows(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[UsageRow]:
        ledger.check_window(since, until)
        sql, params = ledger.usage_sql("?", thread_id, resource_id, since, until)
        return await self._read(lambda conn: [ledger.usage_row(tuple(r)) for r in conn.execute(sql, params)])

    async def delete_model_calls(self, *, thread_id: str | None = None, resource_id: str | None = None) -> int:
        sql, params = ledger.delete_sql("?", thread_id, resource_id)
        return await self._write(lambda conn: conn.execute(sql, params).rowcount)

    async def section_messages_page(self, thread_id: str, *, after_seq: int = 0, limit: int) -> list[Message]:
        """:func:`~obsmem.storage.contract.section_messages`: the thread's first ``limit`` messages
        after ``after_seq`` whose parts hold a section tag, by seq (:meth:`_holding_page`)."""
        return await self._holding_page(thread_id, "parts", SECTION_NEEDLE, after_seq, limit)

    async def metadata_messages_page(
        self, thread_id: str, *, needle: str, after_seq: int = 0, limit: int
    ) -> list[Message]:
        """:func:`~obsmem.storage.contract.metadata_messages`: the thread's first ``limit``
        messages after ``after_seq`` whose metadata holds ``needle``, by seq (:meth:`_holding_page`)."""
        return await self._holding_page(thread_id, "metadata", needle, after_seq, limit)

    async def _holding_page(
        self, thread_id: str, column: Literal["parts", "metadata"], needle: str, after_seq: int, limit: int
    ) -> list[Message]:
        """The thread's first ``limit`` messages after ``after_seq`` whose ``column`` holds
        ``needle``, by seq; read from messages_by_thread from ``after_seq`` on, only those rows
        decoded and handed out. Unknown thread → ThreadNotFoundError."""
        check_page_limit(limit)
        sql = (
            f"{_MESSAGE_SELECT} WHERE m.thread_id = ? AND m.seq > ? "
            f"AND instr(m.{column}, ?) > 0 ORDER BY m.seq LIMIT ?"
        )
        params = (thread_id, after_seq, needle, limit)

        def op(conn: Conn) -> list[Message]:
            found = [self._message(row) for row in conn.execute(sql, params)]
            if not found:
                self._require_thread(conn, thread_id)
            return found

        return await self._read(op)

    async def resource_orgs(self, resource_id: str) -> list[str | None]:
        """:func:`~obsmem.storage.contract.resource_orgs`: ``SELECT DISTINCT org_id`` over the
        resource's range of threads_by_resource, in SQL; one row per org handed out."""
        sql = "SELECT DISTINCT org_id FROM threads WHERE resource_id = ?"
        return await self._read(lambda conn: [row[0] for row in conn.execute(sql, (resource_id,))])

    async def resource_totals(self, resource_id: str, *, scope: str) -> tuple[int, int, int]:
        """:func:`~obsmem.storage.contract.resource_totals`: aggregates in SQL over the resource's
        range of threads_by_resource, each thread's messages counted from messages_by_thread and
        its head read from the one-head index (thread scope); one row of numbers handed out."""
        own = (
            "(SELECT total_tokens_observed FROM observation_records "
            "WHERE lineage = 'thread:' || t.id AND superseded_by IS NULL)"
        )
        sql = (
            "SELECT COUNT(*), "
            "COALESCE(SUM((SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id)), 0), "
            f"COALESCE(SUM({own if scope == 'thread' else 0}), 0) "
            "FROM threads t WHERE t.resource_id = ?"
        )
        shared = (
            "SELECT total_tokens_observed FROM observation_records WHERE lineage = ? AND superseded_by IS NULL"
        )

        def op(conn: Conn) -> tuple[int, int, int]:
            threads, messages, observed = conn.execute(sql, (resource_id,)).fetchone()
            if scope == "resource" and threads:
                row = conn.execute(shared, (lineage_key("resource", None, resource_id),)).fetchone()
                observed = row[0] if row else 0
            return int(threads), int(messages), int(observed)

        return await self._read(op)


def _check_page(limit: int | None, offset: int) -> None:
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidInputError("limit and offset must not be negative.")
