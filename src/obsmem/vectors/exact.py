"""Exact nearest-neighbour search in memory: one float32 matrix, a matrix product, argpartition.

This is the engine under both shipped indexes. Brute force is exact (recall 1.0) and fast
enough for an agent's memory: a 384-d product over 100k rows takes milliseconds, with no
index to build or tune (``environment.md`` §4).

Scores come from ``np.einsum`` rather than ``matrix @ query``: a matrix-vector product is
bound by memory bandwidth, so BLAS threads barely speed it up, but they must all be
scheduled before the call returns. On a busy machine (an agent process also running a
model) that made the BLAS product 2–30× slower at the median than einsum's single-threaded
loop, which is as fast when the machine is idle (``benchmarks/vectors.py`` shows both).

Rows live in one growable matrix; a key maps to its row, and a delete moves the last row
into the hole so the live rows stay contiguous and the product never touches dead rows.
Not thread-safe: its owners serialise access.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .base import VectorHit

__all__ = ["ExactMatrix"]

_INITIAL_CAPACITY = 64
_GATHER_SHARE = 0.25  # below this share of matching rows, multiply only those rows


def _scores(matrix: npt.NDArray[np.float32], unit_query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Dot product of every row with the query, on the calling thread only."""
    scores: npt.NDArray[np.float32] = np.einsum("ij,j->i", matrix, unit_query)
    return scores


