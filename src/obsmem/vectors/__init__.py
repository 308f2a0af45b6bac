"""Vector indexes: keyed, namespaced unit vectors and nearest-neighbour search.

* ``VectorIndex`` — the protocol (``upsert``/``upsert_many``/``delete``/``delete_namespace``/
  ``search``/``count``/``close``); namespaces are matched by prefix.
* ``SQLiteVectorIndex`` — the default: exact numpy search, vectors persisted in SQLite.
* ``InMemoryVectorIndex`` — the same search, nothing persisted.
"""

from __future__ import annotations

from .base import VectorHit, VectorIndex, VectorLike
from .memory import InMemoryVectorIndex
from .sqlite import SQLiteVectorIndex

__all__ = ["InMemoryVectorIndex", "SQLiteVectorIndex", "VectorHit", "VectorIndex", "VectorLike"]
