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
exactly what the other adapters see. ``name_key`` is ``bytea`` because a name may hold a NUL
character, which a PostgreSQL ``text`` value cannot; inside ``doc`` JSON escapes it. psycopg is an
optional dependency: this module imports it, so import this module only when it is wanted
(:mod:`obsmem.knowledge` does so lazily).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from pydantic import BaseModel, ValidationError

from obsmem.clock import Clock
from obsmem.errors import ConfigError, ObsmemError, StorageError
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import (
    ActivityEvent,
    ForgottenValue,
    Node,
    OutboxEntry,
    Record,
    StoredVector,
    Tombstone,
)
from obsmem.knowledge.store.ids import UlidGenerator
from obsmem.knowledge.store.tables import (
    FORGOTTEN_NODE_ID,
    KNOWLEDGE_MIGRATIONS_TABLE,
    KnowledgeTables,
    name_key,
)
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
M = TypeVar("M", bound=BaseModel)
Conn = psycopg.Connection[Any]

CONNECT_TIMEOUT_S = 15.0
CONFLICT_RETRIES = 5
# The lock every knowledge write transaction takes first, named like the lease locks
# ("obsmem.lease:<key>") so it is recognisable in pg_locks.
_WRITE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('obsmem.knowledge.write', 0))"
_BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_VECTOR_DTYPE = np.dtype("<f4")
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


# Tombstone rows that are tombstones, and those that are forgotten values (FORGOTTEN_NODE_ID).
_REAL = " AND node_id <> ''"
_FORGOTTEN = " AND node_id = ''"


def _load(cls: type[M], doc: str) -> M:
    try:
        return cls.model_validate_json(doc)
    except ValidationError as exc:
        raise StorageError(f"A stored {cls.__name__} row could not be decoded: {exc}") from exc


def _name_key(name: str) -> bytes:
    return name_key(name).encode("utf-8")


