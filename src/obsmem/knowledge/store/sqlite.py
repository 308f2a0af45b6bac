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
the rules in :mod:`~obsmem.knowledge.store.ops` see exactly what the in-memory adapter sees.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from obsmem.clock import Clock
from obsmem.errors import ObsmemError, StorageError
from obsmem.files import prepare_database_file
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
from obsmem.storage.migrations import SQLITE, MigrationSet

__all__ = [
    "KNOWLEDGE_MIGRATIONS",
    "KNOWLEDGE_MIGRATIONS_TABLE",
    "SQLiteKnowledgeStore",
    "SQLiteKnowledgeTables",
]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
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


# Tombstone rows that are tombstones, and those that are forgotten values (FORGOTTEN_NODE_ID).
_REAL = " AND node_id <> ''"
_FORGOTTEN = " AND node_id = ''"


def _load(cls: type[M], doc: str) -> M:
    try:
        return cls.model_validate_json(doc)
    except ValidationError as exc:
        raise StorageError(f"A stored {cls.__name__} row could not be decoded: {exc}") from exc


def _marks(values: Sequence[str]) -> str:
    return ", ".join("?" for _ in values) or "NULL"


class SQLiteKnowledgeTables:
    """:class:`KnowledgeTables` over one connection inside an open transaction."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def _docs(self, cls: type[M], sql: str, params: Sequence[object] = ()) -> list[M]:
        return [_load(cls, row[0]) for row in self.conn.execute(sql, tuple(params))]

    def _one(self, cls: type[M], sql: str, params: Sequence[object]) -> M | None:
        found = self._docs(cls, sql, params)
        return found[0] if found else None

    # nodes
    def node(self, node_id: str) -> Node | None:
        return self._one(Node, "SELECT doc FROM knowledge_nodes WHERE id = ?", (node_id,))

    def node_by_name(self, scope_key: str, key: str) -> Node | None:
        return self._one(
            Node, "SELECT doc FROM knowledge_nodes WHERE scope = ? AND name_key = ?", (scope_key, key)
        )

    def save_node(self, node: Node) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO knowledge_nodes (id, scope, name_key, doc) VALUES (?, ?, ?, ?)",
            (node.id, node.scope, name_key(node.name), node.model_dump_json()),
        )
        self.conn.execute("DELETE FROM knowledge_node_mentions WHERE node_id = ?", (node.id,))
        self.conn.executemany(
            "INSERT INTO knowledge_node_mentions (node_id, target_id) VALUES (?, ?)",
            [(node.id, target) for target in node.mentions],
        )

    def nodes_in(self, scope_keys: Sequence[str]) -> list[Node]:
        return self._docs(
            Node,
            f"SELECT doc FROM knowledge_nodes WHERE scope IN ({_marks(scope_keys)}) ORDER BY id",
            scope_keys,
        )

    def nodes_mentioning(self, node_id: str) -> list[Node]:
        return self._docs(
            Node,
            "SELECT n.doc FROM knowledge_nodes AS n JOIN knowledge_node_mentions AS m ON m.node_id = n.id "
            "WHERE m.target_id = ? ORDER BY n.id",
            (node_id,),
        )

    # records
    def record(self, record_id: str) -> Record | None:
        return self._one(Record, "SELECT doc FROM knowledge_records WHERE id = ?", (record_id,))

    def save_record(self, record: Record) -> None:
        stored = record.model_copy(update={"valid_until": None})
        self.conn.execute(
            "INSERT OR REPLACE INTO knowledge_records (id, node_id, scope, doc) VALUES (?, ?, ?, ?)",
            (stored.id, stored.node_id, stored.scope, stored.model_dump_json()),
        )
        self.conn.execute("DELETE FROM knowledge_record_mentions WHERE record_id = ?", (stored.id,))
        self.conn.executemany(
            "INSERT INTO knowledge_record_mentions (record_id, target_id) VALUES (?, ?)",
            [(stored.id, target) for target in stored.mentions],
        )

    def records_in(self, scope_keys: Sequence[str]) -> list[Record]:
        return self._docs(
            Record,
            f"SELECT doc FROM knowledge_records WHERE scope IN ({_marks(scope_keys)}) ORDER BY id",
            scope_keys,
        )

    def records_about(self, node_id: str) -> list[Record]:
        return self._docs(
            Record, "SELECT doc FROM knowledge_records WHERE node_id = ? ORDER BY id", (node_id,)
        )

    def records_mentioning(self, node_id: str) -> list[Record]:
        return self._docs(
            Record,
            "SELECT r.doc FROM knowledge_records AS r "
            "JOIN knowledge_record_mentions AS m ON m.record_id = r.id "
            "WHERE m.target_id = ? ORDER BY r.id",
            (node_id,),
        )

    # audit log and tombstones
    def add_event(self, event: ActivityEvent) -> None:
        self.conn.execute(
            "INSERT INTO knowledge_events (id, scope, doc) VALUES (?, ?, ?)",
            (event.id, event.scope, event.model_dump_json()),
        )

    def events_in(self, scope_keys: Sequence[str]) -> list[ActivityEvent]:
        return self._docs(
            ActivityEvent,
            f"SELECT doc FROM knowledge_events WHERE scope IN ({_marks(scope_keys)})",
            scope_keys,
        )

    def save_tombstone(self, tombstone: Tombstone) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO knowledge_tombstones (id, node_id, scope, doc) VALUES (?, ?, ?, ?)",
            (tombstone.id, tombstone.node_id, tombstone.scope, tombstone.model_dump_json()),
        )

    def tombstones_for(self, node_id: str) -> list[Tombstone]:
        return self._docs(Tombstone, "SELECT doc FROM knowledge_tombstones WHERE node_id = ?", (node_id,))

    def tombstones_in(self, scope_keys: Sequence[str]) -> list[Tombstone]:
        return self._docs(
            Tombstone,
            f"SELECT doc FROM knowledge_tombstones WHERE scope IN ({_marks(scope_keys)}) AND node_id <> ?",
            [*scope_keys, FORGOTTEN_NODE_ID],
        )

    # outbox and vectors
    def outbox_key_exists(self, idempotency_key: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM knowledge_outbox WHERE idempotency_key = ?", (idempotency_key,)
        ).fetchone()
        return row is not None

    def save_outbox(self, entry: OutboxEntry) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO knowledge_outbox (id, idempotency_key, status, doc) VALUES (?, ?, ?, ?)",
            (entry.id, entry.idempotency_key, entry.status, entry.model_dump_json()),
        )

    def open_outbox(self) -> list[OutboxEntry]:
        return self._docs(
            OutboxEntry, "SELECT doc FROM knowledge_outbox WHERE status != 'completed' ORDER BY id"
        )

    def all_outbox(self) -> list[OutboxEntry]:
        return self._docs(OutboxEntry, "SELECT doc FROM knowledge_outbox ORDER BY id")

    def put_vector(self, vector: StoredVector) -> None:
        data = np.ascontiguousarray(vector.vector, dtype=np.float32)
        self.conn.execute(
            "INSERT OR REPLACE INTO knowledge_vectors "
            "(document_id, record_id, scope, embedder, dimensions, vector) "
            "VALUES (?, ?, ?, ?, ?, ?)",
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
            cursor = self.conn.execute("DELETE FROM knowledge_vectors WHERE document_id = ?", (document_id,))
        else:
            cursor = self.conn.execute(
                "DELETE FROM knowledge_vectors WHERE document_id = ? AND scope = ?", (document_id, scope)
            )
        return cursor.rowcount > 0

    def vectors_in(self, scope_keys: Sequence[str] | None) -> list[StoredVector]:
        sql = "SELECT document_id, record_id, scope, embedder, vector FROM knowledge_vectors"
        params: Sequence[str] = ()
        if scope_keys is not None:
            sql += f" WHERE scope IN ({_marks(scope_keys)})"
            params = scope_keys
        sql += " ORDER BY document_id"
        return [
            StoredVector(row[0], row[1], row[2], row[3], np.frombuffer(row[4], dtype=np.float32).copy())
            for row in self.conn.execute(sql, tuple(params))
        ]

    # forgotten values: rows of knowledge_tombstones under FORGOTTEN_NODE_ID (see tables.py)
    def save_forgotten(self, forgotten: ForgottenValue) -> None:
        self.conn.execute(
            "INSERT INTO knowledge_tombstones (id, node_id, scope, doc) VALUES (?, ?, ?, ?)",
            (forgotten.id, FORGOTTEN_NODE_ID, forgotten.scope, forgotten.model_dump_json()),
        )

    def forgotten(self, forgotten_id: str) -> ForgottenValue | None:
        return self._one(
            ForgottenValue,
            "SELECT doc FROM knowledge_tombstones WHERE id = ? AND node_id = ?",
            (forgotten_id, FORGOTTEN_NODE_ID),
        )

    def forgotten_in(self, scope_keys: Sequence[str]) -> list[ForgottenValue]:
        return self._docs(
            ForgottenValue,
            f"SELECT doc FROM knowledge_tombstones WHERE scope IN ({_marks(scope_keys)}) AND node_id = ?",
            [*scope_keys, FORGOTTEN_NODE_ID],
        )

    # lifecycle
    def event(self, event_id: str) -> ActivityEvent | None:
        return self._one(ActivityEvent, "SELECT doc FROM knowledge_events WHERE id = ?", (event_id,))

    def tombstone(self, tombstone_id: str) -> Tombstone | None:
        return self._one(
            Tombstone,
            "SELECT doc FROM knowledge_tombstones WHERE id = ? AND node_id <> ?",
            (tombstone_id, FORGOTTEN_NODE_ID),
        )

    def _under(self, cls: type[M], table: str, scope_key: str, extra: str = "") -> list[M]:
        return self._docs(
            cls,
            f"SELECT doc FROM {table} WHERE (scope = ? OR substr(scope, 1, ?) = ?){extra} ORDER BY id",
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
        self.conn.execute("DELETE FROM knowledge_nodes WHERE id = ?", (node_id,))
        self.conn.execute("DELETE FROM knowledge_node_mentions WHERE node_id = ?", (node_id,))

    def delete_record(self, record_id: str) -> None:
        self.conn.execute("DELETE FROM knowledge_records WHERE id = ?", (record_id,))
        self.conn.execute("DELETE FROM knowledge_record_mentions WHERE record_id = ?", (record_id,))

    def delete_event(self, event_id: str) -> None:
        self.conn.execute("DELETE FROM knowledge_events WHERE id = ?", (event_id,))

    def delete_tombstone(self, tombstone_id: str) -> None:
        self.conn.execute(
            "DELETE FROM knowledge_tombstones WHERE id = ? AND node_id <> ?",
            (tombstone_id, FORGOTTEN_NODE_ID),
        )

    def delete_forgotten(self, forgotten_id: str) -> None:
        self.conn.execute(
            "DELETE FROM knowledge_tombstones WHERE id = ? AND node_id = ?", (forgotten_id, FORGOTTEN_NODE_ID)
        )

    def delete_outbox_for(self, record_ids: Collection[str]) -> int:
        ids = list(record_ids)
        cursor = self.conn.execute(
            f"DELETE FROM knowledge_outbox WHERE json_extract(doc, '$.record_id') IN ({_marks(ids)})", ids
        )
        return max(cursor.rowcount, 0)

    def delete_vectors_under(self, scope_key: str) -> int:
        cursor = self.conn.execute(
            "DELETE FROM knowledge_vectors WHERE (scope = ? OR substr(scope, 1, ?) = ?)",
            (scope_key, len(scope_key) + 1, scope_key + "/"),
        )
        return max(cursor.rowcount, 0)


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in str(exc).lower()


class SQLiteKnowledgeStore(ConnectionThread, TablesKnowledgeStore):
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
        self._start_thread("obsmem-knowledge")
        self._conn: Conn | None = None  # touched only on the worker thread

    def __repr__(self) -> str:
        return f"SQLiteKnowledgeStore({str(self.path)!r})"

    async def _transact(self, write: bool, fn: Callable[[KnowledgeTables], T]) -> T:
        begin = "BEGIN IMMEDIATE" if write else "BEGIN"
        return await self._on_thread(self._run, begin, fn)

    async def migrate(self, *, dry_run: bool = False) -> list[str]:
        """Apply (or, with ``dry_run``, list) the pending knowledge migrations of the file."""
        return await self._on_thread(self._migrate, dry_run)

    def _migrate(self, dry_run: bool) -> list[str]:
        try:
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
                    return result
                except BaseException:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:  # never mask the original error
                            pass
                    raise
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
        prepare_database_file(self.path)  # private folder and file; an empty file is refused
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            # Forgetting and purging are hard deletes: zero the freed pages instead of leaving
            # the deleted text readable in the file.
            conn.execute("PRAGMA secure_delete = ON")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StorageError(f"Could not switch {self.path} to WAL mode (got '{mode}').")
            KNOWLEDGE_MIGRATIONS.migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
