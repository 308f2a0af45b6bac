"""Schema migrations: numbered, named functions, each recorded in a version table.

Why functions in a list and not a schema diff: a migration is an explicit, reviewable step
that ran exactly once per database, and its name in the table is the proof. This is the
habit of ``llm`` and ``sqlite-utils``:

* A migration is a function named ``m<NNN>_<what>`` (``m001_initial``). Registering a second
  migration with the same number or the same name is refused at import time, so two branches
  that both add ``m004_...`` collide loudly instead of silently running in a surprising order.
* Each migration runs **together with the insert of its row** in one transaction, so a crash
  leaves the database either before the step or after it, never half-way with no record.
* :meth:`MigrationSet.pending` only reads. :meth:`MigrationSet.migrate` applies what is
  missing, in number order.
* A database that records a migration this version does not know was written by a newer
  obsmem; it is refused with :class:`~obsmem.errors.MigrationError` rather than used with a
  schema we cannot reason about.

One :class:`MigrationSet` class serves every schema obsmem keeps: it is given a
:class:`Dialect` (how to take the lock and open the transaction a step runs in, how to tell
whether the version table exists) and the name of its version table. The message store uses
``_obsmem_migrations``; the knowledge store keeps its own table, so the two schemas evolve
separately whether or not they share a database. :data:`SQLITE` is SQLite's dialect and
:data:`SQLITE_MIGRATIONS` the message store's SQLite steps (below); PostgreSQL's dialect and
steps are in :mod:`obsmem.storage.postgres.migrations`.
"""

from __future__ import annotations

import re
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from obsmem.errors import MigrationError

__all__ = [
    "MIGRATIONS_TABLE",
    "SQLITE",
    "SQLITE_MIGRATIONS",
    "Dialect",
    "Migration",
    "MigrationSet",
    "SQLConnection",
    "SQLiteDialect",
    "migrate",
    "pending",
]

MIGRATIONS_TABLE = "_obsmem_migrations"
_NAME = re.compile(r"^m(\d{3,})_[a-z0-9_]+$")


