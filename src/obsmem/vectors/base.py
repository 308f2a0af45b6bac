"""The vector-index port: store unit vectors under string keys, find the nearest ones.

Built for obsmem's two users of similarity search: the knowledge store and retrieval mode.
Both key vectors by their own ids (strings) and scope them with a **namespace**, a string
matched by prefix — ``"resource:alice/thread:t1"`` lies inside both ``"resource:alice/"`` and
``"resource:alice/thread:t1"`` — so one index can serve a resource, a thread, or everything,
without one index per scope.

Scores are cosine similarities: indexes normalise what they store and what they are asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from obsmem.errors import ConfigError, InvalidInputError

__all__ = [
    "VectorHit",
    "VectorIndex",
    "VectorLike",
    "as_unit_matrix",
    "as_unit_vector",
    "check_dimensions",
    "check_distinct",
    "check_k",
    "spread_namespaces",
]

VectorLike = npt.ArrayLike
"""A 1-d sequence of numbers: a numpy row, a list of floats."""


@dataclass(frozen=True, slots=True)
class VectorHit:
    """One search result: the stored key, its cosine similarity to the query, its namespace."""

    key: str
    score: float
    namespace: str


@runtime_checkable
class VectorIndex(Protocol):
    """Exact or approximate nearest-neighbour search over keyed, namespaced vectors.

    ``dimensions`` is fixed for the life of an index; a vector of another size is an
    :class:`~obsmem.errors.InvalidInputError`. ``space`` names the embedder whose vectors it
    holds (``Embedder.name``), so vectors from two embedders are never mixed.
    """

    dimensions: int
    space: str

    async def upsert(self, key: str, vector: VectorLike, namespace: str = "") -> None:
        """Store ``vector`` under ``key`` in ``namespace``, replacing what the key held."""
        ...

    async def upsert_many(
        self, keys: Sequence[str], vectors: VectorLike, namespaces: Sequence[str] | str = ""
    ) -> None:
        """:meth:`upsert` for many keys at once (one transaction where the index persists)."""
        ...

    async def delete(self, key: str) -> bool:
        """Remove ``key``; ``False`` when it was not there."""
        ...

    async def delete_namespace(self, namespace_prefix: str) -> int:
        """Remove every vector whose namespace starts with ``namespace_prefix``; how many."""
        ...

    async def search(self, query: VectorLike, k: int = 10, *, namespace_prefix: str = "") -> list[VectorHit]:
        """The ``k`` most similar vectors among namespaces starting with ``namespace_prefix``.

        Best first; fewer than ``k`` when fewer match; ties broken by key.
        """
        ...

    async def count(self, namespace_prefix: str = "") -> int:
        """How many vectors lie in namespaces starting with ``namespace_prefix``."""
        ...

    async def close(self) -> None:
        """Release files and threads; the index cannot be used afterwards."""
        ...


def _check_finite(matrix: npt.NDArray[np.float32], what: str) -> None:
    if not np.isfinite(matrix).all():
        raise InvalidInputError(f"The {what} holds NaN or infinity; embed the text again.")


def as_unit_vector(vector: VectorLike, dimensions: int, what: str = "vector") -> npt.NDArray[np.float32]:
    """``vector`` as a float32 unit row of ``dimensions`` (zero stays zero), or an error."""
    row = np.asarray(vector, dtype=np.float32)
    if row.ndim != 1 or row.shape[0] != dimensions:
        raise InvalidInputError(
            f"The {what} has shape {row.shape}, but this index holds {dimensions}-dimensional vectors; "
            "embed with the embedder the index was created for, or open a new index."
        )
    _check_finite(row, what)
    norm = float(np.linalg.norm(row))
    return row / np.float32(norm) if norm > 0.0 else row.copy()


def as_unit_matrix(vectors: VectorLike, rows: int, dimensions: int) -> npt.NDArray[np.float32]:
    """``vectors`` as a ``(rows, dimensions)`` float32 matrix of unit rows, or an error."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape != (rows, dimensions):
        raise InvalidInputError(
            f"The vectors have shape {matrix.shape}, expected ({rows}, {dimensions}): one "
            f"{dimensions}-dimensional row per key."
        )
    _check_finite(matrix, "vectors")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.ascontiguousarray(matrix / np.where(norms > 0.0, norms, np.float32(1.0)), dtype=np.float32)


def check_dimensions(dimensions: int) -> int:
    if dimensions < 1:
        raise ConfigError("vectors.dimensions", f"{dimensions} is not a vector size", allowed=">= 1")
    return dimensions


def check_k(k: int) -> None:
    if k < 0:
        raise InvalidInputError(f"k must be 0 or more, got {k}.")


def spread_namespaces(keys: Sequence[str], namespaces: Sequence[str] | str) -> list[str]:
    """One namespace per key: a single string applies to all keys."""
    if isinstance(namespaces, str):
        return [namespaces] * len(keys)
    if len(namespaces) != len(keys):
        raise InvalidInputError(
            f"Got {len(keys)} keys but {len(namespaces)} namespaces; pass one namespace per key or one for all."
        )
    return list(namespaces)


def check_distinct(keys: Sequence[str]) -> None:
    if len(set(keys)) != len(keys):
        raise InvalidInputError("The same key appears twice in one upsert_many call; pass each key once.")
