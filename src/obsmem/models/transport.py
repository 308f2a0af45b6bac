"""The HTTP plumbing every provider shares: one POST, JSON or a server-sent-event stream.

Provider modules (``openai.py``, ``anthropic.py``) only translate messages to and from their
wire format; everything about *talking* to a server lives here, so every provider fails the
same way (the status table itself is :mod:`obsmem._http`'s, shared with the embedders):

- 401/403: :class:`~obsmem.errors.ModelRequestError` naming the key's environment variable
  (retrying a bad key only burns the rate limit);
- 408, 409, 425, 429 and 5xx: :class:`~obsmem.errors.ModelUnavailableError` with the delay the
  server asked for (``retry-after-ms`` or ``retry-after``, seconds or an HTTP date), which
  :func:`~obsmem.models.retry.with_retry` honours;
- other 4xx: :class:`~obsmem.errors.ModelRequestError` with the server's own explanation;
- timeouts, dropped connections, a body cut short, a body that is not JSON:
  :class:`~obsmem.errors.ModelUnavailableError`, because the same request usually succeeds
  when repeated;
- a refused connection: :class:`~obsmem.errors.ModelUnavailableError` raised from a
  :class:`~obsmem._http.RefusedConnection`, marked ``local`` when the base URL is this
  machine, which the retry loop retries once instead of for minutes: a local server that
  refuses is not running.

Error messages quote the fields of a JSON error body (``error.message``, ``detail``), never
the raw body, which may be a whole HTML page, and never the key: the endpoint's credentials are
masked in any text an error carries (a gateway that echoes the key in its 401), in
``repr(Endpoint)``, and in the headers handed to httpx (:class:`~obsmem._http.SecretHeaders`),
so no traceback that prints locals shows them.

Answers are bounded (:data:`DEFAULT_MAX_RESPONSE_BYTES`, 8 MiB, per model
``max_response_bytes``; None for no limit): a JSON body or a stream that passes the limit
stops being read and fails with a permanent :class:`~obsmem.errors.ModelRequestError` naming
the limit. An error body is read only as far
as its first 64 KiB. :func:`output_char_limit` is the client-side check on a streamed answer's
``max_output_tokens``, for servers that ignore it.

Without an injected ``httpx.AsyncClient`` each request opens its own client. Observer and
reflector calls are minutes apart, so pooling would save little, and a per-request client
cannot be stranded on a closed event loop (``asyncio.run`` per CLI command, sync facades).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from obsmem import _http
from obsmem._http import (
    ACCEPT_ENCODING,
    DEFAULT_MAX_RESPONSE_BYTES,
    RefusedConnection,
    SecretHeaders,
    capped_lines,
    decoded,
    error_detail,
    header_secrets,
    read_capped,
    read_prefix,
    redact,
    is_loopback_host,
    parse_retry_after,
    refused_connection,
)
from obsmem.errors import ConfigError, ModelError, ModelRequestError, ModelUnavailableError, ResponseTooLargeError
from obsmem.models.sse import ServerSentEvent, parse_sse
from obsmem.redact import redact_secrets

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT_S",
    "JSON_BODY_EVENT",
    "Endpoint",
    "HttpCaller",
    "check_response_limit",
    "error_detail",
    "output_char_limit",
    "parse_retry_after",
    "status_error",
]

DEFAULT_TIMEOUT_S = 600.0
"""Per-request ceiling: reflections of a large memory can legitimately stream for minutes."""

JSON_BODY_EVENT = "obsmem-json-body"
"""The event name :meth:`HttpCaller.stream_events` gives a whole JSON answer to a streamed request."""

#: The most tokens one call is believed to report (2^40): a count past it (a proxy's 10^20) reads
#: as this, so the cost ledger, whose integers stop at 2^63, still records the call.
MAX_REPORTED_TOKENS = 2**40

_CONNECT_TIMEOUT_S = 15.0
_ERROR_BODY_BYTES = 64 * 1024

_OUTPUT_CHARS_PER_TOKEN = 16
_OUTPUT_SLACK_CHARS = 4096


def output_char_limit(max_output_tokens: int | None) -> int | None:
    """How many characters of streamed output ``max_output_tokens`` allows before the client
    stops reading: 16 per token plus 4,096, four times the longest average any tokenizer
    gives, so an answer within its limit is never cut, and a server that ignores the limit
    is stopped at a known size. None when no limit was asked for."""
    if max_output_tokens is None or max_output_tokens <= 0:
        return None
    return max_output_tokens * _OUTPUT_CHARS_PER_TOKEN + _OUTPUT_SLACK_CHARS


def check_response_limit(value: int | None) -> int | None:
    """``max_response_bytes`` as given, or :class:`~obsmem.errors.ConfigError` when it is not
    a whole number of bytes >= 1 (None, no limit, is allowed)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            "max_response_bytes", f"{value!r} is not a size in bytes", allowed="an int >= 1, or None"
        )
    return value