class _Rows(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> Sequence[Any]: ...


class SQLConnection(Protocol):
    """What a migration set needs of a connection: ``sqlite3`` and psycopg's both have it."""

    def execute(self, query: str, params: Any = ..., /) -> _Rows: ...


ConnT = TypeVar("ConnT", bound=SQLConnection)


@dataclass(frozen=True, slots=True)
class Migration(Generic[ConnT]):
    number: int
    name: str
    apply: Callable[[ConnT], None]


class Dialect(ABC, Generic[ConnT]):
    """What differs between SQL dialects when a step runs: the lock, the transaction, the types."""

    name: ClassVar[str]
    param: ClassVar[str]  # the placeholder for a query parameter
    timestamp_type: ClassVar[str]  # the version table's applied_at column

    @abstractmethod
    def table_exists(self, conn: ConnT, table: str) -> bool: ...

    @abstractmethod
    def step(self, conn: ConnT) -> AbstractContextManager[None]:
        """One transaction that holds the schema's write lock: commit on exit, roll back on error."""

    @abstractmethod
    def now(self) -> object:
        """The ``applied_at`` value for a step applied now."""


class MigrationSet(Generic[ConnT]):
    """An ordered set of migrations recorded in ``table``, keyed by name and by number."""

    def __init__(self, dialect: Dialect[ConnT], table: str = MIGRATIONS_TABLE, label: str | None = None) -> None:
        self.dialect = dialect
        self.table = table
        self.label = label or dialect.name
        self._by_number: dict[int, Migration[ConnT]] = {}

    def __repr__(self) -> str:
        return f"MigrationSet({self.label!r}, table={self.table!r}, migrations={self.names()!r})"

    # -- registration ------------------------------------------------------------------------
    def register(self, fn: Callable[[ConnT], None]) -> Callable[[ConnT], None]:
        """Decorator: add ``fn`` as the migration named after it (``m001_initial``)."""
        match = _NAME.match(fn.__name__)
        if match is None:
            raise MigrationError(
                f"Migration function '{fn.__name__}' must be named m<NNN>_<what>, e.g. m002_add_index."
            )
        number = int(match.group(1))
        if number in self._by_number:
            raise MigrationError(
                f"{self.label} migration number {number} is used twice: "
                f"'{self._by_number[number].name}' and '{fn.__name__}'. Renumber the newer one."
            )
        if fn.__name__ in self.names():
            raise MigrationError(f"{self.label} migration '{fn.__name__}' is registered twice.")
        self._by_number[number] = Migration(number=number, name=fn.__name__, apply=fn)
        return fn

    def all(self) -> list[Migration[ConnT]]:
        return [self._by_number[n] for n in sorted(self._by_number)]

    def names(self) -> list[str]:
        return [m.name for m in self.all()]

    # -- reading and applying ---------------------------------------------------------------
    def pending(self, conn: ConnT) -> list[Migration[ConnT]]:
        """The migrations not yet applied to ``conn``'s database, in order. Never writes."""
        applied = self._applied(conn)
        self._refuse_unknown(applied)
        return [m for m in self.all() if m.name not in applied]

    def migrate(self, conn: ConnT) -> list[str]:
        """Apply every pending migration, each in its own transaction; return their names."""
        self._refuse_unknown(self._applied(conn))
        return [migration.name for migration in self.all() if self._apply(conn, migration)]

    def _applied(self, conn: ConnT) -> set[str]:
        """Names recorded in the version table (empty when the table does not exist)."""
        if not self.dialect.table_exists(conn, self.table):
            return set()
        return {row[0] for row in conn.execute(f"SELECT name FROM {self.table}").fetchall()}

    def _refuse_unknown(self, applied: set[str]) -> None:
        unknown = sorted(applied - set(self.names()))
        if unknown:
            raise MigrationError(
                f"This database was created by a newer obsmem: it records migrations "
                f"{', '.join(unknown)} that this version does not know. Upgrade obsmem "
                "(pip install -U obsmem) or point it at another database."
            )

    def _apply(self, conn: ConnT, migration: Migration[ConnT]) -> bool:
        """Run one migration and insert its row in one transaction; False when already applied.

        The check runs inside the transaction, under the dialect's lock: a process that applied
        the step meanwhile has committed its row by the time this one reads the table.
        """
        param = self.dialect.param
        with self.dialect.step(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} "
                f"(name TEXT PRIMARY KEY, applied_at {self.dialect.timestamp_type} NOT NULL)"
            )
            if conn.execute(f"SELECT 1 FROM {self.table} WHERE name = {param}", (migration.name,)).fetchone():
                return False
            migration.apply(conn)
            conn.execute(
                f"INSERT INTO {self.table} (name, applied_at) VALUES ({param}, {param})",
                (migration.name, self.dialect.now()),
            )
        return True


class SQLiteDialect(Dialect[sqlite3.Connection]):
    """SQLite: expects a connection in autocommit mode (``isolation_level=None``).

    Explicit ``BEGIN IMMEDIATE`` takes the write lock before re-reading the table, so two
    processes opening a fresh file at once cannot both apply ``m001``. SQLite DDL is
    transactional, so a failing migration rolls back with its record.
    """

    name = "sqlite"
    param = "?"
    timestamp_type = "TEXT"  # ISO 8601 with its offset

    def table_exists(self, conn: sqlite3.Connection, table: str) -> bool:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
        return found.fetchone() is not None

    @contextmanager
    def step(self, conn: sqlite3.Connection) -> Iterator[None]:
        if conn.isolation_level is not None:
            raise MigrationError("SQLite migrations need a connection opened with isolation_level=None.")
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def now(self) -> str:
        return datetime.now(UTC).isoformat()


SQLITE = SQLiteDialect()


SQLITE_MIGRATIONS: MigrationSet[sqlite3.Connection] = MigrationSet(SQLITE)


