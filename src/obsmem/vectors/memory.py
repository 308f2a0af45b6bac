"""A vector index that lives only in memory: for tests, and for callers that rebuild on start."""

from __future__ import annotations

from collections.abc import Sequence

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

__all__ = ["InMemoryVectorIndex"]


class InMemoryVectorIndex:
    """Exact search over vectors held in this process only; nothing is persisted."""

    def __init__(self, dimensions: int, *, space: str = "") -> None:
        self.dimensions = check_dimensions(dimensions)
        self.space = space
        self._exact = ExactMatrix(dimensions)

    def __repr__(self) -> str:
        return f"InMemoryVectorIndex(dimensions={self.dimensions}, space={self.space!r}, size={len(self._exact)})"

    async def upsert(self, key: str, vector: VectorLike, namespace: str = "") -> None:
        row = as_unit_vector(vector, self.dimensions)
        self._exact.upsert([key], row[None, :], [namespace])

    async def upsert_many(
        self, keys: Sequence[str], vectors: VectorLike, namespaces: Sequence[str] | str = ""
    ) -> None:
        check_distinct(keys)
        matrix = as_unit_matrix(vectors, len(keys), self.dimensions)
        self._exact.upsert(list(keys), matrix, spread_namespaces(keys, namespaces))

    async def delete(self, key: str) -> bool:
        return self._exact.delete(key)

    async def delete_namespace(self, namespace_prefix: str) -> int:
        return len(self._exact.delete_namespace(namespace_prefix))

    async def search(self, query: VectorLike, k: int = 10, *, namespace_prefix: str = "") -> list[VectorHit]:
        check_k(k)
        return self._exact.search(as_unit_vector(query, self.dimensions, "query"), k, namespace_prefix)

    async def count(self, namespace_prefix: str = "") -> int:
        return self._exact.count(namespace_prefix)

    async def close(self) -> None:
        self._exact.clear()