def too_much_output(endpoint: Endpoint, max_output_tokens: int) -> ResponseTooLargeError:
    """The error for a stream that went on far past ``max_output_tokens`` (permanent)."""
    return ResponseTooLargeError(
        f"{endpoint.provider} kept streaming past max_output_tokens={max_output_tokens} (more than "
        f"{output_char_limit(max_output_tokens)} characters); reading stopped and the call is not retried.",
        setting="max_output_tokens",
        limit=max_output_tokens,
    )


@dataclass(frozen=True, slots=True, repr=False)
class Endpoint:
    """Where and as whom to send requests.

    ``provider`` names the service in messages (``openai``, ``groq``); ``key_env`` is the
    environment variable a user sets to fix a refused key (None for keyless local servers).
    ``repr`` masks the credentials in ``headers`` (``Bearer sk-…WXYZ``).
    """

    provider: str
    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    key_env: str | None = None

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def secrets(self) -> list[str]:
        """The credentials in ``headers``, to be masked wherever text leaves obsmem."""
        return header_secrets(self.headers)

    def request_headers(self) -> SecretHeaders:
        """``headers`` as httpx gets them: a dict whose ``repr`` masks the key, asking for the
        encodings obsmem decodes itself, bounded (:func:`obsmem._http.decoded`)."""
        headers = SecretHeaders(self.headers)
        if not any(name.lower() == "accept-encoding" for name in headers):
            headers["Accept-Encoding"] = ACCEPT_ENCODING
        return headers

    def __repr__(self) -> str:
        return (
            f"Endpoint(provider={self.provider!r}, base_url={redact_secrets(self.base_url)!r}, "
            f"headers={SecretHeaders(self.headers)!r}, key_env={self.key_env!r})"
        )


def status_error(endpoint: Endpoint, status: int, headers: Mapping[str, str], body: bytes) -> ModelError:
    """The obsmem error for an HTTP error status (the table is :func:`obsmem._http.status_error`).

    The endpoint's key is masked in the server's explanation (a 401 may echo it).
    """
    detail = redact(
        error_detail(body) or httpx.codes.get_reason_phrase(status) or "no explanation", endpoint.secrets()
    )
    what = f"{endpoint.provider} answered HTTP {status} ({detail})"
    fix = (
        f"check that {endpoint.key_env} holds a valid key with access to this model"
        if endpoint.key_env
        else "pass a valid api_key"
    )
    return _http.status_error(
        status,
        headers,
        transient=f"{what}; the call will be retried.",
        key_refused=f"{what}: the API key was refused; {fix}.",
        refused=f"{what}: the request was refused; check the model name and settings.",
    )


def _transport_error(endpoint: Endpoint, exc: httpx.HTTPError, timeout_s: float) -> ModelUnavailableError:
    """The error for a failure below HTTP, already chained to its cause (raise it as is).

    The cause is ``exc``, except for a refused connection: then it is a
    :class:`~obsmem._http.RefusedConnection` naming the host (itself caused by ``exc``), which
    the retry loop reads to retry a local server that is not running only once.
    """
    cause: BaseException = exc
    if isinstance(exc, httpx.TimeoutException):
        message = (
            f"{endpoint.provider} request timed out after {timeout_s:g} s ({type(exc).__name__}); "
            "it will be retried."
        )
    elif refused_connection(exc):
        host = httpx.URL(endpoint.base_url).host or None
        cause = RefusedConnection(host, local=host is not None and is_loopback_host(host))
        cause.__cause__ = exc
        fix = (
            "nothing listens there: start the model server or fix the base URL"
            if cause.local
            else "check that the server is reachable"
        )
        where = redact_secrets(endpoint.base_url)
        message = f"{endpoint.provider} connection failed at {where} (connection refused); {fix}."
    else:
        message = (
            f"{endpoint.provider} connection failed at {redact_secrets(endpoint.base_url)} "
            f"({type(exc).__name__}: {redact(str(exc), endpoint.secrets())}); "
            "check that the server is reachable. The call will be retried."
        )
    error = ModelUnavailableError(message)
    error.__cause__ = cause
    return error


def malformed(endpoint: Endpoint, what: str) -> ModelUnavailableError:
    """A body that does not parse: usually a proxy page or a truncated reply, so retryable."""
    return ModelUnavailableError(f"{endpoint.provider} returned {what}; the call will be retried.")


@contextmanager
def answer_shape(endpoint: Endpoint) -> Iterator[None]:
    """Reading an answer: one of an unexpected shape (a list where an object belongs, a string
    for ``choices``, JSON nested too deep to decode, a tool call's ``index`` of ``"x"`` or
    ``Infinity``) fails as malformed JSON does, retryable, never as a raw ``TypeError``,
    ``RecursionError``, ``ValueError`` or ``OverflowError``."""
    try:
        yield
    except (TypeError, AttributeError, KeyError, IndexError, RecursionError, ValueError, OverflowError) as exc:
        # ValueError: int("x") of a tool call's index, a part (a tool name that is a list) that
        # fails validation; OverflowError: int() of Infinity. Inside this block only the answer
        # is read (the request was built before it), so neither is the caller's own input's fault.
        raise malformed(endpoint, f"an answer of an unexpected shape ({type(exc).__name__})") from exc


