"""A vector index in PostgreSQL: exact search computed by the server, shared by every process.

Design choices, and why:

* **Exact by default, like the other indexes.** A search scores every vector of the index
  that lies in the namespace and sorts by ``(score desc, key)``: callers of
  :class:`~obsmem.vectors.VectorIndex` get the same answers from every index.
* **HNSW on request.** ``approximate=True`` (pgvector only) builds an HNSW index for this index
  name — a partial index over ``embedding::vector(dimensions)`` with inner-product operators,
  which on unit vectors rank exactly as cosine — and searches through it. HNSW may miss true
  neighbours, and behind a namespace filter it can return fewer than ``k`` rows: ``ef_search``
  is raised to at least ``k``, pgvector's iterative scan keeps looking (where the server's
  pgvector has it), and when fewer than ``k`` rows still come back the exact query answers.
  Without ``approximate`` no HNSW index is built, since an exact search would never use it.
* **pgvector when the server has it, plain arrays otherwise.** With the ``vector`` extension,
  rows live in ``obsmem_vector_rows`` (``embedding vector``) and the server scores them with
  pgvector's C inner product; without it, in ``obsmem_vector_arrays`` (``embedding real[]``),
  scored in SQL. Vectors are normalised before they are stored, so the inner product *is* the
  cosine similarity — and a zero vector scores 0, where pgvector's cosine distance is NaN.
  Each named index records which layout it uses; the choice is made once, when it is created.
* **Several indexes per database.** Rows carry an index ``name``; ``obsmem_vector_indexes``
  records each one's ``dimensions``, ``space`` (the embedder's name) and layout, and reopening
  with another size or embedder is refused, as :class:`~obsmem.vectors.SQLiteVectorIndex` does.
* **A schema of its own, migrated.** The tables (and the extension) are numbered steps of
  :data:`POSTGRES_VECTOR_MIGRATIONS`, recorded in ``_obsmem_vector_migrations`` and applied
  under obsmem's migration lock when an index object first connects, so processes opening
  indexes on a new database at the same moment wait for each other instead of colliding in the
  catalog. The pgvector table's step waits (stays pending, retried at the next open) on a server
  that cannot give the ``vector`` extension yet. A new index name is registered under a
  transaction-level advisory lock of its own, so two processes creating it agree on its layout.
* **One connection per index object**, in autocommit mode, used by one operation at a time
  (an :class:`asyncio.Lock`), so a multi-row upsert is one transaction that no other operation
  of this object interleaves with. A connection that broke is replaced at the next call.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from obsmem.errors import ConfigError, ObsmemError, StorageError
from obsmem.migrations import POSTGRESQL, MigrationSet
from obsmem.redact import redact_secrets

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

__all__ = ["POSTGRES_VECTOR_MIGRATIONS", "VECTOR_MIGRATIONS_TABLE", "PostgresVectorIndex"]

Conn = psycopg.AsyncConnection[Any]
Layout = Literal["pgvector", "array"]

# pgvector's ceiling for hnsw.ef_search; an approximate search for more goes straight to exact.
_MAX_EF_SEARCH = 1000
_MIN_EF_SEARCH = 40
# pg_advisory_xact_lock key for registering an index name: the bytes "obsmvec1" as a bigint.
_REGISTRY_LOCK = 0x6F62736D76656331

VECTOR_MIGRATIONS_TABLE = "_obsmem_vector_migrations"
POSTGRES_VECTOR_MIGRATIONS: MigrationSet[psycopg.Connection[Any]] = MigrationSet(
    POSTGRESQL, VECTOR_MIGRATIONS_TABLE, "postgresql-vectors"
)


@POSTGRES_VECTOR_MIGRATIONS.register
def m001_vector_tables(conn: psycopg.Connection[Any]) -> None:
    """The registry of named indexes and the plain-array layout's table."""
    # IF NOT EXISTS: databases written before this step was recorded already have the tables.
    statements = [
        """CREATE TABLE IF NOT EXISTS obsmem_vector_indexes (
            name text PRIMARY KEY,
            dimensions integer NOT NULL,
            space text NOT NULL,
            layout text NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS obsmem_vector_arrays (
            index_name text NOT NULL,
            key text NOT NULL,
            namespace text NOT NULL,
            embedding real[] NOT NULL,
            PRIMARY KEY (index_name, key)
        )""",
        "CREATE INDEX IF NOT EXISTS obsmem_vector_arrays_by_namespace "
        "ON obsmem_vector_arrays (index_name, namespace text_pattern_ops)",
    ]
    for statement in statements:
        conn.execute(statement)


