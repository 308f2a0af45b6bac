"""The SQLite knowledge store: the knowledge graph in one SQLite file (WAL mode).

It follows the house pattern of :mod:`obsmem.storage.sqlite.store`:

* one worker thread owns the connection, so blocking ``sqlite3`` calls stay off the event loop
  and this store's operations are serialised;
* every write runs in ``BEGIN IMMEDIATE``, taking the write lock before it reads, so the checks
  a mutation makes (versions, ceilings, tombstones, idempotency keys) still hold when it
  commits, even with other processes on the same file; reads run in a deferred transaction
  so each sees one snapshot;
* the schema evolves through numbered migrations recorded in ``_obsmem_knowledge_migrations``,
  separate from the message store's table so the two can share a file or not.

Each row keeps the full model as JSON in ``doc`` plus the few columns it is looked up by, so
the rules in :mod:`~obsmem.knowledge.store.ops` see exactly what the in-memory adapter sees. The
queries themselves are shared with the PostgreSQL adapter in
:mod:`~obsmem.knowledge.store.sql_tables` (:data:`~obsmem.knowledge.store.sql_tables.SQLITE_DIALECT`);
this module keeps the connection, the transactions and the migrations.

Forgetting a value and purging a scope are hard deletes: ``secure_delete`` zeroes the space
they free, and each ends by rebuilding the file (``VACUUM``: SQLite's page balancing leaves
stale copies of moved rows in pages' unused space, where no delete reaches) and truncating the
write-ahead log, so the erased text is not left in the file or the ``-wal`` file either
(:mod:`obsmem.storage.sqlite.wal`: the cost, the bound when another connection keeps the file
busy, and the retry after later writes). Before the rebuild the lexical search's FTS5 index is
merged into one segment (:data:`SEARCH_OPTIMIZE`), since FTS5 keeps a deleted row's trigrams in
its older segments until they are merged: like the rebuild, its cost is that of the whole index.
"""

from __future__ import annotations

import os
import sqlite3
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from obsmem.clock import Clock
from obsmem.errors import ObsmemError, StorageError
from obsmem.files import prepare_database_file, untouched_reader
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.forked import ForkRefusal
from obsmem.knowledge.store.ids import UlidGenerator
from obsmem.knowledge.store.speakers import mark_unowned_speaker_facts
from obsmem.knowledge.store.sql_tables import (
    NODE_PAGE_INDEXES,
    SQLITE_DIALECT,
    SqlKnowledgeTables,
    fill_search_index,
)
from obsmem.knowledge.store.tables import KNOWLEDGE_MIGRATIONS_TABLE, KnowledgeTables
from obsmem.storage.connection import ConnectionThread
from obsmem.storage.migrations import SQLITE, MigrationSet
from obsmem.storage.sqlite.wal import LogTruncation

__all__ = [
    "KNOWLEDGE_MIGRATIONS",
    "KNOWLEDGE_MIGRATIONS_TABLE",
    "SQLiteKnowledgeStore",
    "SQLiteKnowledgeTables",
]

T = TypeVar("T")
Conn = sqlite3.Connection

BUSY_TIMEOUT_S = 10.0
BUSY_RETRIES = 5


# The knowledge schema's own version table, so it evolves separately from the message store's.
KNOWLEDGE_MIGRATIONS: MigrationSet[Conn] = MigrationSet(
    SQLITE, KNOWLEDGE_MIGRATIONS_TABLE, "sqlite-knowledge"
)


