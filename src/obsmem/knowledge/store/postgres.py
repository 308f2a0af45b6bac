"""The PostgreSQL knowledge store: the knowledge graph in a database many processes share.

``PostgresKnowledgeStore("postgresql://user@host/db")`` (needs ``pip install 'obsmem[postgres]'``).
It mirrors :mod:`obsmem.knowledge.store.sqlite`, with the database doing SQLite's locking:

* one worker thread owns one synchronous psycopg connection, so blocking calls stay off the
  event loop and this store's operations run one at a time;
* every write transaction starts with ``pg_advisory_xact_lock`` on one key, so writers from
  every process queue there before they read, and the checks a mutation makes (versions,
  ceilings, tombstones, idempotency keys, outbox claims) still hold when it commits: the
  equivalent of SQLite's ``BEGIN IMMEDIATE``, enforced by the server, never by a lock in this
  process. Writes run at read committed, so each statement after the lock sees every write
  committed before it was granted;
* reads run in a ``REPEATABLE READ READ ONLY`` transaction, so each sees one snapshot and never
  waits for a writer;
* the schema evolves through numbered migrations in ``_obsmem_knowledge_migrations``
  (:data:`KNOWLEDGE_MIGRATIONS`, below), applied on first use. They are separate from the
  message store's, so a knowledge store can share a database with a message store or have one
  to itself; every step takes the same migration lock as the message store's, so all obsmem
  schema changes in a database queue behind one another.

Rows are the model as JSON in ``doc`` (text, not ``jsonb``, so a document round-trips exactly)
plus the columns they are looked up by, so the rules in :mod:`~obsmem.knowledge.store.ops` see
exactly what the other adapters see. The queries are shared with the SQLite adapter in
:mod:`~obsmem.knowledge.store.sql_tables`, where ``POSTGRES_DIALECT`` spells what differs;
this module keeps the connection, the transactions and the migrations. ``name_key`` is
``bytea`` because a name may hold a NUL character, which a PostgreSQL ``text`` value cannot; inside ``doc`` JSON escapes it. psycopg is an
optional dependency: this module imports it, so import this module only when it is wanted
(:mod:`obsmem.knowledge` does so lazily).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from obsmem.clock import Clock
from obsmem.errors import ConfigError, ObsmemError, StorageError
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.forked import ForkRefusal
from obsmem.knowledge.store.ids import UlidGenerator
from obsmem.knowledge.store.speakers import mark_unowned_speaker_facts
from obsmem.knowledge.store.sql_tables import (
    NODE_PAGE_INDEXES,
    POSTGRES_DIALECT,
    SqlKnowledgeTables,
    fill_search_index,
)
from obsmem.knowledge.store.tables import KNOWLEDGE_MIGRATIONS_TABLE, KnowledgeTables
from obsmem.storage.connection import ConnectionThread
from obsmem.storage.migrations import MigrationSet
from obsmem.storage.postgres.migrations import POSTGRESQL
from obsmem.storage.postgres.store import redact_url

__all__ = [
    "KNOWLEDGE_MIGRATIONS",
    "KNOWLEDGE_MIGRATIONS_TABLE",
    "PostgresKnowledgeStore",
    "PostgresKnowledgeTables",
]

T = TypeVar("T")
Conn = psycopg.Connection[Any]

CONNECT_TIMEOUT_S = 15.0
CONFLICT_RETRIES = 5
# The lock every knowledge write transaction takes first, named like the lease locks
# ("obsmem.lease:<key>") so it is recognisable in pg_locks.
_WRITE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('obsmem.knowledge.write', 0))"
_BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_URL_SCHEMES = ("postgresql://", "postgres://", "postgresql+")


KNOWLEDGE_MIGRATIONS: MigrationSet[Conn] = MigrationSet(
    POSTGRESQL, KNOWLEDGE_MIGRATIONS_TABLE, "postgresql-knowledge"
)


@KNOWLEDGE_MIGRATIONS.register
def m001_knowledge_initial(conn: Conn) -> None:
    statements = [
        """CREATE TABLE knowledge_nodes (
            id TEXT PRIMARY KEY, scope TEXT NOT NULL, name_key BYTEA NOT NULL, doc TEXT NOT NULL)""",
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
        "CREATE INDEX knowledge_tombstones_by_scope ON knowledge_tombstones (scope)",
        """CREATE TABLE knowledge_outbox (
            id TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL UNIQUE, status TEXT NOT NULL,
            doc TEXT NOT NULL)""",
        "CREATE INDEX knowledge_outbox_open ON knowledge_outbox (id) WHERE status <> 'completed'",
        # The embedding as little-endian float32 bytes: exactly what was stored comes back.
        """CREATE TABLE knowledge_vectors (
            document_id TEXT PRIMARY KEY, record_id TEXT NOT NULL, scope TEXT NOT NULL,
            embedder TEXT NOT NULL, dimensions INTEGER NOT NULL, vector BYTEA NOT NULL)""",
        "CREATE INDEX knowledge_vectors_by_scope ON knowledge_vectors (scope)",
    ]
    for statement in statements:
        conn.execute(statement)


@KNOWLEDGE_MIGRATIONS.register
def m002_knowledge_pages_by_node(conn: Conn) -> None:
    """A node's records and the records mentioning it in id order, so a page of them walks an
    index from its cursor instead of reading (and sorting) all the node knows."""
    for statement in NODE_PAGE_INDEXES:
        conn.execute(statement)


@KNOWLEDGE_MIGRATIONS.register
def m003_knowledge_unowned_speaker_facts(conn: Conn) -> None:
    """Mark what a version before 15fe659 filed at org scope about the speaker (one user's own
    facts, seen by the whole org), so only the org itself sees it (:mod:`.speakers`)."""
    mark_unowned_speaker_facts(conn.execute, "%s", POSTGRES_DIALECT.name_key)


@KNOWLEDGE_MIGRATIONS.register
def m004_knowledge_search_index(conn: Conn) -> None:
    """The lexical search's index: each node's and record's search text (casefolded by Python)
    in ``knowledge_search``, with a pg_trgm GIN index on it, so a search reads the rows holding
    its terms where it read every row of the scope chain. The stored rows are indexed here.

    Where pg_trgm cannot be installed (a user without the right), the table has no trigram
    index: a search then scans ``knowledge_search`` in the server (still decoding only the rows
    that match)."""
    conn.execute(
        """CREATE TABLE knowledge_search (
            kind TEXT NOT NULL, id TEXT NOT NULL, scope TEXT NOT NULL, hay TEXT NOT NULL, PRIMARY KEY (kind, id))"""
    )
    # A search asks for its caller's scopes: the planner reads them by this index where they hold
    # fewer rows than the trigram index finds in every scope (or than a term too short for it).
    conn.execute("CREATE INDEX knowledge_search_scope ON knowledge_search (scope)")
    try:
        with conn.transaction():  # a savepoint: a refused extension leaves the step going on
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            conn.execute("CREATE INDEX knowledge_search_hay ON knowledge_search USING gin (hay gin_trgm_ops)")
    except psycopg.Error:
        pass
    fill_search_index(conn, POSTGRES_DIALECT)


class PostgresKnowledgeTables(SqlKnowledgeTables):
    """:class:`KnowledgeTables` over one connection inside an open transaction."""

    def __init__(self, conn: Conn) -> None:
        super().__init__(conn, POSTGRES_DIALECT)


def _connection_url(url: str) -> str:
    """The libpq form of ``url``; SQLAlchemy-style ``postgresql+psycopg://`` is accepted too."""
    text = url.strip()
    if not text.startswith(_URL_SCHEMES):
        raise ConfigError(
            "knowledge store",
            f"'{redact_url(text)}' is not a PostgreSQL URL",
            allowed="postgresql://user@host/db",
        )
    if text.startswith("postgresql+"):
        return "postgresql://" + text.split("://", 1)[1]
    return text


