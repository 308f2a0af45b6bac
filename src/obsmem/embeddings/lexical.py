"""A dependency-free embedder: hashed word unigrams and bigrams.

It is the fallback when the MiniLM extra is not installed, so the core install stays
small. It only knows surface words (no synonyms), but it is deterministic across
processes and machines, which matters because its vectors are persisted: the hash is
BLAKE2b, never Python's per-process salted ``hash()``.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from obsmem.errors import ConfigError

from .base import EmbeddingMatrix, normalise_rows

__all__ = ["LexicalHashEmbedder", "forget_features", "lexical_features"]

_WORD = re.compile(r"\w+", re.UNICODE)
_BIGRAM_WEIGHT = 0.5  # a shared bigram is evidence of shared phrasing, but less than a shared word


def _normalised_words(text: str) -> list[str]:
    """Case-folded, NFKC-normalised words, with a light plural/possessive strip."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words: list[str] = []
    for word in _WORD.findall(folded):
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.append(word)
    return words


def lexical_features(text: str) -> list[tuple[str, float]]:
    """The weighted features a text is hashed from: each word, and each adjacent word pair."""
    words = _normalised_words(text)
    features = [(word, 1.0) for word in words]
    features.extend((f"{first} {second}", _BIGRAM_WEIGHT) for first, second in itertools.pairwise(words))
    return features


def forget_features() -> None:
    """Drop the kept buckets of features (words and word pairs of the texts embedded): after a
    delete or a forget, none of what went stays in this process."""
    _bucket_and_sign.cache_clear()


@lru_cache(maxsize=65536)
def _bucket_and_sign(feature: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    # The low bit picks a sign so that colliding features cancel on average instead of piling up.
    sign = 1.0 if value & 1 else -1.0
    return (value >> 1) % dimensions, sign


class LexicalHashEmbedder:
    """Feature-hashing embedder: words and word pairs hashed into ``dimensions`` signed buckets.

    Term counts are damped (``1 + log(count)``) so a repeated word does not dominate.
    """

    def __init__(self, dimensions: int = 384) -> None:
        if dimensions < 8:
            raise ConfigError("embeddings.dimensions", f"{dimensions} is too small", allowed=">= 8")
        self.dimensions = dimensions
        self.name = f"lexical-hash-{dimensions}"

    def embed_sync(self, texts: Sequence[str]) -> EmbeddingMatrix:
        """Embed without an event loop; the work is pure CPU and fast."""
        matrix = np.zeros((len(texts), self.dimensions), dtype=np.float64)
        for row, text in enumerate(texts):
            counts: dict[tuple[int, float], float] = {}
            for feature, weight in lexical_features(text):
                key = _bucket_and_sign(feature, self.dimensions)
                counts[key] = counts.get(key, 0.0) + weight
            for (bucket, sign), total in counts.items():
                matrix[row, bucket] += sign * (1.0 + np.log1p(max(total - 1.0, 0.0)))
        return normalise_rows(matrix)

    async def embed(self, texts: Sequence[str]) -> EmbeddingMatrix:
        return self.embed_sync(texts)

    def __repr__(self) -> str:
        return f"LexicalHashEmbedder(dimensions={self.dimensions})"
