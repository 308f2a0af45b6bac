"""Vectors in PostgreSQL: pgvector with HNSW indexes when available, exact search otherwise.

The ``vectors`` table (migration ``m002_vectors``) holds ``(namespace, id)`` → embedding, its
dimension, its norm and a JSON metadata document. Its ``embedding`` column is

* ``vector`` when the server has pgvector. An HNSW index needs a fixed dimension while the
  table holds any, so one partial expression index per dimension is built on first use:
  ``USING hnsw ((embedding::vector(D)) vector_cosine_ops) WHERE dims = D``, and searches use
  the same expression and predicate so the planner picks it.
* ``float8[]`` otherwise: cosine similarity is computed exactly, in SQL, over the namespace.

Scores are cosine similarities in [-1, 1], best first, on both layouts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from obsmem.errors import InvalidInputError

__all__ = ["VectorHit", "backend", "delete", "search", "upsert"]

Conn = psycopg.AsyncConnection[Any]


@dataclass(frozen=True, slots=True)
class VectorHit:
    id: str
    score: float
    metadata: dict[str, Any]


async def backend(conn: Conn) -> str:
    cur = await conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass('vectors') AND attname = 'embedding'"
    )
    row = await cur.fetchone()
    return "pgvector" if row and str(row[0]).startswith("vector") else "exact"


def _check(namespace: str, vector: Sequence[float]) -> float:
    if not namespace:
        raise InvalidInputError("A vector namespace must not be empty.")
    if not vector or not all(math.isfinite(x) for x in vector):
        raise InvalidInputError("A vector must have at least one dimension and only finite numbers.")
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        raise InvalidInputError("A zero vector has no direction; cosine similarity is undefined for it.")
    return norm


def _literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


async def _ensure_hnsw(conn: Conn, dims: int) -> None:
    # Index DDL takes a lock on the table; IF NOT EXISTS makes concurrent first users harmless.
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS vectors_hnsw_{dims} ON vectors "
        f"USING hnsw ((embedding::vector({dims})) vector_cosine_ops) WHERE dims = {dims}"
    )


async def upsert(conn: Conn, namespace: str, items: Sequence[tuple[str, Sequence[float], dict[str, Any]]]) -> int:
    pgvector = await backend(conn) == "pgvector"
    dims_seen: set[int] = set()
    for item_id, vector, metadata in items:
        norm = _check(namespace, vector)
        value: Any = _literal(vector) if pgvector else [float(x) for x in vector]
        cast = "::vector" if pgvector else ""
        await conn.execute(
            "INSERT INTO vectors (namespace, id, dims, norm, embedding, metadata) "
            f"VALUES (%s, %s, %s, %s, %s{cast}, %s) ON CONFLICT (namespace, id) DO UPDATE SET "
            "dims = excluded.dims, norm = excluded.norm, embedding = excluded.embedding, metadata = excluded.metadata",
            (namespace, item_id, len(vector), norm, value, json.dumps(metadata)),
        )
        dims_seen.add(len(vector))
    if pgvector:
        for dims in sorted(dims_seen):
            await _ensure_hnsw(conn, dims)
    return len(items)


async def search(conn: Conn, namespace: str, query: Sequence[float], k: int) -> list[VectorHit]:
    norm = _check(namespace, query)
    if k < 1:
        raise InvalidInputError(f"k must be at least 1, got {k}.")
    dims = len(query)
    if await backend(conn) == "pgvector":
        # ef_search bounds the candidates HNSW returns; keep it at least k so k results can come back.
        await conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, k)}")
        # The namespace filter runs after the index scan; pgvector >= 0.8 can keep scanning until
        # k rows pass it. Older versions lack the setting: a savepoint keeps the search going.
        try:
            async with conn.transaction():
                await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        except psycopg.Error:
            pass
        cur = await conn.execute(
            f"SELECT id, 1 - (embedding::vector({dims}) <=> %s::vector({dims})) AS score, metadata "
            f"FROM vectors WHERE namespace = %s AND dims = {dims} "
            f"ORDER BY embedding::vector({dims}) <=> %s::vector({dims}) LIMIT %s",
            (_literal(query), namespace, _literal(query), k),
        )
    else:
        cur = await conn.execute(
            "SELECT id, (SELECT sum(a * b) FROM unnest(embedding, %s::float8[]) AS t(a, b)) / (norm * %s) AS score, "
            "metadata FROM vectors WHERE namespace = %s AND dims = %s ORDER BY score DESC, id LIMIT %s",
            ([float(x) for x in query], norm, namespace, dims, k),
        )
    return [VectorHit(id=row[0], score=float(row[1]), metadata=json.loads(row[2])) for row in await cur.fetchall()]


async def delete(conn: Conn, namespace: str, ids: Sequence[str]) -> int:
    cur = await conn.execute("DELETE FROM vectors WHERE namespace = %s AND id = ANY(%s)", (namespace, list(ids)))
    return cur.rowcount