@KNOWLEDGE_MIGRATIONS.register
def m001_knowledge_initial(conn: Conn) -> None:
    statements = [
        """CREATE TABLE knowledge_nodes (
            id TEXT PRIMARY KEY, scope TEXT NOT NULL, name_key TEXT NOT NULL, doc TEXT NOT NULL)""",
        # Identity is (scope, case-insensitive name): a second node of that name cannot exist.
        "CREATE UNIQUE INDEX knowledge_nodes_identity ON knowledge_nodes (scope, name_key)",
        """CREATE TABLE knowledge_node_mentions (
            node_id TEXT NOT NULL, target_id TEXT NOT NULL, PRIMARY KEY (node_id, target_id))""",
        "CREATE INDEX knowledge_node_mentions_by_target ON knowledge_node_mentions (target_id)",
        """CREATE TABLE knowledge_records (
            id TEXT PRIMARY KEY, node_id TEXT NOT NULL, scope TEXT NOT NULL, doc TEXT NOT NULL)""",
        "CREATE INDEX knowledge_records_by_node ON knowledge_records (node_id)",
        "CREATE INDEX knowledge_records_by_scope ON knowledge_records (scope)",
        """CREATE TABLE knowledge_record_mentions (
            record_id TEXT NOT NULL, target_id TEXT NOT NULL, PRIMARY KEY (record_id, target_id))""",
        "CREATE INDEX knowledge_record_mentions_by_target ON knowledge_record_mentions (target_id)",
        "CREATE TABLE knowledge_events (id TEXT PRIMARY KEY, scope TEXT NOT NULL, doc TEXT NOT NULL)",
        "CREATE INDEX knowledge_events_by_scope ON knowledge_events (scope, id)",
        """CREATE TABLE knowledge_tombstones (
            id TEXT PRIMARY KEY, node_id TEXT NOT NULL, scope TEXT NOT NULL, doc TEXT NOT NULL)""",
        "CREATE INDEX knowledge_tombstones_by_node ON knowledge_tombstones (node_id)",
        """CREATE TABLE knowledge_outbox (
            id TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL UNIQUE, status TEXT NOT NULL,
            doc TEXT NOT NULL)""",
        "CREATE INDEX knowledge_outbox_open ON knowledge_outbox (status, id)",
        """CREATE TABLE knowledge_vectors (
            document_id TEXT PRIMARY KEY, record_id TEXT NOT NULL, scope TEXT NOT NULL,
            embedder TEXT NOT NULL, dimensions INTEGER NOT NULL, vector BLOB NOT NULL)""",
        "CREATE INDEX knowledge_vectors_by_scope ON knowledge_vectors (scope)",
    ]
    for statement in statements:
        conn.execute(statement)


@KNOWLEDGE_MIGRATIONS.register
def m002_knowledge_open_outbox(conn: Conn) -> None:
    """Open outbox entries in id order without the completed ones (PostgreSQL's index from the
    start): a claim walks ``status <> 'completed' ORDER BY id`` from where it is, where the old
    (status, id) index made every claim scan and sort the whole outbox, completed history included."""
    conn.execute("DROP INDEX IF EXISTS knowledge_outbox_open")
    conn.execute("CREATE INDEX knowledge_outbox_open ON knowledge_outbox (id) WHERE status <> 'completed'")


@KNOWLEDGE_MIGRATIONS.register
def m003_knowledge_pages_by_node(conn: Conn) -> None:
    """A node's records and the records mentioning it in id order, so a page of them walks an
    index from its cursor instead of reading (and sorting) all the node knows."""
    for statement in NODE_PAGE_INDEXES:
        conn.execute(statement)


@KNOWLEDGE_MIGRATIONS.register
def m004_knowledge_unowned_speaker_facts(conn: Conn) -> None:
    """Mark what a version before 15fe659 filed at org scope about the speaker (one user's own
    facts, seen by the whole org), so only the org itself sees it (:mod:`.speakers`)."""
    mark_unowned_speaker_facts(conn.execute, "?", SQLITE_DIALECT.name_key)


@KNOWLEDGE_MIGRATIONS.register
def m005_knowledge_search_index(conn: Conn) -> None:
    """The lexical search's index (:meth:`~obsmem.knowledge.store.sql_tables.SqlDialect.search_put`):
    a search reads the rows holding its terms, where it read every row of the scope chain. The
    stored nodes and records are indexed here."""
    statements = [
        """CREATE TABLE knowledge_search_rows (
            n INTEGER PRIMARY KEY, kind TEXT NOT NULL, id TEXT NOT NULL, scope TEXT NOT NULL, UNIQUE (kind, id))""",
        # (a search reads its caller's rows by scope: the index finds a term in every scope's rows)
        "CREATE INDEX knowledge_search_rows_scope ON knowledge_search_rows (scope)",
        "CREATE VIRTUAL TABLE knowledge_search USING fts5(hay, tokenize = 'trigram case_sensitive 1')",
        "CREATE VIRTUAL TABLE knowledge_search_vocab USING fts5vocab(knowledge_search, instance)",
    ]
    for statement in statements:
        conn.execute(statement)
    fill_search_index(conn, SQLITE_DIALECT)


SEARCH_OPTIMIZE = "INSERT INTO knowledge_search (knowledge_search) VALUES ('optimize')"
"""Merge the search index into one segment: FTS5 keeps a deleted row's trigrams (and positions)
in its older segments until they are merged, so an erase ends with this, before the file is
rebuilt."""


class SQLiteKnowledgeTables(SqlKnowledgeTables):
    """:class:`KnowledgeTables` over one connection inside an open transaction."""

    def __init__(self, conn: Conn) -> None:
        super().__init__(conn, SQLITE_DIALECT)


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in str(exc).lower()


# -- a fork -----------------------------------------------------------------------------------------