class HttpCaller:
    """Sends JSON requests to one :class:`Endpoint` and maps every failure to obsmem's errors.

    ``max_response_bytes`` bounds every answer read (None: no bound).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        client: httpx.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.endpoint = endpoint
        self._client = client
        self.max_response_bytes = max_response_bytes

    async def _error_for(self, response: httpx.Response) -> ModelError:
        """The error for an error status; only the start of its body is read, and the key is
        masked before any of it is kept (the raw body is never a local of a raising frame)."""
        return status_error(
            self.endpoint,
            response.status_code,
            response.headers,
            self._masked(await read_prefix(self._decoded(response), _ERROR_BODY_BYTES)),
        )

    def _redirected(self, response: httpx.Response) -> ModelRequestError:
        """The error for a redirect, never followed (whatever the client's ``follow_redirects``):
        httpx drops ``Authorization`` on a redirect to another host but not ``x-api-key`` or
        another key header, so following one could send the key where the base URL does not say."""
        where = redact(redact_secrets(response.headers.get("location") or "nowhere"), self.endpoint.secrets())
        return ModelRequestError(
            f"{self.endpoint.provider} answered HTTP {response.status_code}, a redirect to {where}; obsmem "
            "does not follow redirects (its key must go only where the base URL says): set the base URL "
            "to where the server points.",
            status_code=response.status_code,
        )

    def _masked(self, body: bytes) -> bytes:
        secrets = self.endpoint.secrets()
        if not secrets:
            return body
        return redact(body.decode("utf-8", errors="replace"), secrets).encode()

    def _decoded(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """The body as it comes, decoded here a bounded step at a time (never by httpx, whose
        decoder expands a whole network read at once, on the event loop)."""
        return decoded(response.aiter_raw(), response.headers.get("content-encoding"), what=self.endpoint.provider)

    async def _body(self, response: httpx.Response) -> bytes:
        return await read_capped(
            self._decoded(response),
            self.max_response_bytes,
            what=self.endpoint.provider,
            headers=response.headers,
        )

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._client is not None:
            yield self._client
            return
        async with httpx.AsyncClient() as client:
            yield client

    def _timeout(self, timeout_s: float) -> httpx.Timeout:
        return httpx.Timeout(timeout_s, connect=min(timeout_s, _CONNECT_TIMEOUT_S))

    async def post_json(self, path: str, body: dict[str, Any], *, timeout_s: float) -> Any:
        """POST ``body`` and return the decoded JSON answer."""
        try:
            async with (
                self._session() as client,
                client.stream(
                    "POST",
                    self.endpoint.url(path),
                    json=body,
                    headers=self.endpoint.request_headers(),
                    timeout=self._timeout(timeout_s),
                    follow_redirects=False,
                ) as response,
            ):
                if response.status_code >= 400:
                    raise await self._error_for(response)
                if 300 <= response.status_code < 400:
                    raise self._redirected(response)
                content = await self._body(response)
        except httpx.HTTPError as exc:
            raise _transport_error(self.endpoint, exc, timeout_s)  # chained to its cause inside
        try:
            return json.loads(content)
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deep to decode
            raise malformed(self.endpoint, "a body that is not valid JSON") from exc

    async def stream_events(
        self, path: str, body: dict[str, Any], *, timeout_s: float
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """POST ``body`` and yield the server-sent events of the answer as they arrive.

        ``timeout_s`` bounds each wait for data, not the whole stream: a long answer that
        keeps streaming is healthy, a silent connection is not.
        """
        try:
            async with (
                self._session() as client,
                client.stream(
                    "POST",
                    self.endpoint.url(path),
                    json=body,
                    headers=self.endpoint.request_headers(),
                    timeout=self._timeout(timeout_s),
                    follow_redirects=False,
                ) as response,
            ):
                if response.status_code >= 400:
                    raise await self._error_for(response)
                if 300 <= response.status_code < 400:
                    raise self._redirected(response)
                if response.headers.get("content-type", "").startswith("application/json"):
                    # A server that ignores ``stream: true`` answers with one JSON body.
                    whole = (await self._body(response)).decode(errors="replace")
                    yield ServerSentEvent(JSON_BODY_EVENT, whole)
                    return
                lines = capped_lines(
                    self._decoded(response),
                    self.max_response_bytes,
                    what=self.endpoint.provider,
                    headers=response.headers,
                )
                async for event in parse_sse(lines):
                    yield event
        except httpx.HTTPError as exc:
            raise _transport_error(self.endpoint, exc, timeout_s)  # chained to its cause inside
