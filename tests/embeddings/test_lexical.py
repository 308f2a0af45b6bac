"""The lexical fallback: deterministic across processes, unit rows, shared words score higher."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from obsmem.embeddings import Embedder, LexicalHashEmbedder
from obsmem.embeddings.lexical import lexical_features
from obsmem.errors import ConfigError

pytestmark = pytest.mark.anyio

TEXTS = ["The user's dog is named Luna.", "Café naïve RÉSUMÉ", "", "!!!", "dogs dogs dogs"]

_PRINT_VECTORS = """
import asyncio, sys
from obsmem.embeddings import LexicalHashEmbedder
texts = ["The user's dog is named Luna.", "Café naïve RÉSUMÉ", "", "!!!", "dogs dogs dogs"]
sys.stdout.write(asyncio.run(LexicalHashEmbedder().embed(texts)).tobytes().hex())
"""


def vectors_in_a_new_process(hash_seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", _PRINT_VECTORS], env=env, capture_output=True, text=True, check=True
    )
    return bytes.fromhex(out.stdout)


def test_vectors_are_identical_across_processes_with_different_hash_seeds() -> None:
    first, second = vectors_in_a_new_process("1"), vectors_in_a_new_process("2")
    here = LexicalHashEmbedder().embed_sync(TEXTS).tobytes()
    assert first == second == here
    assert np.frombuffer(here, dtype=np.float32).any()


async def test_shape_dtype_unit_rows_and_zero_rows_for_nothing_to_embed() -> None:
    embedder = LexicalHashEmbedder()
    matrix = await embedder.embed(TEXTS)
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dimensions) == ("lexical-hash-384", 384)
    assert matrix.shape == (5, 384) and matrix.dtype == np.float32
    norms = np.linalg.norm(matrix, axis=1)
    np.testing.assert_allclose(norms[[0, 1, 4]], 1.0, atol=1e-6)
    assert norms[2] == 0.0 and norms[3] == 0.0
    assert (await embedder.embed([])).shape == (0, 384)


async def test_shared_words_rank_above_unrelated_text() -> None:
    embedder = LexicalHashEmbedder(dimensions=256)
    query, related, unrelated = await embedder.embed(
        ["What is the name of my dog?", "The user's dog is named Luna.", "The invoice was paid in March."]
    )
    assert float(query @ related) > float(query @ unrelated) + 0.1


def test_features_fold_case_accents_form_and_plurals() -> None:
    assert lexical_features("Dogs RUN") == [("dog", 1.0), ("run", 1.0), ("dog run", 0.5)]
    assert lexical_features("ﬁle") == lexical_features("FILE")  # NFKC ligature, case folded
    assert lexical_features("class") == [("class", 1.0)]  # "ss" is not a plural


def test_too_few_dimensions_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="embeddings.dimensions"):
        LexicalHashEmbedder(dimensions=4)