#: Every SQLiteKnowledgeStore made in this process (see _let_go_after_fork).
_STORES: weakref.WeakSet[SQLiteKnowledgeStore] = weakref.WeakSet()
#: Database files this process may not open: it was forked while a thread of its parent was using
#: them (see _let_go_after_fork). Inherited by later forks, as the copies are.
_FORKED_MID_CALL: set[str] = set()


def _let_go_after_fork() -> None:
    """In a child just forked (``os.register_at_fork``): close the SQLite connections it inherited,
    as :mod:`obsmem.storage.sqlite.store` does for the message store.

    SQLite keeps, per process, one record of the locks the process holds on each open file, shared
    by all its connections to that file; a fork copies it with the connections, but not the
    system's locks. A store the child opens on the same file (a worker's own ``Knowledge``) would
    share that copied record and never take the database's shared lock, so the parent, closing its
    last connection, checkpoints and deletes the ``-wal`` file under the child: the child's later
    records are lost. Closing the copies first drops the record (it releases nothing of the
    parent's, and cannot checkpoint while the parent holds the file). A copy some thread was using
    at the fork is left alone, and every other then, and their files are refused in this process
    (:func:`_refuse_forked_mid_call`).
    """
    stores = list(_STORES)
    if any(store._conn_lock.locked() for store in stores):
        _FORKED_MID_CALL.update(os.path.realpath(store.path) for store in stores if store._conn is not None)
        return
    for store in stores:
        conn, store._conn = store._conn, None
        try:
            if conn is not None and not conn.in_transaction:
                conn.close()
        except Exception:  # noqa: BLE001 - a copy the child never uses: nothing to report
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_let_go_after_fork)


def _refuse_forked_mid_call(path: Path) -> None:
    if _FORKED_MID_CALL and os.path.realpath(path) in _FORKED_MID_CALL:
        raise StorageError(
            f"Knowledge store {path}: this process ({os.getpid()}) was forked while its parent was using "
            "this database (a knowledge call was running on another thread). The copies of the parent's "
            "SQLite connections hold its lock records, which a connection opened here would share. Fork "
            "while no knowledge call runs, or start workers with multiprocessing's 'spawn' or "
            "'forkserver' method."
        )