class ExactMatrix:
    """Keyed, namespaced unit vectors with exact top-k search. Callers pass unit rows."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.clear()

    def clear(self) -> None:
        """Forget every vector."""
        self._matrix = np.zeros((_INITIAL_CAPACITY, self.dimensions), dtype=np.float32)
        self._namespace_ids = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._keys: list[str] = []
        self._rows: dict[str, int] = {}
        # Namespaces by id, with their live rows: one whose last row goes is dropped and its id
        # reused, so a long-lived index holds (and a search scans) the namespaces it holds now,
        # not every one it ever held (each deleted user's, each re-indexed group's).
        self._namespaces: list[str | None] = []
        self._namespace_id: dict[str, int] = {}
        self._namespace_rows: list[int] = []
        self._free_ids: list[int] = []

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    # -- writes -------------------------------------------------------------------------------

    def _namespace(self, namespace: str) -> int:
        """The id of ``namespace`` for one more row in it."""
        found = self._namespace_id.get(namespace)
        if found is None:
            if self._free_ids:
                found = self._free_ids.pop()
                self._namespaces[found] = namespace
            else:
                found = len(self._namespaces)
                self._namespaces.append(namespace)
                self._namespace_rows.append(0)
            self._namespace_id[namespace] = found
        self._namespace_rows[found] += 1
        return found

    def _leave(self, namespace_id: int) -> None:
        """One row less in the namespace ``namespace_id``: dropped with its last row."""
        self._namespace_rows[namespace_id] -= 1
        if self._namespace_rows[namespace_id] == 0:
            name = self._namespaces[namespace_id]
            if name is not None:
                del self._namespace_id[name]
            self._namespaces[namespace_id] = None
            self._free_ids.append(namespace_id)

    def _grow_to(self, rows: int) -> None:
        capacity = self._matrix.shape[0]
        if rows <= capacity:
            return
        while capacity < rows:
            capacity *= 2
        matrix = np.zeros((capacity, self.dimensions), dtype=np.float32)
        matrix[: len(self._keys)] = self._matrix[: len(self._keys)]
        namespace_ids = np.zeros(capacity, dtype=np.int32)
        namespace_ids[: len(self._keys)] = self._namespace_ids[: len(self._keys)]
        self._matrix, self._namespace_ids = matrix, namespace_ids

    def upsert(
        self, keys: Sequence[str], unit_rows: npt.NDArray[np.float32], namespaces: Sequence[str]
    ) -> None:
        """Store each key's row and namespace, replacing an existing key in place."""
        self._grow_to(len(self._keys) + len(keys))
        for key, row, namespace in zip(keys, unit_rows, namespaces, strict=True):
            position = self._rows.get(key)
            joined = self._namespace(namespace)
            if position is None:
                position = len(self._keys)
                self._rows[key] = position
                self._keys.append(key)
            else:
                self._leave(int(self._namespace_ids[position]))
            self._matrix[position] = row
            self._namespace_ids[position] = joined

    def replace_all(
        self, keys: Sequence[str], unit_rows: npt.NDArray[np.float32], namespaces: Sequence[str]
    ) -> None:
        """Load distinct keys in bulk, dropping whatever was held.

        Takes ownership of ``unit_rows`` (a C-contiguous float32 ``(len(keys), dimensions)``
        array) instead of copying it, so loading 100k rows does not hold them twice.
        """
        self.clear()
        if not keys:
            return
        self._matrix = np.ascontiguousarray(unit_rows, dtype=np.float32)
        self._keys = list(keys)
        self._rows = {key: position for position, key in enumerate(self._keys)}
        self._namespace_ids = np.fromiter(
            (self._namespace(namespace) for namespace in namespaces), dtype=np.int32, count=len(keys)
        )

    def delete(self, key: str) -> bool:
        position = self._rows.pop(key, None)
        if position is None:
            return False
        self._leave(int(self._namespace_ids[position]))
        last = len(self._keys) - 1
        if position != last:
            moved = self._keys[last]
            self._matrix[position] = self._matrix[last]
            self._namespace_ids[position] = self._namespace_ids[last]
            self._keys[position] = moved
            self._rows[moved] = position
        self._keys.pop()
        return True

    def delete_namespace(self, namespace_prefix: str) -> list[str]:
        """Delete every key whose namespace starts with ``namespace_prefix``; the keys deleted."""
        doomed = self.keys(namespace_prefix)
        for key in doomed:
            self.delete(key)
        return doomed

    # -- reads --------------------------------------------------------------------------------

    def _matching_rows(self, namespace_prefix: str) -> npt.NDArray[np.bool_] | None:
        """A mask of live rows in matching namespaces; ``None`` means every row matches."""
        if not namespace_prefix:
            return None
        names = self._namespaces
        matching = [i for i, name in enumerate(names) if name is not None and name.startswith(namespace_prefix)]
        live = self._namespace_ids[: len(self._keys)]
        return np.isin(live, np.asarray(matching, dtype=np.int32))

    def keys(self, namespace_prefix: str = "") -> list[str]:
        mask = self._matching_rows(namespace_prefix)
        if mask is None:
            return list(self._keys)
        return [self._keys[int(i)] for i in np.flatnonzero(mask)]

    def count(self, namespace_prefix: str = "") -> int:
        mask = self._matching_rows(namespace_prefix)
        return len(self._keys) if mask is None else int(mask.sum())

    def vector(self, key: str) -> npt.NDArray[np.float32] | None:
        position = self._rows.get(key)
        return None if position is None else self._matrix[position].copy()

    def search(
        self, unit_query: npt.NDArray[np.float32], k: int, namespace_prefix: str = ""
    ) -> list[VectorHit]:
        size = len(self._keys)
        if k <= 0 or size == 0:
            return []
        mask = self._matching_rows(namespace_prefix)
        rows: npt.NDArray[np.intp] | None = None
        if mask is None:
            scores = _scores(self._matrix[:size], unit_query)
        else:
            rows = np.flatnonzero(mask)
            if rows.size == 0:
                return []
            if rows.size < _GATHER_SHARE * size:
                scores = _scores(self._matrix[rows], unit_query)
            else:
                scores = _scores(self._matrix[:size], unit_query)[rows]
        take = min(k, scores.shape[0])
        if take < scores.shape[0]:
            top = np.argpartition(-scores, take - 1)[:take]
            # Every row tied with the weakest winner is a candidate too, so ties break by key
            # rather than by argpartition's arbitrary choice.
            top = np.flatnonzero(scores >= scores[top].min())
        else:
            top = np.arange(scores.shape[0])
        positions = top if rows is None else rows[top]
        candidates = sorted(
            ((float(scores[t]), self._keys[int(p)], int(p)) for t, p in zip(top, positions, strict=True)),
            key=lambda item: (-item[0], item[1]),
        )[:take]
        return [
            VectorHit(key=key, score=score, namespace=self._namespaces[int(self._namespace_ids[position])] or "")
            for score, key, position in candidates
        ]
