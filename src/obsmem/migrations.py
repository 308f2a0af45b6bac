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
:class:`Dialect` (:data:`SQLITE` or :data:`POSTGRESQL`: how to take the lock and open the
transaction a step runs in, how to tell whether the version table exists) and the name of its
version table. Each schema has its own table, so the schemas evolve separately whether or not
they share a database: the message store's steps are in :mod:`obsmem.storage.migrations` and
:mod:`obsmem.storage.postgres.migrations`, the knowledge store's in
:mod:`obsmem.knowledge.store`, the vector indexes' in :mod:`obsmem.vectors.sqlite` and
:mod:`obsmem.vectors.postgres`. This module is foundation: the storage adapters, the knowledge
store and the vector indexes all build on it.
"""

from __future__ import annotations

import re
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from obsmem.errors import MigrationError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "ADVISORY_LOCK_KEY",
    "MIGRATIONS_TABLE",
    "POSTGRESQL",
    "SQLITE",
    "Dialect",
    "Migration",
    "MigrationSet",
    "PostgresDialect",
    "SQLConnection",
    "SQLiteDialect",
]

MIGRATIONS_TABLE = "_obsmem_migrations"
"""The message store's version table."""

# pg_advisory_xact_lock takes a bigint; this one is "obsmem" in ASCII, so it is recognisable in
# pg_locks and unlikely to collide with another application's lock.
ADVISORY_LOCK_KEY = 0x6F62736D656D

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
    """One step. ``apply`` returns ``False`` to wait: the step is rolled back and stays pending."""

    number: int
    name: str
    apply: Callable[[ConnT], bool | None]


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


class _Waiting(Exception):
    """A step returned False: roll its transaction back and leave it pending."""


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
    def register(self, fn: Callable[[ConnT], bool | None]) -> Callable[[ConnT], bool | None]:
        """Decorator: add ``fn`` as the migration named after it (``m001_initial``).

        A step that needs something the server may not have yet (an extension) returns
        ``False`` when it is missing: nothing of the step is kept, it is not recorded, and the
        next :meth:`migrate` tries it again. Later steps still run, so none may depend on it.
        """
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
        try:
            with self.dialect.step(conn):
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} "
                    f"(name TEXT PRIMARY KEY, applied_at {self.dialect.timestamp_type} NOT NULL)"
                )
                done = conn.execute(f"SELECT 1 FROM {self.table} WHERE name = {param}", (migration.name,))
                if done.fetchone():
                    return False
                if migration.apply(conn) is False:
                    raise _Waiting  # roll the step back; it stays pending
                conn.execute(
                    f"INSERT INTO {self.table} (name, applied_at) VALUES ({param}, {param})",
                    (migration.name, self.dialect.now()),
                )
        except _Waiting:
            return False
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


class PostgresDialect(Dialect["psycopg.Connection[Any]"]):
    """PostgreSQL: expects a connection in autocommit mode; steps serialise on an advisory lock.

    The transaction first takes ``pg_advisory_xact_lock`` on :data:`ADVISORY_LOCK_KEY`:
    concurrent migrators queue on it, and the one that gets it second re-reads the table, sees
    the step done and skips it. Every obsmem schema in a database (the message store's, the
    knowledge store's, the vector indexes') takes this one lock, so all schema changes in a
    database queue behind each other. PostgreSQL DDL is transactional, so a failing step rolls
    back with its record. (psycopg is imported for typing only: it is an optional dependency.)
    """

    name = "postgresql"
    param = "%s"
    timestamp_type = "TIMESTAMPTZ"

    def table_exists(self, conn: psycopg.Connection[Any], table: str) -> bool:
        row = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        return row is not None and row[0] is not None

    @contextmanager
    def step(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        if not conn.autocommit:
            raise MigrationError("PostgreSQL migrations need a connection opened with autocommit=True.")
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK_KEY,))
            yield

    def now(self) -> datetime:
        return datetime.now(UTC)


POSTGRESQL = PostgresDialect()
