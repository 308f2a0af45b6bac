"""The embedding port: what the rest of obsmem needs from anything that turns text into vectors.

Retrieval and the knowledge store only compare vectors by cosine similarity, so every
embedder returns L2-normalised rows: a dot product is then the cosine, and a vector index
can rank with one matrix product.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "EmbeddingMatrix", "normalise_rows"]

EmbeddingMatrix = npt.NDArray[np.float32]
"""A ``(n, dimensions)`` float32 matrix, one L2-normalised row per input text."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of a fixed dimension.

    ``name`` identifies the vector space (``"minilm-l6-v2-int8"``, ``"lexical-hash-384"``):
    vectors from two embedders with different names must never be compared, so stores
    record it next to the vectors they keep.
    """

    name: str
    dimensions: int

    async def embed(self, texts: Sequence[str]) -> EmbeddingMatrix:
        """Embed ``texts`` into a ``(len(texts), dimensions)`` float32 matrix of unit rows.

        A text with nothing to embed (empty, or only punctuation for a lexical embedder)
        gives an all-zero row, which has cosine 0 with everything.
        """
        ...


def normalise_rows(matrix: npt.NDArray[np.floating]) -> EmbeddingMatrix:
    """Scale every row to unit L2 norm in float32; all-zero rows stay zero (no NaNs)."""
    as_float32 = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(as_float32, axis=1, keepdims=True)
    safe_norms = np.where(norms > 0.0, norms, np.float32(1.0))
    return np.ascontiguousarray(as_float32 / safe_norms, dtype=np.float32)
