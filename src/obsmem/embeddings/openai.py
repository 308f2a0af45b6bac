"""OpenAI embeddings over the real ``POST /v1/embeddings`` wire protocol, with httpx.

The same code serves OpenAI-compatible servers (Ollama, vLLM, LM Studio …): give
``base_url``; a key is then optional. The HTTP code is self-contained on purpose: the
embedding port does not depend on the chat-model port.

Failures map onto obsmem's model errors, so a caller handles them the way it handles a chat
model: rate limits, 5xx, timeouts and dropped connections are :class:`ModelUnavailableError`
(retried here a bounded number of times, honouring ``retry-after``); a refused request or key
is :class:`ModelRequestError`; an answer that is not the documented shape is
:class:`ModelOutputError`.
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import json
import os
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from obsmem.errors import (
    ConfigError,
    MissingCredentialsError,
    ModelOutputError,
    ModelRequestError,
    ModelUnavailableError,
)

from .base import EmbeddingMatrix, normalise_rows

if TYPE_CHECKING:
    import httpx

__all__ = ["OPENAI_DEFAULT_BASE_URL", "OpenAIEmbedder", "parse_retry_after"]

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
_NATIVE_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_SHORTENABLE_PREFIX = "text-embedding-3-"  # models that accept the "dimensions" parameter
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_MAX_RETRY_WAIT_S = 30.0


def parse_retry_after(headers: httpx.Headers | dict[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    milliseconds = lowered.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_detail(body: bytes) -> str:
    """The ``error.message`` of an OpenAI error body, or the start of the raw body."""
    try:
        payload = json.loads(body)
        message = payload["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError):
        pass
    text = body.decode("utf-8", errors="replace").strip()
    return text[:300] or "(empty body)"


class OpenAIEmbedder:
    """Embeddings from OpenAI (``text-embedding-3-small`` by default) or a compatible server.

    * ``api_key`` defaults to ``OPENAI_API_KEY``; ``base_url`` to ``OPENAI_BASE_URL`` or
      OpenAI's own. Without a key, only a non-OpenAI ``base_url`` is accepted.
    * ``dimensions``: required for models obsmem does not know; for ``text-embedding-3-*``
      a smaller value is sent to the API, which shortens the vectors server-side.
    * ``batch_size`` inputs go in one request (OpenAI accepts up to 2048).
    * ``max_retries`` further attempts after a transient failure, waiting ``retry-after``
      when the server says (capped at 30 s) and ``backoff_s × 2^attempt`` otherwise.

    Close it with ``await embedder.aclose()`` or use ``async with``; an ``http_client``
    passed in is left open for its owner.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        batch_size: int = 256,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        native = _NATIVE_DIMENSIONS.get(model)
        if dimensions is None:
            if native is None:
                raise ConfigError(
                    "embeddings.dimensions",
                    f"obsmem does not know the vector size of model '{model}'",
                    allowed="pass dimensions=N (the length of the vectors it returns)",
                )
            dimensions = native
        if dimensions < 1:
            raise ConfigError("embeddings.dimensions", f"{dimensions} is not a vector size", allowed=">= 1")
        if batch_size < 1 or batch_size > 2048:
            raise ConfigError("embeddings.batch_size", f"{batch_size} is out of range", allowed="1..2048")
        if max_retries < 0:
            raise ConfigError("embeddings.max_retries", f"{max_retries} is negative", allowed=">= 0")
        self.model = model
        self.dimensions = dimensions
        self.name = f"openai-{model}-{dimensions}"
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not self.api_key and self.base_url == OPENAI_DEFAULT_BASE_URL:
            raise MissingCredentialsError("OpenAI embeddings", "OPENAI_API_KEY")
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._send_dimensions = model.startswith(_SHORTENABLE_PREFIX) and dimensions != native
        self._client = http_client
        self._owns_client = http_client is None

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder(model={self.model!r}, dimensions={self.dimensions}, base_url={self.base_url!r})"
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            try:
                httpx_module = importlib.import_module("httpx")
            except ImportError as exc:
                raise ConfigError(
                    "embeddings.embedder",
                    "the OpenAI embedder needs httpx, which is not installed",
                    allowed="pip install 'obsmem[openai]'",
                ) from exc
            self._client = httpx_module.AsyncClient(timeout=self.timeout_s)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client this embedder created (not one passed in)."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- embedding ----------------------------------------------------------------------------

    async def embed(self, texts: Sequence[str]) -> EmbeddingMatrix:
        result = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        # OpenAI refuses empty strings; the protocol gives them zero rows instead.
        todo = [i for i, text in enumerate(texts) if text.strip()]
        for start in range(0, len(todo), self.batch_size):
            rows = todo[start : start + self.batch_size]
            result[rows] = await self._embed_with_retries([texts[i] for i in rows])
        return result

    async def _embed_with_retries(self, batch: list[str]) -> EmbeddingMatrix:
        attempt = 0
        while True:
            try:
                return await self._embed_batch(batch)
            except ModelUnavailableError as exc:
                if attempt >= self.max_retries:
                    raise
                wait = exc.retry_after if exc.retry_after is not None else self.backoff_s * 2**attempt
                await asyncio.sleep(min(wait, _MAX_RETRY_WAIT_S))
                attempt += 1

    def _request_body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._send_dimensions:
            body["dimensions"] = self.dimensions
        return body

    async def _embed_batch(self, batch: list[str]) -> EmbeddingMatrix:
        client = self._http()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.base_url}/embeddings"
        httpx_module = importlib.import_module("httpx")
        try:
            response = await client.post(url, json=self._request_body(batch), headers=headers)
        except httpx_module.TimeoutException as exc:
            raise ModelUnavailableError(
                f"The embeddings request to {url} timed out after {self.timeout_s} s; it will be "
                "retried. Raise timeout_s if the server is just slow."
            ) from exc
        except httpx_module.TransportError as exc:
            raise ModelUnavailableError(
                f"Could not reach {url} ({type(exc).__name__}: {exc}); check base_url and that the "
                "server is running."
            ) from exc
        self._raise_for_status(response, url)
        return self._parse(response.content, len(batch))

    def _raise_for_status(self, response: httpx.Response, url: str) -> None:
        status = response.status_code
        if status < 400:
            return
        detail = _error_detail(response.content)
        if status in _TRANSIENT_STATUSES or status >= 500:
            raise ModelUnavailableError(
                f"The embeddings server at {url} answered {status}: {detail}",
                status_code=status,
                retry_after=parse_retry_after(response.headers),
            )
        advice = (
            "check OPENAI_API_KEY (or api_key=)"
            if status in (401, 403)
            else f"check the model name '{self.model}' and the inputs"
        )
        raise ModelRequestError(
            f"The embeddings server at {url} refused the request ({status}): {detail}; {advice}.",
            status_code=status,
        )

    def _parse(self, body: bytes, expected_rows: int) -> EmbeddingMatrix:
        def malformed(problem: str) -> ModelOutputError:
            return ModelOutputError(
                f"The embeddings response is not in OpenAI's format ({problem}); check that base_url "
                f"({self.base_url}) points at an OpenAI-compatible /v1 endpoint."
            )

        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise malformed("the body is not JSON") from exc
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise malformed("no 'data' list")
        if len(data) != expected_rows:
            raise malformed(f"{len(data)} embeddings for {expected_rows} inputs")
        matrix = np.zeros((expected_rows, self.dimensions), dtype=np.float64)
        seen: set[int] = set()
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise malformed(f"item {position} is not an object")
            index = item.get("index", position)
            vector = item.get("embedding")
            if not isinstance(index, int) or not 0 <= index < expected_rows or index in seen:
                raise malformed(f"item {position} has a bad index {index!r}")
            if not isinstance(vector, list) or len(vector) != self.dimensions:
                size = len(vector) if isinstance(vector, list) else type(vector).__name__
                raise malformed(
                    f"item {position} has an embedding of size {size}, expected {self.dimensions}"
                )
            try:
                matrix[index] = np.asarray(vector, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise malformed(f"item {position} holds non-numbers") from exc
            seen.add(index)
        if not np.isfinite(matrix).all():
            raise malformed("an embedding holds NaN or infinity")
        return normalise_rows(matrix)