def pending(conn: sqlite3.Connection) -> list[str]:
    """Names of the SQLite migrations not yet applied (read-only)."""
    return [m.name for m in SQLITE_MIGRATIONS.pending(conn)]


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Bring an SQLite database up to date; returns the names applied now."""
    return SQLITE_MIGRATIONS.migrate(conn)


# -- SQLite migrations ----------------------------------------------------------------------
# Conventions: JSON documents live in TEXT columns; datetimes are ISO 8601 strings *with*
# their offset (so they round-trip exactly) plus an integer microsecond column where rows must
# be ordered by time (ISO strings with different offsets do not sort chronologically).


@SQLITE_MIGRATIONS.register
def m001_initial(conn: sqlite3.Connection) -> None:
    statements = [
        """CREATE TABLE threads (
            pk INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            resource_id TEXT NOT NULL,
            org_id TEXT,
            title TEXT,
            title_pinned INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            created_us INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            version INTEGER NOT NULL DEFAULT 1
        )""",
        "CREATE INDEX threads_by_resource ON threads (resource_id, created_us, pk)",
        # seq is the store-wide insertion counter; AUTOINCREMENT means a seq is never reused,
        # even after the newest messages are deleted, so cursors stay meaningful.
        """CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            parts TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX messages_by_thread ON messages (thread_id, seq)",
        """CREATE TABLE observation_records (
            pk INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            lineage TEXT NOT NULL,
            scope TEXT NOT NULL CHECK (scope IN ('thread', 'resource')),
            thread_id TEXT,
            resource_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            origin TEXT NOT NULL,
            version INTEGER NOT NULL,
            superseded_by TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            active_observations TEXT NOT NULL,
            observation_tokens INTEGER NOT NULL,
            total_tokens_observed INTEGER NOT NULL,
            pending_message_tokens INTEGER NOT NULL,
            threads TEXT NOT NULL,
            buffered_chunks TEXT NOT NULL,
            buffered_reflection TEXT,
            reflection_suppressed_at INTEGER,
            config TEXT NOT NULL,
            metadata TEXT NOT NULL
        )""",
        # The single-live-head rule as a constraint: a bug that would create a second head
        # fails with an integrity error instead of forking the lineage.
        (
            "CREATE UNIQUE INDEX observation_records_one_head "
            "ON observation_records (lineage) WHERE superseded_by IS NULL"
        ),
        "CREATE INDEX observation_records_by_lineage ON observation_records (lineage, generation)",
        """CREATE TABLE working_memory (
            key TEXT PRIMARY KEY,
            text TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
    ]
    for statement in statements:
        conn.execute(statement)


@SQLITE_MIGRATIONS.register
def m002_leases_and_boundaries(conn: sqlite3.Connection) -> None:
    statements = [
        # Buffering triggers: where the last observation / reflection buffer started. Existing
        # rows read back as 0, which is "no buffer triggered yet".
        "ALTER TABLE observation_records ADD COLUMN buffer_boundary_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE observation_records ADD COLUMN reflection_boundary_tokens INTEGER NOT NULL DEFAULT 0",
        # One row per held (or expired, not yet retaken) lease. Expiry is compared in Python
        # against the caller's clock, inside BEGIN IMMEDIATE, so no time column needs an index.
        """CREATE TABLE leases (
            key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            token INTEGER NOT NULL,
            acquired_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        )""",
        # The fencing-token counter, store-wide and separate from the leases so that releasing
        # (deleting) a lease never lets a later token repeat or go backward.
        """CREATE TABLE lease_tokens (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last_token INTEGER NOT NULL
        )""",
        "INSERT INTO lease_tokens (id, last_token) VALUES (1, 0)",
    ]
    for statement in statements:
        conn.execute(statement)


@SQLITE_MIGRATIONS.register
def m003_work_queue(conn: sqlite3.Connection) -> None:
    statements = [
        # Work for worker processes. The *_us columns are the instants as integers, so due and
        # expired items are found in SQL whatever offsets the ISO columns were written with.
        """CREATE TABLE work_items (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            payload TEXT NOT NULL,
            enqueued_at TEXT NOT NULL,
            available_at TEXT NOT NULL,
            available_us INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            claimed_by TEXT,
            claim_token INTEGER,
            claim_expires_at TEXT,
            claim_expires_us INTEGER,
            last_error TEXT
        )""",
        # At most one waiting item per (kind, target): enqueueing again coalesces into it.
        "CREATE UNIQUE INDEX work_items_one_waiting ON work_items (kind, target) WHERE claimed_by IS NULL",
    ]
    for statement in statements:
        conn.execute(statement)
