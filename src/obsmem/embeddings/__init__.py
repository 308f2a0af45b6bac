"""Embedders: turn text into unit vectors for retrieval and the knowledge store.

* ``Embedder`` — the protocol: ``name``, ``dimensions``, ``async embed(texts)``.
* ``MiniLMEmbedder`` — all-MiniLM-L6-v2 int8 ONNX, offline (extra ``obsmem[embeddings]``).
* ``OpenAIEmbedder`` — OpenAI's ``/v1/embeddings`` (or a compatible server) over httpx.
* ``LexicalHashEmbedder`` — hashed words and word pairs; no dependency beyond numpy.
* ``MeteredEmbedder`` — wraps an embedder and reports each call to the cost ledger.
* ``default_embedder()`` — MiniLM when its extra is installed, else the lexical fallback.
"""

from __future__ import annotations

from .base import Embedder, EmbeddingMatrix, normalise_rows
from .default import EmbedderChoice, choose_default_embedder, default_embedder
from .lexical import LexicalHashEmbedder
from .metered import MeteredEmbedder
from .minilm import MINILM_MODEL_SHA256, MINILM_VOCAB_SHA256, MiniLMEmbedder, minilm_available
from .openai import OpenAIEmbedder

__all__ = [
    "Embedder",
    "EmbedderChoice",
    "EmbeddingMatrix",
    "LexicalHashEmbedder",
    "MINILM_MODEL_SHA256",
    "MINILM_VOCAB_SHA256",
    "MeteredEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "choose_default_embedder",
    "default_embedder",
    "minilm_available",
    "normalise_rows",
]