class SQLiteKnowledgeStore(ForkRefusal, ConnectionThread, TablesKnowledgeStore):
    """A :class:`~obsmem.knowledge.store.contract.KnowledgeStore` in one SQLite file.

    Constructing it does no I/O; the file is created, switched to WAL and migrated on first use::

        async with SQLiteKnowledgeStore("knowledge.db") as store:
            node = await store.create_node("Jane", "person", "org:acme", actor="me", reason="demo")
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        ids: UlidGenerator | None = None,
        busy_timeout: float = BUSY_TIMEOUT_S,
    ) -> None:
        super().__init__(clock=clock, ids=ids)
        self.path = Path(path).expanduser().absolute()
        self.url = f"sqlite:///{self.path}"
        self.busy_timeout = busy_timeout
        self._note_process(str(self.path))  # a copy in a forked child refuses every call (ForkRefusal)
        self._start_thread("obsmem-knowledge")
        _STORES.add(self)  # its connection is let go in a forked child (_let_go_after_fork)
        self._conn: Conn | None = None  # touched only on the worker thread
        self._log = LogTruncation(busy_timeout)  # used on the worker thread

    def __repr__(self) -> str:
        return f"SQLiteKnowledgeStore({str(self.path)!r})"

    async def _transact(self, write: bool, fn: Callable[[KnowledgeTables], T]) -> T:
        begin = "BEGIN IMMEDIATE" if write else "BEGIN"
        return await self._on_thread(self._run, begin, fn)

    async def forget_value(
        self, value: str, scope: str, *, actor: str, reason: str, within: str | None = None
    ) -> dict[str, int]:
        await self._on_thread(self._note_erase)
        counts = await super().forget_value(value, scope, actor=actor, reason=reason, within=within)
        await self.truncate_wal()
        return counts

    async def erase_records(
        self, record_ids: Sequence[str], scope: str, *, actor: str, reason: str
    ) -> dict[str, int]:
        await self._on_thread(self._note_erase)
        counts = await super().erase_records(record_ids, scope, actor=actor, reason=reason)
        await self.truncate_wal()
        return counts

    async def purge_scope(self, scope: str, *, actor: str, reason: str) -> dict[str, int]:
        await self._on_thread(self._note_erase)
        counts = await super().purge_scope(scope, actor=actor, reason=reason)
        await self.truncate_wal()
        return counts

    @property
    def erase_note(self) -> Path:
        """The empty file beside the database that says an erase began and its log is not
        truncated yet: made before an erase changes anything, removed once :meth:`truncate_wal`
        succeeded. A process killed in between (SIGKILL, the OOM killer) leaves it, and the next
        open of the store truncates the log first, so the erased text is not left in the ``-wal``
        file while the restarted app runs."""
        return self.path.with_name(self.path.name + "-erase-unfinished")

    def _note_erase(self) -> None:
        self._connection()  # the folder prepared, and a note left by a killed erase done first
        try:
            self.erase_note.touch(mode=0o600)
        except OSError as exc:
            raise StorageError(f"Knowledge store {self.path}: cannot note the erase: {exc}") from exc

    def _cleaned(self, conn: Conn) -> bool:
        """The search index merged (:data:`SEARCH_OPTIMIZE`), then :meth:`LogTruncation.now`;
        when done, the erase note off."""
        try:
            conn.execute(SEARCH_OPTIMIZE)
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            return False  # another writer kept the lock: the note stays, and the next open retries
        if not self._log.now(conn):
            return False
        self.erase_note.unlink(missing_ok=True)
        return True

    async def truncate_wal(self) -> bool:
        """Move the write-ahead log into the database file and truncate it to zero bytes (done
        after every :meth:`forget_value` and :meth:`purge_scope`). Returns False when another
        connection's read snapshot kept the log after a bounded wait (under a second); the
        truncation is then retried, without waiting, after each later write until it succeeds."""
        return await self._on_thread(self._truncate_wal)

    def _truncate_wal(self) -> bool:
        try:
            return self._cleaned(self._connection())
        except OSError as exc:
            raise StorageError(f"Knowledge store {self.path} cannot be opened: {exc}") from exc
        except sqlite3.Error as exc:
            raise StorageError(f"Knowledge store {self.path} failed: {exc}") from exc

    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Apply (or, with ``dry_run``, list) the pending knowledge migrations of the file."""
        return await self._on_thread(self._migrate, dry_run)

    def _migrate(self, dry_run: bool) -> list[str]:
        try:
            if dry_run:
                return self._pending_in_file()
            _refuse_forked_mid_call(self.path)
            prepare_database_file(self.path, allow_empty=True)
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            try:
                if dry_run:
                    return [m.name for m in KNOWLEDGE_MIGRATIONS.pending(conn)]
                return KNOWLEDGE_MIGRATIONS.migrate(conn)
            finally:
                conn.close()
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"Cannot migrate the knowledge tables in {self.path}: {exc}") from exc

    def _pending_in_file(self) -> list[str]:
        """The steps a migration would apply, writing nothing (:func:`~obsmem.files.untouched_reader`):
        a missing file has them all pending."""
        conn = untouched_reader(self.path, self.busy_timeout)
        if conn is None:
            return KNOWLEDGE_MIGRATIONS.names()
        try:
            return [m.name for m in KNOWLEDGE_MIGRATIONS.pending(conn)]
        finally:
            conn.close()

    # -- worker thread -------------------------------------------------------------------------
    def _run(self, begin: str, fn: Callable[[KnowledgeTables], T]) -> T:
        delay = 0.05
        for attempt in range(BUSY_RETRIES):
            try:
                conn = self._connection()
                conn.execute(begin)
                try:
                    result = fn(SQLiteKnowledgeTables(conn))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:  # never mask the original error
                            pass
                    raise
                if begin == "BEGIN IMMEDIATE":
                    self._log.after_write(conn)
                return result
            except ObsmemError:
                raise
            except OSError as exc:
                raise StorageError(f"Knowledge store {self.path} cannot be opened: {exc}") from exc
            except sqlite3.Error as exc:
                if _is_busy(exc) and attempt < BUSY_RETRIES - 1:
                    time.sleep(delay)
                    delay *= 2
                    continue
                raise StorageError(f"Knowledge store {self.path} failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _connection(self) -> Conn:
        if self._conn is not None:
            return self._conn
        _refuse_forked_mid_call(self.path)
        prepare_database_file(self.path)  # private folder and file; an empty file is refused
        # check_same_thread off: only the worker thread uses it, but a forked child closes its
        # copy on the thread that forked (_let_go_after_fork).
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            # Forgetting and purging are hard deletes: zero the freed pages instead of leaving
            # the deleted text readable in the file.
            conn.execute("PRAGMA secure_delete = ON")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StorageError(f"Could not switch {self.path} to WAL mode (got '{mode}').")
            KNOWLEDGE_MIGRATIONS.migrate(conn)
            if self.erase_note.exists():  # an erase whose process died before its clean-up
                self._cleaned(conn)  # kept busy by another connection: retried after later writes
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