class PostgresKnowledgeTables:
    """:class:`KnowledgeTables` over one connection inside an open transaction."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def _docs(self, cls: type[M], sql: str, params: Sequence[object] = ()) -> list[M]:
        return [_load(cls, row[0]) for row in self.conn.execute(sql, tuple(params))]

    def _one(self, cls: type[M], sql: str, params: Sequence[object]) -> M | None:
        found = self._docs(cls, sql, params)
        return found[0] if found else None

    def _replace_mentions(self, table: str, owner_column: str, owner_id: str, targets: Sequence[str]) -> None:
        self.conn.execute(f"DELETE FROM {table} WHERE {owner_column} = %s", (owner_id,))
        if targets:
            self.conn.execute(
                f"INSERT INTO {table} ({owner_column}, target_id) SELECT %s, unnest(%s::text[]) "
                "ON CONFLICT DO NOTHING",
                (owner_id, list(targets)),
            )

    # nodes
    def node(self, node_id: str) -> Node | None:
        return self._one(Node, "SELECT doc FROM knowledge_nodes WHERE id = %s", (node_id,))

    def node_by_name(self, scope_key: str, key: str) -> Node | None:
        return self._one(
            Node,
            "SELECT doc FROM knowledge_nodes WHERE scope = %s AND name_key = %s",
            (scope_key, key.encode("utf-8")),
        )

    def save_node(self, node: Node) -> None:
        self.conn.execute(
            "INSERT INTO knowledge_nodes (id, scope, name_key, doc) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET scope = EXCLUDED.scope, name_key = EXCLUDED.name_key, "
            "doc = EXCLUDED.doc",
            (node.id, node.scope, _name_key(node.name), node.model_dump_json()),
        )
        self._replace_mentions("knowledge_node_mentions", "node_id", node.id, node.mentions)

    def nodes_in(self, scope_keys: Sequence[str]) -> list[Node]:
        return self._docs(
            Node, "SELECT doc FROM knowledge_nodes WHERE scope = ANY(%s) ORDER BY id", (list(scope_keys),)
        )

    def nodes_mentioning(self, node_id: str) -> list[Node]:
        return self._docs(
            Node,
            "SELECT n.doc FROM knowledge_nodes AS n JOIN knowledge_node_mentions AS m ON m.node_id = n.id "
            "WHERE m.target_id = %s ORDER BY n.id",
            (node_id,),
        )

    # records
    def record(self, record_id: str) -> Record | None:
        return self._one(Record, "SELECT doc FROM knowledge_records WHERE id = %s", (record_id,))

    def save_record(self, record: Record) -> None:
        stored = record.model_copy(update={"valid_until": None})
        self.conn.execute(
            "INSERT INTO knowledge_records (id, node_id, scope, doc) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET node_id = EXCLUDED.node_id, scope = EXCLUDED.scope, "
            "doc = EXCLUDED.doc",
            (stored.id, stored.node_id, stored.scope, stored.model_dump_json()),
        )
        self._replace_mentions("knowledge_record_mentions", "record_id", stored.id, stored.mentions)

    def records_in(self, scope_keys: Sequence[str]) -> list[Record]:
        return self._docs(
            Record, "SELECT doc FROM knowledge_records WHERE scope = ANY(%s) ORDER BY id", (list(scope_keys),)
        )

    def records_about(self, node_id: str) -> list[Record]:
        return self._docs(
            Record, "SELECT doc FROM knowledge_records WHERE node_id = %s ORDER BY id", (node_id,)
        )

    def records_mentioning(self, node_id: str) -> list[Record]:
        return self._docs(
            Record,
            "SELECT r.doc FROM knowledge_records AS r "
            "JOIN knowledge_record_mentions AS m ON m.record_id = r.id "
            "WHERE m.target_id = %s ORDER BY r.id",
            (node_id,),
        )

    # audit log and tombstones
    def add_event(self, event: ActivityEvent) -> None:
        self.conn.execute(
            "INSERT INTO knowledge_events (id, scope, doc) VALUES (%s, %s, %s)",
            (event.id, event.scope, event.model_dump_json()),
        )

    def events_in(self, scope_keys: Sequence[str]) -> list[ActivityEvent]:
        return self._docs(
            ActivityEvent, "SELECT doc FROM knowledge_events WHERE scope = ANY(%s)", (list(scope_keys),)
        )

    def save_tombstone(self, tombstone: Tombstone) -> None:
        self.conn.execute(
            "INSERT INTO knowledge_tombstones (id, node_id, scope, doc) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET node_id = EXCLUDED.node_id, scope = EXCLUDED.scope, "
            "doc = EXCLUDED.doc",
            (tombstone.id, tombstone.node_id, tombstone.scope, tombstone.model_dump_json()),
        )

    def tombstones_for(self, node_id: str) -> list[Tombstone]:
        return self._docs(Tombstone, "SELECT doc FROM knowledge_tombstones WHERE node_id = %s", (node_id,))

    def tombstones_in(self, scope_keys: Sequence[str]) -> list[Tombstone]:
        return self._docs(
            Tombstone,
            "SELECT doc FROM knowledge_tombstones WHERE scope = ANY(%s) AND node_id <> %s",
            (list(scope_keys), FORGOTTEN_NODE_ID),
        )

    # outbox and vectors
    def outbox_key_exists(self, idempotency_key: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM knowledge_outbox WHERE idempotency_key = %s", (idempotency_key,)
        ).fetchone()
        return row is not None

    def save_outbox(self, entry: OutboxEntry) -> None:
        self.conn.execute(
            "INSERT INTO knowledge_outbox (id, idempotency_key, status, doc) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET idempotency_key = EXCLUDED.idempotency_key, "
            "status = EXCLUDED.status, doc = EXCLUDED.doc",
            (entry.id, entry.idempotency_key, entry.status, entry.model_dump_json()),
        )

    def open_outbox(self) -> list[OutboxEntry]:
        return self._docs(
            OutboxEntry, "SELECT doc FROM knowledge_outbox WHERE status <> 'completed' ORDER BY id"
        )

    def all_outbox(self) -> list[OutboxEntry]:
        return self._docs(OutboxEntry, "SELECT doc FROM knowledge_outbox ORDER BY id")

    def put_vector(self, vector: StoredVector) -> None:
        data = np.ascontiguousarray(vector.vector, dtype=_VECTOR_DTYPE)
        self.conn.execute(
            "INSERT INTO knowledge_vectors (document_id, record_id, scope, embedder, dimensions, vector) "
            "VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (document_id) DO UPDATE SET record_id = EXCLUDED.record_id, "
            "scope = EXCLUDED.scope, embedder = EXCLUDED.embedder, dimensions = EXCLUDED.dimensions, "
            "vector = EXCLUDED.vector",
            (
                vector.document_id,
                vector.record_id,
                vector.scope,
                vector.embedder,
                int(data.shape[0]),
                data.tobytes(),
            ),
        )

    def delete_vector(self, document_id: str, scope: str | None) -> bool:
        if scope is None:
            cursor = self.conn.execute("DELETE FROM knowledge_vectors WHERE document_id = %s", (document_id,))
        else:
            cursor = self.conn.execute(
                "DELETE FROM knowledge_vectors WHERE document_id = %s AND scope = %s", (document_id, scope)
            )
        return cursor.rowcount > 0

    def vectors_in(self, scope_keys: Sequence[str] | None) -> list[StoredVector]:
        sql = "SELECT document_id, record_id, scope, embedder, vector FROM knowledge_vectors"
        params: tuple[object, ...] = ()
        if scope_keys is not None:
            sql += " WHERE scope = ANY(%s)"
            params = (list(scope_keys),)
        sql += " ORDER BY document_id"
        return [
            StoredVector(
                row[0], row[1], row[2], row[3], np.frombuffer(row[4], dtype=_VECTOR_DTYPE).astype(np.float32)
            )
            for row in self.conn.execute(sql, params)
        ]

    # forgotten values: rows of knowledge_tombstones under FORGOTTEN_NODE_ID (see tables.py)
    def save_forgotten(self, forgotten: ForgottenValue) -> None:
        self.conn.execute(
            "INSERT INTO knowledge_tombstones (id, node_id, scope, doc) VALUES (%s, %s, %s, %s)",
            (forgotten.id, FORGOTTEN_NODE_ID, forgotten.scope, forgotten.model_dump_json()),
        )

    def forgotten(self, forgotten_id: str) -> ForgottenValue | None:
        return self._one(
            ForgottenValue,
            "SELECT doc FROM knowledge_tombstones WHERE id = %s AND node_id = %s",
            (forgotten_id, FORGOTTEN_NODE_ID),
        )

    def forgotten_in(self, scope_keys: Sequence[str]) -> list[ForgottenValue]:
        return self._docs(
            ForgottenValue,
            "SELECT doc FROM knowledge_tombstones WHERE scope = ANY(%s) AND node_id = %s",
            (list(scope_keys), FORGOTTEN_NODE_ID),
        )

    # lifecycle
    def event(self, event_id: str) -> ActivityEvent | None:
        return self._one(ActivityEvent, "SELECT doc FROM knowledge_events WHERE id = %s", (event_id,))

    def tombstone(self, tombstone_id: str) -> Tombstone | None:
        return self._one(
            Tombstone,
            "SELECT doc FROM knowledge_tombstones WHERE id = %s AND node_id <> %s",
            (tombstone_id, FORGOTTEN_NODE_ID),
        )

    def _under(self, cls: type[M], table: str, scope_key: str, extra: str = "") -> list[M]:
        return self._docs(
            cls,
            f"SELECT doc FROM {table} WHERE (scope = %s OR left(scope, %s) = %s){extra} ORDER BY id",
            (scope_key, len(scope_key) + 1, scope_key + "/"),
        )

    def nodes_under(self, scope_key: str) -> list[Node]:
        return self._under(Node, "knowledge_nodes", scope_key)

    def records_under(self, scope_key: str) -> list[Record]:
        return self._under(Record, "knowledge_records", scope_key)

    def events_under(self, scope_key: str) -> list[ActivityEvent]:
        return self._under(ActivityEvent, "knowledge_events", scope_key)

    def tombstones_under(self, scope_key: str) -> list[Tombstone]:
        return self._under(Tombstone, "knowledge_tombstones", scope_key, _REAL)

    def forgotten_under(self, scope_key: str) -> list[ForgottenValue]:
        return self._under(ForgottenValue, "knowledge_tombstones", scope_key, _FORGOTTEN)

    def delete_node(self, node_id: str) -> None:
        self.conn.execute("DELETE FROM knowledge_nodes WHERE id = %s", (node_id,))
        self.conn.execute("DELETE FROM knowledge_node_mentions WHERE node_id = %s", (node_id,))

    def delete_record(self, record_id: str) -> None:
        self.conn.execute("DELETE FROM knowledge_records WHERE id = %s", (record_id,))
        self.conn.execute("DELETE FROM knowledge_record_mentions WHERE record_id = %s", (record_id,))

    def delete_event(self, event_id: str) -> None:
        self.conn.execute("DELETE FROM knowledge_events WHERE id = %s", (event_id,))

    def delete_tombstone(self, tombstone_id: str) -> None:
        self.conn.execute(
            "DELETE FROM knowledge_tombstones WHERE id = %s AND node_id <> %s",
            (tombstone_id, FORGOTTEN_NODE_ID),
        )

    def delete_forgotten(self, forgotten_id: str) -> None:
        self.conn.execute(
            "DELETE FROM knowledge_tombstones WHERE id = %s AND node_id = %s",
            (forgotten_id, FORGOTTEN_NODE_ID),
        )

    def delete_outbox_for(self, record_ids: Collection[str]) -> int:
        cursor = self.conn.execute(
            "DELETE FROM knowledge_outbox WHERE (doc::jsonb ->> 'record_id') = ANY(%s)", (list(record_ids),)
        )
        return max(cursor.rowcount, 0)

    def delete_vectors_under(self, scope_key: str) -> int:
        cursor = self.conn.execute(
            "DELETE FROM knowledge_vectors WHERE (scope = %s OR left(scope, %s) = %s)",
            (scope_key, len(scope_key) + 1, scope_key + "/"),
        )
        return max(cursor.rowcount, 0)


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


class PostgresKnowledgeStore(ConnectionThread, TablesKnowledgeStore):
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
    ) -> None:
        super().__init__(clock=clock, ids=ids)
        self.url = _connection_url(url)
        self.connect_timeout_s = connect_timeout_s
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