@POSTGRES_VECTOR_MIGRATIONS.register
def m002_pgvector_rows(conn: psycopg.Connection[Any]) -> bool:
    """The pgvector layout's table; waits (False) while the server cannot give the extension."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
        try:
            with conn.transaction():  # a savepoint: a refusal must not abort the step's transaction
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error:
            return False
    statements = [
        """CREATE TABLE IF NOT EXISTS obsmem_vector_rows (
            index_name text NOT NULL,
            key text NOT NULL,
            namespace text NOT NULL,
            embedding vector NOT NULL,
            PRIMARY KEY (index_name, key)
        )""",
        "CREATE INDEX IF NOT EXISTS obsmem_vector_rows_by_namespace "
        "ON obsmem_vector_rows (index_name, namespace text_pattern_ops)",
    ]
    for statement in statements:
        conn.execute(statement)
    return True


# The statements of each layout. Keys sort with COLLATE "C" (code-point order, as Python sorts),
# so ties break exactly as in the in-memory index whatever the database's collation.
_IN_NAMESPACE = "index_name = %s AND namespace LIKE %s ESCAPE '\\'"
_STATEMENTS: dict[Layout, dict[str, str]] = {
    "pgvector": {
        "upsert": "INSERT INTO obsmem_vector_rows (index_name, key, namespace, embedding) "
        "VALUES (%s, %s, %s, %s::vector) ON CONFLICT (index_name, key) DO UPDATE "
        "SET namespace = excluded.namespace, embedding = excluded.embedding",
        "delete": "DELETE FROM obsmem_vector_rows WHERE index_name = %s AND key = %s",
        "delete_namespace": f"DELETE FROM obsmem_vector_rows WHERE {_IN_NAMESPACE}",
        "count": f"SELECT count(*) FROM obsmem_vector_rows WHERE {_IN_NAMESPACE}",
        # <#> is the negative inner product.
        "search": "SELECT key, namespace, -(embedding <#> %s::vector) AS score FROM obsmem_vector_rows "
        f"WHERE {_IN_NAMESPACE} ORDER BY score DESC, key COLLATE \"C\" LIMIT %s",
    },
    "array": {
        "upsert": "INSERT INTO obsmem_vector_arrays (index_name, key, namespace, embedding) "
        "VALUES (%s, %s, %s, %s::real[]) ON CONFLICT (index_name, key) DO UPDATE "
        "SET namespace = excluded.namespace, embedding = excluded.embedding",
        "delete": "DELETE FROM obsmem_vector_arrays WHERE index_name = %s AND key = %s",
        "delete_namespace": f"DELETE FROM obsmem_vector_arrays WHERE {_IN_NAMESPACE}",
        "count": f"SELECT count(*) FROM obsmem_vector_arrays WHERE {_IN_NAMESPACE}",
        "search": "SELECT key, namespace, (SELECT coalesce(sum(a::float8 * b), 0) "
        "FROM unnest(embedding, %s::float8[]) AS t(a, b)) AS score FROM obsmem_vector_arrays "
        f"WHERE {_IN_NAMESPACE} ORDER BY score DESC, key COLLATE \"C\" LIMIT %s",
    },
}


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with ``prefix``, its ``%``, ``_`` and ``\\`` literal."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def redact_password(url: str) -> str:
    """``url`` without its password (user info or ``?password=``), for error messages."""
    return redact_secrets(url)


class PostgresVectorIndex:
    """Exact search over vectors kept in the PostgreSQL database at ``url``.

    ``name`` selects one index among several in the database; ``dimensions`` and ``space`` must
    match what the index was created with. ``use_pgvector``: ``None`` uses the ``vector``
    extension when the server has it (creating it if allowed) and plain arrays otherwise;
    ``True`` requires it; ``False`` stores arrays. An existing index keeps the layout it was
    created with, and an explicit choice that contradicts it is refused.
    """

    def __init__(
        self,
        url: str,
        dimensions: int,
        *,
        name: str = "default",
        space: str = "",
        use_pgvector: bool | None = None,
        approximate: bool = False,
        connect_timeout_s: float = 10.0,
        statement_timeout_s: float | None = 30.0,
        lock_timeout_s: float | None = 10.0,
    ) -> None:
        self.url = url
        # Per-session bounds, as the store's: a lock another session holds (a migration, LOCK
        # TABLE, a stopped process inside a transaction) fails a call after lock_timeout_s instead
        # of holding it (a turn's search) as long as it is held. None: the server's setting.
        self.statement_timeout_s = statement_timeout_s
        self.lock_timeout_s = lock_timeout_s
        self.dimensions = check_dimensions(dimensions)
        self.space = space
        self.name = name
        self.use_pgvector = use_pgvector
        self.approximate = approximate
        self._iterative_scan: bool | None = None  # whether the server's pgvector has it; None: untried
        self.connect_timeout_s = connect_timeout_s
        self._connection: Conn | None = None
        self._layout: Layout | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        dimensions: int,
        *,
        name: str = "default",
        space: str = "",
        use_pgvector: bool | None = None,
        approximate: bool = False,
        statement_timeout_s: float | None = 30.0,
        lock_timeout_s: float | None = 10.0,
    ) -> PostgresVectorIndex:
        """Open (or create) the index now, so a size, embedder or layout mismatch surfaces at once."""
        index = cls(
            url, dimensions, name=name, space=space, use_pgvector=use_pgvector, approximate=approximate,
            statement_timeout_s=statement_timeout_s, lock_timeout_s=lock_timeout_s,
        )
        try:
            await index.layout()
        except BaseException:
            await index.close()
            raise
        return index

    def __repr__(self) -> str:
        return (
            f"PostgresVectorIndex({redact_password(self.url)!r}, name={self.name!r}, "
            f"dimensions={self.dimensions}, space={self.space!r})"
        )

    # -- plumbing -----------------------------------------------------------------------------

    async def layout(self) -> Layout:
        """``"pgvector"`` or ``"array"``: how this index stores and scores its vectors."""
        async with self._lock:
            await self._connect()
            assert self._layout is not None
            return self._layout

    async def _connect(self) -> Conn:
        if self._closed:
            raise StorageError(
                "This vector index has been closed; open it again with PostgresVectorIndex(...)."
            )
        if self._connection is not None and not self._connection.closed:
            return self._connection
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            )
        except psycopg.Error as exc:
            raise StorageError(
                f"Cannot connect to the vector index database {redact_password(self.url)}: {exc}. "
                "Check the URL and that the server is running."
            ) from exc
        try:
            for setting, seconds in (("statement_timeout", self.statement_timeout_s), ("lock_timeout", self.lock_timeout_s),
                                     ("idle_in_transaction_session_timeout", self.statement_timeout_s)):
                if seconds is not None:
                    await conn.execute(f"SET {setting} = {max(1, int(seconds * 1000))}")
            if self._layout is None:
                await asyncio.to_thread(self._migrate)
                self._layout = await self._register(conn)
        except psycopg.Error as exc:
            await conn.close()
            raise StorageError(
                f"Cannot create the vector index tables in {redact_password(self.url)}: {exc}. "
                "The role needs CREATE on the database's public schema."
            ) from exc
        except BaseException:
            await conn.close()
            raise
        self._connection = conn
        return conn

    def _migrate(self) -> None:
        """Bring the vector tables up to date (blocking: run on a thread, on a connection of its own)."""
        timeout = max(1, int(self.connect_timeout_s))
        with psycopg.connect(self.url, autocommit=True, connect_timeout=timeout) as conn:
            POSTGRES_VECTOR_MIGRATIONS.migrate(conn)

    async def _register(self, conn: Conn) -> Layout:
        """This index's layout: recorded, or chosen now and recorded for the next opener."""
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_REGISTRY_LOCK,))
            cur = await conn.execute(
                "SELECT dimensions, space, layout FROM obsmem_vector_indexes WHERE name = %s", (self.name,)
            )
            row = await cur.fetchone()
            layout: Layout = "array"
            if row is not None:
                layout = self._check_identity(int(row[0]), str(row[1]), str(row[2]))
            else:
                if self.use_pgvector is not False and await self._pgvector_ready(conn):
                    layout = "pgvector"
                await conn.execute(
                    "INSERT INTO obsmem_vector_indexes (name, dimensions, space, layout) "
                    "VALUES (%s, %s, %s, %s)",
                    (self.name, self.dimensions, self.space, layout),
                )
            if layout == "pgvector" and self.approximate:
                await conn.execute(self._hnsw_index_ddl())
            return layout

    @property
    def hnsw_index_name(self) -> str:
        """The name of this index's HNSW index (built only with ``approximate=True``)."""
        return "obsmem_vector_hnsw_" + hashlib.sha256(self.name.encode()).hexdigest()[:16]

    def _vector_type(self) -> sql.Composable:
        return sql.SQL("vector({})").format(sql.SQL(str(self.dimensions)))

    def _hnsw_index_ddl(self) -> sql.Composed:
        return sql.SQL(
            "CREATE INDEX IF NOT EXISTS {index} ON obsmem_vector_rows "
            "USING hnsw ((embedding::{type}) vector_ip_ops) WHERE index_name = {name}"
        ).format(
            index=sql.Identifier(self.hnsw_index_name), type=self._vector_type(), name=sql.Literal(self.name)
        )

    def approximate_query(self) -> sql.Composed:
        """The HNSW search: the index's own expression and predicate, so the planner can use it.

        Parameters: the query vector's literal, the LIKE pattern, the literal again, ``k``.
        """
        return sql.SQL(
            "SELECT key, namespace, -(embedding::{type} <#> %s::{type}) AS score FROM obsmem_vector_rows "
            "WHERE index_name = {name} AND namespace LIKE %s ESCAPE '\\' "
            "ORDER BY embedding::{type} <#> %s::{type} LIMIT %s"
        ).format(type=self._vector_type(), name=sql.Literal(self.name))

    async def _pgvector_ready(self, conn: Conn) -> bool:
        """Whether the pgvector layout's table exists (its migration step ran)."""
        cur = await conn.execute("SELECT to_regclass('obsmem_vector_rows')")
        row = await cur.fetchone()
        if row is not None and row[0] is not None:
            return True
        if self.use_pgvector:
            raise ConfigError(
                "vectors.use_pgvector",
                f"the pgvector extension is not installed in {redact_password(self.url)} and cannot be created",
                allowed="False or None (plain arrays), or install pgvector on the server",
            )
        return False

    def _check_identity(self, dimensions: int, space: str, layout: str) -> Layout:
        where = f"index '{self.name}' in {redact_password(self.url)}"
        if dimensions != self.dimensions:
            raise ConfigError(
                "vectors.dimensions",
                f"{where} holds {dimensions}-dimensional vectors, not {self.dimensions}",
                allowed=f"{dimensions}, or another index name or database",
            )
        if space != self.space:
            raise ConfigError(
                "vectors.space",
                f"{where} holds vectors of embedder '{space}', not '{self.space}'; "
                "their scores would not be comparable",
                allowed=f"'{space}', or another index name or database",
            )
        if layout not in ("pgvector", "array"):
            raise StorageError(f"The {where} records an unknown layout '{layout}'; the table is damaged.")
        if self.use_pgvector is not None and self.use_pgvector != (layout == "pgvector"):
            raise ConfigError(
                "vectors.use_pgvector",
                f"{where} was created {'with' if layout == 'pgvector' else 'without'} pgvector",
                allowed=f"None or {layout == 'pgvector'}, or another index name",
            )
        return "pgvector" if layout == "pgvector" else "array"

    @asynccontextmanager
    async def _connection_in_use(self) -> AsyncIterator[Conn]:
        """The connection, for one operation at a time; database errors become StorageError."""
        async with self._lock:
            conn = await self._connect()
            try:
                yield conn
            except ObsmemError:
                raise
            except psycopg.errors.LockNotAvailable as exc:
                raise StorageError(
                    f"The vector index '{self.name}' in {redact_password(self.url)}: a lock was not granted within "
                    f"lock_timeout ({self.lock_timeout_s}s; another session holds it): {exc}"
                ) from exc
            except psycopg.Error as exc:
                if conn.broken:
                    self._connection = None
                raise StorageError(
                    f"The vector index '{self.name}' in {redact_password(self.url)} failed: {exc}"
                ) from exc

    async def _execute(self, statement: str, rows: Sequence[Sequence[object]]) -> list[tuple[Any, ...]]:
        """Run ``statement`` once per row (one transaction when several); the last run's result rows."""
        async with self._connection_in_use() as conn:
            assert self._layout is not None
            query = _STATEMENTS[self._layout][statement]
            if len(rows) == 1:
                cur = await conn.execute(query, rows[0])
                return await cur.fetchall() if cur.description else [(cur.rowcount,)]
            async with conn.transaction():
                async with conn.cursor() as cur:
                    await cur.executemany(query, rows)
            return []

    async def _search_hnsw(self, literal: object, pattern: str, k: int) -> list[tuple[Any, ...]]:
        async with self._connection_in_use() as conn, conn.transaction():
            ef_search = sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(_MIN_EF_SEARCH, k)))
            await conn.execute(ef_search)
            if self._iterative_scan is not False:
                try:
                    async with conn.transaction():  # a savepoint: pgvector < 0.8 lacks the setting
                        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    self._iterative_scan = True
                except psycopg.Error:
                    self._iterative_scan = False
            cur = await conn.execute(self.approximate_query(), (literal, pattern, literal, k))
            return await cur.fetchall()

    def _embedding(self, row: npt.NDArray[np.float32]) -> object:
        values = row.tolist()
        if self._layout == "pgvector":
            return "[" + ",".join(map(repr, values)) + "]"
        return values

    # -- the VectorIndex protocol -------------------------------------------------------------

    async def upsert(self, key: str, vector: VectorLike, namespace: str = "") -> None:
        row = as_unit_vector(vector, self.dimensions)
        await self._write_rows([key], row[None, :], [namespace])

    async def upsert_many(
        self, keys: Sequence[str], vectors: VectorLike, namespaces: Sequence[str] | str = ""
    ) -> None:
        check_distinct(keys)
        matrix = as_unit_matrix(vectors, len(keys), self.dimensions)
        spread = spread_namespaces(keys, namespaces)
        if keys:
            await self._write_rows(list(keys), matrix, spread)

    async def _write_rows(
        self, keys: list[str], matrix: npt.NDArray[np.float32], namespaces: list[str]
    ) -> None:
        await self.layout()  # the literal's form depends on it
        await self._execute(
            "upsert",
            [
                (self.name, key, namespace, self._embedding(matrix[i]))
                for i, (key, namespace) in enumerate(zip(keys, namespaces, strict=True))
            ],
        )

    async def delete(self, key: str) -> bool:
        [(deleted,)] = await self._execute("delete", [(self.name, key)])
        return int(deleted) > 0

    async def delete_namespace(self, namespace_prefix: str) -> int:
        [(deleted,)] = await self._execute("delete_namespace", [(self.name, like_prefix(namespace_prefix))])
        return int(deleted)

    async def search(self, query: VectorLike, k: int = 10, *, namespace_prefix: str = "") -> list[VectorHit]:
        check_k(k)
        unit_query = as_unit_vector(query, self.dimensions, "query")
        if await self.layout() and k == 0:  # a closed or mismatched index fails even for k = 0
            return []
        literal, pattern = self._embedding(unit_query), like_prefix(namespace_prefix)
        if self.approximate and self._layout == "pgvector" and k <= _MAX_EF_SEARCH:
            # relaxed_order may return rows slightly out of order: sort them as the exact query does.
            found = _hits(await self._search_hnsw(literal, pattern, k))
            found.sort(key=lambda hit: (-hit.score, hit.key))
            if len(found) == k:
                return found
        return _hits(await self._execute("search", [(literal, self.name, pattern, k)]))

    async def count(self, namespace_prefix: str = "") -> int:
        [(total,)] = await self._execute("count", [(self.name, like_prefix(namespace_prefix))])
        return int(total)

    async def close(self) -> None:
        """Close the connection; safe to call twice. The index cannot be used afterwards."""
        async with self._lock:
            self._closed = True
            if self._connection is not None:
                await self._connection.close()
                self._connection = None


def _hits(rows: Sequence[tuple[Any, ...]]) -> list[VectorHit]:
    return [VectorHit(key=str(key), score=float(score), namespace=str(ns)) for key, ns, score in rows]
