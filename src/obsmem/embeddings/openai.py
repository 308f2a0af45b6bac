"""OpenAI embeddings over the real ``POST /v1/embeddings`` wire protocol, with httpx.

The same code serves OpenAI-compatible servers (Ollama, vLLM, LM Studio …): give
``base_url``; a key is then optional. The embedding port does not depend on the chat-model
port: what both need (the status table, ``retry-after``, the retry loop) is in :mod:`obsmem._http`.

Failures map onto obsmem's model errors with the chat models' status table
(:mod:`obsmem._http`), so a caller handles them the way it handles a chat model: rate limits,
5xx, timeouts and dropped connections are :class:`ModelUnavailableError` (retried here a
bounded number of times by the chat models' retry loop, honouring ``retry-after``); a refused
request or key is :class:`ModelRequestError`; an answer that is not the documented shape is
:class:`ModelOutputError`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from obsmem._http import (
    ACCEPT_ENCODING,
    RetryPolicy,
    SecretHeaders,
    decoded,
    error_detail,
    parse_retry_after,
    read_capped,
    read_prefix,
    redact,
    status_error,
    with_retry,
)
from obsmem.clock import Clock
from obsmem.errors import (
    ConfigError,
    MissingCredentialsError,
    ModelOutputError,
    ModelRequestError,
    ModelUnavailableError,
)
from obsmem.profiles import embedding_dimensions

from .base import EmbeddingMatrix, normalise_rows

if TYPE_CHECKING:
    import httpx

__all__ = ["OPENAI_DEFAULT_BASE_URL", "OpenAIEmbedder", "default_max_response_bytes", "parse_retry_after"]

_logger = logging.getLogger(__name__)

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
_MAX_RETRY_WAIT_S = 30.0
_ERROR_BODY_BYTES = 64 * 1024
_MIN_RESPONSE_BYTES = 8 * 1024 * 1024
_BYTES_PER_NUMBER = 32  # "-0.012345678901234567, " is 23; room for indentation and exponents


def default_max_response_bytes(batch_size: int, dimensions: int) -> int:
    """The largest embeddings answer read by default: 32 bytes per number of a full batch
    (a float as JSON text is about 20) plus 1 MiB, and never less than 8 MiB."""
    return max(_MIN_RESPONSE_BYTES, batch_size * dimensions * _BYTES_PER_NUMBER + 1024 * 1024)


def _error_detail(body: bytes) -> str:
    """The explanation in a JSON error body, or the start of the raw body."""
    detail = error_detail(body)
    if detail:
        return detail
    text = body.decode("utf-8", errors="replace").strip()
    return text[:300] or "(empty body)"


class OpenAIEmbedder:
    """Embeddings from OpenAI (``text-embedding-3-small`` by default) or a compatible server.

    * ``api_key`` defaults to ``OPENAI_API_KEY``; ``base_url`` to ``OPENAI_BASE_URL`` or
      OpenAI's own. Without a key, only a non-OpenAI ``base_url`` is accepted.
    * ``dimensions``: required for models obsmem does not know; for ``text-embedding-3-*``
      a smaller value is sent to the API, which shortens the vectors server-side.
    * ``batch_size`` inputs go in one request (OpenAI accepts up to 2048).
    * ``max_retries`` further attempts after a transient failure, waiting
      ``backoff_s × 2^attempt``, or longer when the server asks (``retry-after``), never
      more than 30 s at a time. The loop is the chat models' (:func:`obsmem._http.with_retry`);
      waits go through ``clock`` (default: the system clock), so tests need not sleep.
    * ``max_response_bytes``: the largest answer read (default
      :func:`default_max_response_bytes`, room for a full batch; None for no limit). A bigger
      one stops being read and fails with a permanent
      :class:`~obsmem.errors.ModelRequestError` naming the limit.
    * The key never shows in ``repr``, in an error's message (a 401 that echoes it is masked,
      ``sk-…WXYZ``) or in a traceback's locals.

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
        clock: Clock | None = None,
        max_response_bytes: int | None = None,
    ) -> None:
        native, shortenable = embedding_dimensions(model)
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
        if backoff_s < 0:
            raise ConfigError("embeddings.backoff_s", f"{backoff_s} is negative", allowed=">= 0")
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
        self.clock = clock
        self.retry_policy = RetryPolicy(
            max_retries=max_retries,
            initial_delay_s=min(backoff_s, _MAX_RETRY_WAIT_S),
            factor=2.0,
            max_delay_s=_MAX_RETRY_WAIT_S,
            jitter=0.0,
        )
        if max_response_bytes is not None and (
            isinstance(max_response_bytes, bool) or not isinstance(max_response_bytes, int) or max_response_bytes < 1
        ):
            raise ConfigError(
                "embeddings.max_response_bytes",
                f"{max_response_bytes} is not a size",
                allowed=">= 1, or None",
            )
        self.max_response_bytes = (
            default_max_response_bytes(batch_size, dimensions)
            if max_response_bytes is None
            else max_response_bytes
        )
        self._send_dimensions = shortenable and dimensions != native
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
        return await with_retry(
            lambda: self._embed_batch(batch),
            policy=self.retry_policy,
            clock=self.clock,
            what="embeddings request",
            logger=_logger,
        )

    def _request_body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._send_dimensions:
            body["dimensions"] = self.dimensions
        return body

    def _secrets(self) -> list[str]:
        return [self.api_key] if self.api_key else []

    async def _embed_batch(self, batch: list[str]) -> EmbeddingMatrix:
        client = self._http()
        # its repr masks the key; the encodings asked for are decoded here, bounded (never by httpx)
        headers = SecretHeaders({"Content-Type": "application/json", "Accept-Encoding": ACCEPT_ENCODING})
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.base_url}/embeddings"
        httpx_module = importlib.import_module("httpx")
        what = f"The embeddings server at {url}"
        try:
            # timeout_s bounds the whole request too, not only each read: a server that sends a
            # byte a second never holds a recall or a reindex for longer
            async with asyncio.timeout(self.timeout_s):
                # never a redirect, whatever the client (see _redirected)
                request = client.stream("POST", url, json=self._request_body(batch), headers=headers,
                                        follow_redirects=False)  # fmt: skip
                async with request as response:
                    if response.status_code >= 400:
                        raise await self._status_error(response, url)
                    if 300 <= response.status_code < 400:
                        raise self._redirected(response, url)
                    content = await read_capped(
                        decoded(response.aiter_raw(), response.headers.get("content-encoding"), what=what),
                        self.max_response_bytes,
                        what=what,
                        headers=response.headers,
                    )
        except (httpx_module.TimeoutException, TimeoutError) as exc:
            raise ModelUnavailableError(
                f"The embeddings request to {url} timed out after {self.timeout_s} s; it will be "
                "retried. Raise timeout_s if the server is just slow."
            ) from exc
        except httpx_module.TransportError as exc:
            raise ModelUnavailableError(
                f"Could not reach {url} ({type(exc).__name__}: {redact(str(exc), self._secrets())}); "
                "check base_url and that the server is running."
            ) from exc
        return self._parse(content, len(batch))

    def _redirected(self, response: httpx.Response, url: str) -> ModelRequestError:
        """The error for a redirect, never followed (as the chat models' transport): following one
        would send the user's texts, and any key in a header httpx keeps, where the base URL does
        not say. Permanent: the base URL is to be set to where the server points."""
        where = redact(response.headers.get("location") or "nowhere", self._secrets())
        return ModelRequestError(
            f"The embeddings server at {url} answered HTTP {response.status_code}, a redirect to {where}; "
            "obsmem does not follow redirects (its key and texts must go only where base_url says): set "
            "base_url to where the server points.",
            status_code=response.status_code,
        )

    async def _status_error(self, response: httpx.Response, url: str) -> Exception:
        """The error for an error status; the key is masked in the server's explanation."""
        status = response.status_code
        what = f"The embeddings server at {url}"
        raw = decoded(response.aiter_raw(), response.headers.get("content-encoding"), what=what)
        start = await read_prefix(raw, _ERROR_BODY_BYTES)
        detail = redact(_error_detail(start), self._secrets())
        refused = f"The embeddings server at {url} refused the request ({status}): {detail}"
        return status_error(
            status,
            response.headers,
            transient=f"The embeddings server at {url} answered {status}: {detail}",
            key_refused=f"{refused}; check OPENAI_API_KEY (or api_key=).",
            refused=f"{refused}; check the model name '{self.model}' and the inputs.",
        )

    def _parse(self, body: bytes, expected_rows: int) -> EmbeddingMatrix:
        def malformed(problem: str) -> ModelOutputError:
            return ModelOutputError(
                f"The embeddings response is not in OpenAI's format ({problem}); check that base_url "
                f"({self.base_url}) points at an OpenAI-compatible /v1 endpoint."
            )

        try:
            payload = json.loads(body)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to decode
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
            if (
                not isinstance(index, int)
                or isinstance(index, bool)  # JSON true is no row (numpy would take it as a mask: every row)
                or not 0 <= index < expected_rows
                or index in seen
            ):
                raise malformed(f"item {position} has a bad index {index!r}")
            if not isinstance(vector, list) or len(vector) != self.dimensions:
                size = len(vector) if isinstance(vector, list) else type(vector).__name__
                raise malformed(
                    f"item {position} has an embedding of size {size}, expected {self.dimensions}"
                )
            # numbers only: numpy would take strings ("0.5") and booleans as numbers, and raise a
            # bare OverflowError for an integer past a float's range (valid JSON)
            try:
                row = np.asarray(vector)
            except (TypeError, ValueError) as exc:
                raise malformed(f"item {position} holds non-numbers") from exc
            if row.dtype.kind not in "iuf" or row.shape != (self.dimensions,):
                raise malformed(f"item {position} holds non-numbers")
            matrix[index] = row
            seen.add(index)
        if not np.isfinite(matrix).all():
            raise malformed("an embedding holds NaN or infinity")
        return normalise_rows(matrix)
