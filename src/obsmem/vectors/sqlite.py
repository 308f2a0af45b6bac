"""The default vector index: exact numpy search over vectors persisted in a SQLite file.

Design choices, and why:

* **SQLite is the source of truth; memory is a cache.** Every write commits (WAL,
  ``synchronous=FULL``) before the in-memory matrix changes, so a crash never loses an
  acknowledged upsert and never leaves memory ahead of the file. Vectors are float32 BLOBs
  (little-endian), 1.5 KB per 384-d row, in an ordinary rowid table (a WITHOUT ROWID table
  stores such large rows about 3× less densely).
* **Loaded lazily.** Opening an index reads nothing; the first search reads every row in one
  query into an :class:`~obsmem.vectors.exact.ExactMatrix`. Writes before that touch only
  the file; ``count`` answers from SQL until the matrix is loaded.
* **Other connections' writes are noticed.** ``PRAGMA data_version`` changes when another
  connection (another process, another index object) commits to the file; the cache is then
  dropped and reloaded at the next search, so two processes sharing a file agree.
* **Several indexes per file.** Rows carry an index ``name``, and each named index records
  its ``dimensions`` and ``space`` (the embedder's name): reopening with another size or
  embedder is refused, because mixing vector spaces gives meaningless scores. The tables
  have their own names, so the index may share a file with the message store.
* **A schema of its own, migrated.** The tables are numbered steps of
  :data:`SQLITE_VECTOR_MIGRATIONS`, recorded in ``_obsmem_vector_migrations`` (apart from the
  message store's table, so the two evolve separately in a shared file), applied when the
  index first connects.
* **One worker thread owns the connection** and runs every operation, so writes, cache
  updates and searches never interleave and the event loop never blocks on the file.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from obsmem.errors import ConfigError, InvalidInputError, ObsmemError, StorageError
from obsmem.files import prepare_database_file
from obsmem.migrations import SQLITE, MigrationSet

from .base import (
    VectorHit,
    VectorLike,
    as_unit_matrix,
    as_unit_vector,
    check_dimensions,
    check_distinct,
    check_k,
    spread_namespaces,
)
from .exact import ExactMatrix

__all__ = ["SQLITE_VECTOR_MIGRATIONS", "VECTOR_MIGRATIONS_TABLE", "SQLiteVectorIndex"]

T = TypeVar("T")
_LITTLE_ENDIAN_FLOAT32 = np.dtype("<f4")
_BUSY_TIMEOUT_MS = 10_000
_PAGE_SIZE = 8192
_TRUNCATE_WAIT_MS = 1000  # how long a truncation after a delete waits for other connections' reads
VECTOR_MIGRATIONS_TABLE = "_obsmem_vector_migrations"
SQLITE_VECTOR_MIGRATIONS: MigrationSet[sqlite3.Connection] = MigrationSet(
    SQLITE, VECTOR_MIGRATIONS_TABLE, "sqlite-vectors"
)


@SQLITE_VECTOR_MIGRATIONS.register
def m001_vector_tables(conn: sqlite3.Connection) -> None:
    # IF NOT EXISTS: files written before this step was recorded already have the tables.
    statements = [
        """CREATE TABLE IF NOT EXISTS obsmem_vector_indexes (
            name TEXT PRIMARY KEY,
            dimensions INTEGER NOT NULL,
            space TEXT NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS obsmem_vectors (
            index_name TEXT NOT NULL,
            key TEXT NOT NULL,
            namespace TEXT NOT NULL,
            vector BLOB NOT NULL,
            UNIQUE (index_name, key)
        )""",
        "CREATE INDEX IF NOT EXISTS obsmem_vectors_by_namespace ON obsmem_vectors (index_name, namespace)",
    ]
    for statement in statements:
        conn.execute(statement)


_UPSERT = (
    "INSERT INTO obsmem_vectors (index_name, key, namespace, vector) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (index_name, key) DO UPDATE SET namespace = excluded.namespace, vector = excluded.vector"
)
# substr() counts characters, as Python's len() does, so this is an exact prefix test.
_IN_NAMESPACE = "index_name = ? AND substr(namespace, 1, ?) = ?"


# -- a fork -----------------------------------------------------------------------------------------

#: Every SQLiteVectorIndex made in this process (see _let_go_after_fork).
_INDEXES: weakref.WeakSet[SQLiteVectorIndex] = weakref.WeakSet()
#: Files this process may not open: it was forked while a thread of its parent was using them.
_FORKED_MID_CALL: set[str] = set()


def _let_go_after_fork() -> None:
    """In a child just forked (``os.register_at_fork``): close the SQLite connections it inherited.

    SQLite keeps, per process, one record of the locks the process holds on each open file, shared
    by all its connections to that file; a fork copies it with the connections, but not the
    system's locks. An index the child opens on the same file (a worker's own index) would share
    that copied record and never take the database's shared lock, so the parent, closing its last
    connection, checkpoints and deletes the ``-wal`` file under the child: the vectors the child
    upserts afterwards are lost. Closing the copies first drops the record (it releases nothing of
    the parent's, and cannot checkpoint while the parent holds the file). A copy some thread was
    using at the fork is left alone, and every other then, and their files are refused here.
    """
    indexes = list(_INDEXES)
    if any(index._busy.locked() for index in indexes):
        _FORKED_MID_CALL.update(
            os.path.realpath(index.path) for index in indexes if index._connection is not None
        )
        return
    for index in indexes:
        conn, index._connection = index._connection, None
        index._exact = None
        try:
            if conn is not None and not conn.in_transaction:
                conn.close()
        except Exception:  # noqa: BLE001 - a copy the child never uses: nothing to report
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_let_go_after_fork)


class SQLiteVectorIndex:
    """Exact search over vectors kept in the SQLite file ``path`` (created if missing, private:
    see :func:`obsmem.files.prepare_database_file`; an existing empty file is refused).

    ``name`` selects one index among several in the file; ``dimensions`` and ``space`` must
    match what the index was created with.
    """

    def __init__(self, path: Path | str, *, dimensions: int, space: str = "", name: str = "default") -> None:
        self.path = Path(path)
        self.dimensions = check_dimensions(dimensions)
        self.space = space
        self.name = name
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="obsmem-vectors")
        self._connection: sqlite3.Connection | None = None
        self._exact: ExactMatrix | None = None
        self._loaded_version: int | None = None
        self._closed = False
        self._pid = os.getpid()  # a copy in a forked child refuses every call (see _call)
        self._busy = threading.Lock()  # held while the worker thread uses the connection
        self._log_to_truncate = False  # a delete's log not truncated yet (see _after_delete)
        _INDEXES.add(self)  # its connection is let go in a forked child (_let_go_after_fork)

    @classmethod
    async def open(
        cls, path: Path | str, *, dimensions: int, space: str = "", name: str = "default"
    ) -> SQLiteVectorIndex:
        """Open (or create) the index now, so a size or embedder mismatch surfaces at once."""
        index = cls(path, dimensions=dimensions, space=space, name=name)
        try:
            await index._call(lambda conn: None)
        except BaseException:
            await index.close()
            raise
        return index

    def __repr__(self) -> str:
        return (
            f"SQLiteVectorIndex({str(self.path)!r}, name={self.name!r}, dimensions={self.dimensions}, "
            f"space={self.space!r})"
        )

    @property
    def loaded(self) -> bool:
        """Whether the vectors are currently held in memory."""
        return self._exact is not None

    # -- plumbing (all of it runs on the worker thread) ------------------------------------

    def _check_process(self) -> None:
        """Refuse a call in a process forked from the one that made this index: the worker
        thread that owns the connection is not there (a call would wait forever), and SQLite
        forbids using a connection opened before a fork in the child."""
        if os.getpid() != self._pid:
            raise InvalidInputError(
                f"This vector index ({self.path}) was opened in process {self._pid}, and this process "
                f"({os.getpid()}) was forked from it: its worker thread and its SQLite connection do not "
                "survive a fork. Open a new index in the child, after the fork (e.g. in gunicorn's "
                "post_fork hook, or with multiprocessing's 'spawn' start method)."
            )

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._check_process()
        if self._closed:
            raise StorageError(
                "This vector index has been closed; open it again with SQLiteVectorIndex(...)."
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, fn)

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            with self._busy:
                conn = self._connect()
                self._drop_stale_cache(conn)
                result = fn(conn)
                if self._log_to_truncate:  # a truncation a reader kept from a delete: try again
                    self._truncate_log(conn, 0)
                return result
        except ObsmemError:
            raise
        except (sqlite3.Error, OSError) as exc:  # OSError: the folder or file cannot be created
            raise StorageError(
                f"The vector index file {self.path} failed: {exc}. Check that the file is a writable "
                "SQLite database and the disk has room."
            ) from exc

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            return self._connection
        # Private like the store's file (folder 0700, file and its -wal/-shm 0600, whatever the
        # umask; an existing empty file refused). Five 384-d rows fit an 8 KiB page where two fit
        # SQLite's default 4 KiB one; a page size only takes effect on a new file, so a file
        # shared with the store keeps the store's size.
        if _FORKED_MID_CALL and os.path.realpath(self.path) in _FORKED_MID_CALL:
            raise StorageError(
                f"The vector index file {self.path}: this process ({os.getpid()}) was forked while its "
                "parent was using it (an index call was running on another thread); a connection opened "
                "here would share the parent's lock records. Fork while no index call runs, or start "
                "workers with multiprocessing's 'spawn' or 'forkserver' method."
            )
        prepare_database_file(self.path, page_size=_PAGE_SIZE)
        # check_same_thread off: only the worker thread uses it, but a forked child closes its
        # copy on the thread that forked (_let_go_after_fork).
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            # A delete (a user's vectors, delete_resource) zeroes the space it frees, as the
            # stores' erases do, instead of leaving the rows readable in the file.
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            SQLITE_VECTOR_MIGRATIONS.migrate(conn)
            with _transaction(conn):
                self._check_or_record_identity(conn)
        except BaseException:
            conn.close()
            raise
        self._connection = conn
        return conn

    def _check_or_record_identity(self, conn: sqlite3.Connection) -> None:
        row = conn.execute(
            "SELECT dimensions, space FROM obsmem_vector_indexes WHERE name = ?", (self.name,)
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO obsmem_vector_indexes (name, dimensions, space) VALUES (?, ?, ?)",
                (self.name, self.dimensions, self.space),
            )
            return
        stored_dimensions, stored_space = int(row[0]), str(row[1])
        if stored_dimensions != self.dimensions:
            raise ConfigError(
                "vectors.dimensions",
                f"index '{self.name}' in {self.path} holds {stored_dimensions}-dimensional vectors, "
                f"not {self.dimensions}",
                allowed=f"{stored_dimensions}, or another index name or file",
            )
        if stored_space != self.space:
            raise ConfigError(
                "vectors.space",
                f"index '{self.name}' in {self.path} holds vectors of embedder '{stored_space}', "
                f"not '{self.space}'; their scores would not be comparable",
                allowed=f"'{stored_space}', or another index name or file",
            )

    def _drop_stale_cache(self, conn: sqlite3.Connection) -> None:
        if self._exact is None:
            return
        if int(conn.execute("PRAGMA data_version").fetchone()[0]) != self._loaded_version:
            self._exact = None  # another connection committed; reload at the next search

    def _matrix(self, conn: sqlite3.Connection) -> ExactMatrix:
        if self._exact is not None:
            return self._exact
        row_bytes = self.dimensions * _LITTLE_ENDIAN_FLOAT32.itemsize
        conn.execute("BEGIN")  # one snapshot for the count and the rows
        try:
            version = int(conn.execute("PRAGMA data_version").fetchone()[0])
            (total,) = conn.execute(
                "SELECT count(*) FROM obsmem_vectors WHERE index_name = ?", (self.name,)
            ).fetchone()
            matrix = np.empty((int(total), self.dimensions), dtype=np.float32)
            keys: list[str] = []
            namespaces: list[str] = []
            cursor = conn.execute(
                "SELECT key, namespace, vector FROM obsmem_vectors WHERE index_name = ?", (self.name,)
            )
            for position, (key, namespace, blob) in enumerate(cursor):
                if len(blob) != row_bytes:
                    raise StorageError(
                        f"Vector '{key}' in {self.path} has {len(blob)} bytes, expected {row_bytes}; the file "
                        "is damaged. Delete that key (or the index) and upsert it again."
                    )
                matrix[position] = np.frombuffer(blob, dtype=_LITTLE_ENDIAN_FLOAT32)
                keys.append(key)
                namespaces.append(namespace)
        finally:
            conn.execute("COMMIT")
        exact = ExactMatrix(self.dimensions)
        exact.replace_all(keys, matrix, namespaces)
        self._loaded_version = version
        self._exact = exact
        return exact

    def _close_connection(self) -> None:
        with self._busy:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            self._exact = None

    # -- the VectorIndex protocol -------------------------------------------------------------

    async def upsert(self, key: str, vector: VectorLike, namespace: str = "") -> None:
        row = as_unit_vector(vector, self.dimensions)
        await self._call(lambda conn: self._write_rows(conn, [key], row[None, :], [namespace]))

    async def upsert_many(
        self, keys: Sequence[str], vectors: VectorLike, namespaces: Sequence[str] | str = ""
    ) -> None:
        check_distinct(keys)
        matrix = as_unit_matrix(vectors, len(keys), self.dimensions)
        spread = spread_namespaces(keys, namespaces)
        if keys:
            await self._call(lambda conn: self._write_rows(conn, list(keys), matrix, spread))

    def _write_rows(
        self,
        conn: sqlite3.Connection,
        keys: list[str],
        matrix: npt.NDArray[np.float32],
        namespaces: list[str],
    ) -> None:
        blobs = matrix.astype(_LITTLE_ENDIAN_FLOAT32, copy=False)
        with _transaction(conn):
            conn.executemany(
                _UPSERT,
                (
                    (self.name, key, namespace, blobs[i].tobytes())
                    for i, (key, namespace) in enumerate(zip(keys, namespaces, strict=True))
                ),
            )
        if self._exact is not None:
            self._exact.upsert(keys, matrix, namespaces)

    async def delete(self, key: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with _transaction(conn):
                cursor = conn.execute(
                    "DELETE FROM obsmem_vectors WHERE index_name = ? AND key = ?", (self.name, key)
                )
            if self._exact is not None:
                self._exact.delete(key)
            self._after_delete(conn, cursor.rowcount)
            return cursor.rowcount > 0

        return await self._call(op)

    async def delete_namespace(self, namespace_prefix: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            with _transaction(conn):
                cursor = conn.execute(
                    f"DELETE FROM obsmem_vectors WHERE {_IN_NAMESPACE}",
                    (self.name, len(namespace_prefix), namespace_prefix),
                )
            if self._exact is not None:
                self._exact.delete_namespace(namespace_prefix)
            self._after_delete(conn, cursor.rowcount)
            return cursor.rowcount

        return await self._call(op)

    def _after_delete(self, conn: sqlite3.Connection, deleted: int) -> None:
        """After a delete that removed rows: move the write-ahead log into the file and truncate
        it, so the deleted rows (their keys, their namespaces naming the user and the thread,
        their vectors) are left neither in the ``-wal`` file, which keeps every page a
        transaction wrote until a checkpoint happens to overwrite it, nor (``secure_delete``) in
        the database file. Another connection's read snapshot can keep the log: then it waits a
        bounded time (:data:`_TRUNCATE_WAIT_MS`) and is tried again, without waiting, after each
        later operation until it succeeds."""
        if deleted > 0:
            self._log_to_truncate = True
        if self._log_to_truncate:
            self._truncate_log(conn, _TRUNCATE_WAIT_MS)

    def _truncate_log(self, conn: sqlite3.Connection, wait_ms: int) -> None:
        conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.OperationalError:
            busy = 1
        finally:
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        self._log_to_truncate = bool(busy)

    async def search(self, query: VectorLike, k: int = 10, *, namespace_prefix: str = "") -> list[VectorHit]:
        check_k(k)
        unit_query = as_unit_vector(query, self.dimensions, "query")
        return await self._call(lambda conn: self._matrix(conn).search(unit_query, k, namespace_prefix))

    async def count(self, namespace_prefix: str = "") -> int:
        def op(conn: sqlite3.Connection) -> int:
            if self._exact is not None:
                return self._exact.count(namespace_prefix)
            row = conn.execute(
                f"SELECT count(*) FROM obsmem_vectors WHERE {_IN_NAMESPACE}",
                (self.name, len(namespace_prefix), namespace_prefix),
            ).fetchone()
            return int(row[0])

        return await self._call(op)

    async def load(self) -> None:
        """Read every vector into memory now, instead of at the first search."""
        await self._call(self._matrix)

    async def close(self) -> None:
        """Close the file and stop the worker thread; safe to call twice. In a forked child it
        only marks this copy closed: the thread, the connection and the file are the parent's."""
        if self._closed:
            return
        self._closed = True
        if os.getpid() != self._pid:
            return

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close_connection)
        self._executor.shutdown(wait=True)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