class PostgresKnowledgeStore(ForkRefusal, ConnectionThread, TablesKnowledgeStore):
    """A :class:`~obsmem.knowledge.store.contract.KnowledgeStore` in a PostgreSQL database.

    Constructing it does no I/O; the connection opens and pending migrations run on first use,
    where an unreachable server surfaces as :class:`~obsmem.errors.StorageError`::

        async with PostgresKnowledgeStore("postgresql://me@db.internal/obsmem") as store:
            node = await store.create_node("Jane", "person", "org:acme", actor="me", reason="demo")
    """

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        ids: UlidGenerator | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        statement_timeout_s: float | None = 30.0,
        lock_timeout_s: float | None = 10.0,
    ) -> None:
        super().__init__(clock=clock, ids=ids)
        self.url = _connection_url(url)
        self.connect_timeout_s = connect_timeout_s
        # Per-session bounds, as the message store's: a lock another session holds (the write
        # lock of a process stopped inside a write) fails a call after lock_timeout_s instead of
        # holding it as long as it is held. None: the server's setting.
        self.statement_timeout_s = statement_timeout_s
        self.lock_timeout_s = lock_timeout_s
        self._note_process(redact_url(self.url))  # a copy in a forked child refuses every call
        self._start_thread("obsmem-knowledge-pg")
        self._conn: Conn | None = None  # touched only on the worker thread

    def __repr__(self) -> str:
        return f"PostgresKnowledgeStore({redact_url(self.url)!r})"

    async def _transact(self, write: bool, fn: Callable[[KnowledgeTables], T]) -> T:
        return await self._on_thread(self._run, write, fn)

    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Apply (or, with ``dry_run``, list) the pending knowledge migrations, on a connection of its own."""
        return await self._on_thread(self._migrate, dry_run)

    def _migrate(self, dry_run: bool) -> list[str]:
        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            ) as conn:
                if dry_run:
                    return [m.name for m in KNOWLEDGE_MIGRATIONS.pending(conn)]
                return KNOWLEDGE_MIGRATIONS.migrate(conn)
        except psycopg.Error as exc:
            raise StorageError(
                f"Cannot migrate the knowledge tables at {redact_url(self.url)}: {exc}. Check that the "
                "server is running and the user may create tables."
            ) from exc

    # -- worker thread -------------------------------------------------------------------------
    def _run(self, write: bool, fn: Callable[[KnowledgeTables], T]) -> T:
        delay = 0.01
        for attempt in range(CONFLICT_RETRIES):
            conn = self._connection()
            try:
                conn.execute(_BEGIN_WRITE if write else _BEGIN_READ)
                if write:
                    conn.execute(_WRITE_LOCK)
                result = fn(PostgresKnowledgeTables(conn))
                conn.execute("COMMIT")
                return result
            except BaseException as exc:
                self._abandon(conn)
                if isinstance(exc, ObsmemError) or not isinstance(exc, psycopg.Error):
                    raise
                if isinstance(exc, _RETRYABLE) and attempt < CONFLICT_RETRIES - 1:
                    time.sleep(delay)
                    delay *= 2
                    continue
                if isinstance(exc, pg_errors.LockNotAvailable):
                    raise StorageError(
                        f"Knowledge store {redact_url(self.url)}: a lock was not granted within lock_timeout "
                        f"({self.lock_timeout_s}s; another session holds it): {exc}"
                    ) from exc
                raise StorageError(f"Knowledge store {redact_url(self.url)} failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _abandon(self, conn: Conn) -> None:
        """Roll back whatever is open; a connection that cannot do that is dropped and reopened
        by the next operation."""
        if conn.broken or conn.closed:
            self._close_connection()
            return
        if conn.info.transaction_status == TransactionStatus.IDLE:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:  # never mask the original error
            self._close_connection()

    def _connection(self) -> Conn:
        if self._conn is not None:
            return self._conn
        where = redact_url(self.url)
        try:
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            )
        except psycopg.Error as exc:
            raise StorageError(
                f"Cannot connect to PostgreSQL at {where}: {exc}. Check that the server is running "
                "and the URL (host, port, user, database) is right."
            ) from exc
        try:
            KNOWLEDGE_MIGRATIONS.migrate(conn)
            for setting, seconds in (("statement_timeout", self.statement_timeout_s), ("lock_timeout", self.lock_timeout_s),
                                     ("idle_in_transaction_session_timeout", self.statement_timeout_s)):
                if seconds is not None:
                    conn.execute(f"SET {setting} = {max(1, int(seconds * 1000))}")
        except psycopg.Error as exc:
            conn.close()
            raise StorageError(
                f"Cannot migrate the knowledge tables at {where}: {exc}. "
                "Check that the user may create tables."
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
