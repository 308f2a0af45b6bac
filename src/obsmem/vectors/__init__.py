"""Vector indexes: keyed, namespaced unit vectors and nearest-neighbour search.

* ``VectorIndex`` — the protocol (``upsert``/``upsert_many``/``delete``/``delete_namespace``/
  ``search``/``count``/``close``); namespaces are matched by prefix.
* ``SQLiteVectorIndex`` — the default: exact numpy search, vectors persisted in SQLite.
* ``InMemoryVectorIndex`` — the same search, nothing persisted.
* ``PostgresVectorIndex`` — the same answers, computed by PostgreSQL (pgvector when present);
  imported on first use, because its module needs psycopg, an optional dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import VectorHit, VectorIndex, VectorLike
from .memory import InMemoryVectorIndex
from .sqlite import SQLiteVectorIndex

if TYPE_CHECKING:
    from .postgres import PostgresVectorIndex

__all__ = [
    "InMemoryVectorIndex",
    "PostgresVectorIndex",
    "SQLiteVectorIndex",
    "VectorHit",
    "VectorIndex",
    "VectorLike",
]


def __getattr__(name: str) -> object:
    """``PostgresVectorIndex`` on first use: its module imports psycopg, an optional dependency."""
    if name == "PostgresVectorIndex":
        from .postgres import PostgresVectorIndex

        return PostgresVectorIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
