"""HTTP facts every port shares: which failures heal, how long a server asked to wait, one retry loop.

Chat models (:mod:`obsmem.models`) and embedders (:mod:`obsmem.embeddings`) talk to the same
kinds of servers and fail the same ways, so they read failures with the same table:

==========================  ===========================================================
answer                      obsmem error
==========================  ===========================================================
401, 403                    :class:`~obsmem.errors.ModelRequestError` (the key was refused)
408, 409, 425, 429, 5xx     :class:`~obsmem.errors.ModelUnavailableError`, with the delay
                            the server asked for (:func:`parse_retry_after`)
any other 4xx               :class:`~obsmem.errors.ModelRequestError`
timeout, lost connection    :class:`~obsmem.errors.ModelUnavailableError`
==========================  ===========================================================

408, 425, 429 and 5xx are the reference's transient statuses; 409 (a conflicting request
still in flight, or a lock timeout) is added because OpenAI's and Anthropic's own SDKs retry
it and the embedder always did: retrying a permanent 409 costs a few bounded waits, not
retrying a transient one loses an observation.

:func:`is_transient` reads any error (obsmem's own, Python's, a provider SDK's, a JSON error
body) against that table; :func:`with_retry` is the one loop that retries what is transient
on a :class:`RetryPolicy` schedule, waiting on an injected :class:`~obsmem.clock.Clock` so
tests never sleep.

Every schedule is bounded twice: by a number of retries and by a deadline
(:attr:`RetryPolicy.max_total_s`) that no wait crosses, so a provider that keeps answering 429
costs a known amount of time, not "as long as it says". A connection refused by a server on this
machine (a :class:`RefusedConnection` cause with ``local``) is retried once, quickly: nothing is
listening, and nothing will be in the next four minutes either.

Two more things every port needs, because a provider is a remote party obsmem does not trust:

- **bounded answers**: :func:`read_capped` and :func:`capped_lines` read a body (whole, or as
  the lines of a stream) and stop at a byte limit with a permanent
  :class:`~obsmem.errors.ModelRequestError` naming the limit (a flood repeats, so it is never
  retried). :data:`DEFAULT_MAX_RESPONSE_BYTES` (8 MiB) is the chat models' default;
  a declared ``content-length`` above the limit fails before any byte is read. The count is of
  decoded bytes, so a compressed body cannot expand past it either.
- **hidden keys**: :class:`SecretHeaders` is a ``dict`` whose ``repr`` masks credential headers,
  so a key in a request's headers never shows in a log line or in a traceback's locals, and
  :func:`redact` removes a key from any text (an error body that echoes it) before the text
  goes into an exception. A key is shown as :func:`mask_secret` writes it: ``sk-…WXYZ``.

Boundary between the foundation and the ports: it imports only :mod:`obsmem.errors` and
:mod:`obsmem.clock` (no httpx), so it can be used by every port without loading a client.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import ipaddress
import json
import logging
import random
import re
import socket
import time
import zlib
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TypeVar

from obsmem.clock import Clock, SystemClock
from obsmem.redact import redact_secrets
from obsmem.errors import (
    ConfigError,
    MissingCredentialsError,
    ModelError,
    ModelOutputError,
    ModelRequestError,
    ModelUnavailableError,
    OperationAbortedError,
    ResponseTooLargeError,
)

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "KEY_REFUSED_STATUSES",
    "SecretHeaders",
    "capped_lines",
    "decoded",
    "header_secrets",
    "mask_secret",
    "read_capped",
    "redact",
    "TRANSIENT_STATUSES",
    "RefusedConnection",
    "RetryPolicy",
    "error_detail",
    "is_loopback_host",
    "is_transient",
    "parse_retry_after",
    "refused_connection",
    "status_error",
    "status_verdict",
    "with_retry",
]

T = TypeVar("T")

_logger = logging.getLogger(__name__)

# --- the status table -----------------------------------------------------------------------

TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
"""4xx statuses that heal by themselves; every 5xx does too (see :func:`status_verdict`)."""

KEY_REFUSED_STATUSES = frozenset({401, 403})
"""Statuses that mean the credentials were refused: permanent, and the fix is the key."""


def status_verdict(status: int) -> bool | None:
    """What an HTTP status says: True transient (408, 409, 425, 429, 5xx), False permanent
    (any other 4xx), None no opinion (1xx-3xx, or not an HTTP status at all)."""
    if status in TRANSIENT_STATUSES or 500 <= status <= 599:
        return True
    if 400 <= status <= 499:
        return False
    return None


def status_error(
    status: int,
    headers: Mapping[str, str],
    *,
    transient: str,
    key_refused: str,
    refused: str,
) -> ModelError:
    """The obsmem error for an HTTP error ``status``, with the caller's message for each kind.

    Meant for error statuses (400 and up). ``transient`` (408, 409, 425, 429, 500 and up)
    becomes a :class:`~obsmem.errors.ModelUnavailableError` carrying the
    ``retry-after`` delay from ``headers``; ``key_refused`` (401, 403) and ``refused`` (any
    other status) become :class:`~obsmem.errors.ModelRequestError`.
    """
    if status in KEY_REFUSED_STATUSES:
        return ModelRequestError(key_refused, status_code=status)
    if status in TRANSIENT_STATUSES or status >= 500:  # a server's own 5xx-and-up inventions too
        return ModelUnavailableError(transient, status_code=status, retry_after=parse_retry_after(headers))
    return ModelRequestError(refused, status_code=status)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header by case-insensitive name, from ``httpx.Headers`` or a plain dict alike."""
    value = headers.get(name)
    if value is not None:
        return value
    return next((value for key, value in headers.items() if key.lower() == name), None)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The delay in seconds a response asked for, or None when it did not say (or said nonsense).

    ``retry-after-ms`` (OpenAI's) wins over ``retry-after``, which is seconds or an HTTP date
    (a date in the past means no wait). Names are matched without regard to case; a negative
    or unreadable value counts as not said. ``now`` (a Unix time) is for tests.
    """
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = -1
        if value >= 0:
            return value
    raw = _header(headers, "retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, seconds)
    return seconds if seconds >= 0 else None


_DETAIL_CHARS = 300


def error_detail(body: str | bytes) -> str | None:
    """The human explanation inside a JSON error body, shortened; None when there is none."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep to decode
        return None
    for _ in range(5):  # {"error": {"error": {"message": ...}}} nests a few levels at most
        if isinstance(data, str):
            return data[:_DETAIL_CHARS]
        if not isinstance(data, dict):
            return None
        for key in ("message", "detail"):
            if isinstance(data.get(key), str):
                return str(data[key])[:_DETAIL_CHARS]
        data = data.get("error")
    return None


# --- keys -----------------------------------------------------------------------------------

_SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "openai-api-key"}
)
_SCHEMES = ("bearer ", "basic ", "token ")


def mask_secret(secret: str) -> str:
    """A key as it may be shown: its first three and last four characters (``sk-…WXYZ``) when
    it is long enough that this gives nothing away, else ``***``."""
    return f"{secret[:3]}…{secret[-4:]}" if len(secret) >= 20 else "***"


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credentials in ``headers``: each credential header's value, and the token after its
    scheme (``Bearer``), longest first so that :func:`redact` replaces the whole value first."""
    found: set[str] = set()
    for name, value in headers.items():
        if name.lower() not in _SECRET_HEADERS or not value:
            continue
        found.add(value)
        lowered = value.lower()
        for scheme in _SCHEMES:
            if lowered.startswith(scheme) and value[len(scheme) :].strip():
                found.add(value[len(scheme) :].strip())
    return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by its :func:`mask_secret` form."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, mask_secret(secret))
    return text


class SecretHeaders(dict[str, str]):
    """Request headers whose ``repr`` masks credentials: pass these, not a plain ``dict``, so a
    traceback that shows locals, or a debug log of a call, never shows a key."""

    def __repr__(self) -> str:
        shown = {
            name: (redact(value, header_secrets({name: value})) if name.lower() in _SECRET_HEADERS else value)
            for name, value in self.items()
        }
        return repr(shown)

    __str__ = __repr__


# --- bounded answers ------------------------------------------------------------------------

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""The largest chat answer read (8 MiB): about a hundred times the longest reflection a model
writes in one call, and far below what would strain the process. Set per model with
``max_response_bytes`` (None reads without a limit)."""


def _size(limit: int) -> str:
    if limit >= 1024 * 1024 and limit % (1024 * 1024) == 0:
        return f"{limit} bytes, {limit // (1024 * 1024)} MiB"
    return f"{limit} bytes"


def too_large(what: str, limit: int, *, setting: str = "max_response_bytes") -> ResponseTooLargeError:
    """The error for an answer from ``what`` that passed ``limit`` bytes: a
    :class:`~obsmem.errors.ModelRequestError` (permanent: a server that floods once floods
    again, so the call is not retried) whose message names the setting and its value."""
    return ResponseTooLargeError(
        f"{what} sent an answer larger than {setting}={_size(limit)}; reading stopped there and the "
        f"call is not retried. Raise {setting} if such answers are expected.",
        setting=setting,
        limit=limit,
    )


def _declared_length(headers: Mapping[str, str]) -> int | None:
    raw = _header(headers, "content-length")
    return int(raw) if raw is not None and raw.strip().isdigit() else None


async def read_capped(
    chunks: AsyncIterable[bytes], limit: int | None, *, what: str, headers: Mapping[str, str] | None = None
) -> bytes:
    """All of ``chunks``, or :func:`too_large`'s error as soon as they pass ``limit`` bytes
    (None: no limit). A ``content-length`` in ``headers`` above the limit fails before reading."""
    if limit is not None and headers is not None:
        declared = _declared_length(headers)
        if declared is not None and declared > limit:
            raise too_large(what, limit)
    parts: list[bytes] = []
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if limit is not None and total > limit:
            raise too_large(what, limit)
        parts.append(chunk)
    return b"".join(parts)


#: The content encodings obsmem asks a server for (``Accept-Encoding``) and reads: it decodes them
#: itself, a bounded step at a time (:func:`decoded`), never through the HTTP client's decoder.
ACCEPT_ENCODING = "gzip, deflate"
#: The most one decompression step may produce: a few kilobytes of compressed body cannot turn
#: into gigabytes before the byte limit of :func:`read_capped` / :func:`capped_lines` counts them.
_INFLATE_STEP = 256 * 1024


async def decoded(
    raw: AsyncIterable[bytes], content_encoding: str | None, *, what: str
) -> AsyncIterator[bytes]:
    """The body ``raw`` (as it came off the wire) decoded as ``content_encoding`` says, in pieces
    of at most 256 KiB, so the caller's byte limit counts decoded bytes as they are made (a
    decompression bomb stops at the limit, having held about that much). gzip and deflate are
    read (what :data:`ACCEPT_ENCODING` asks for); any other encoding, or more than one, is
    refused with :class:`~obsmem.errors.ModelRequestError` (a server that ignores
    ``Accept-Encoding``), and a body that does not decode fails as a cut body does
    (:class:`~obsmem.errors.ModelUnavailableError`)."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        async for chunk in raw:
            yield chunk
        return
    if len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate"):
        raise ModelRequestError(
            f"{what} answered with Content-Encoding {content_encoding!r}, which obsmem does not read "
            f"(it asks for {ACCEPT_ENCODING}); configure the server to send one of those, or none."
        )
    gzip_format = codings[0] != "deflate"
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if gzip_format else zlib.MAX_WBITS)
    started = False
    try:
        async for chunk in raw:
            data = chunk
            while data and not inflater.eof:
                try:
                    piece = inflater.decompress(data, _INFLATE_STEP)
                except zlib.error:
                    if gzip_format or started:
                        raise
                    # "deflate" sent raw, without the zlib wrapper (some servers do)
                    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    piece = inflater.decompress(data, _INFLATE_STEP)
                started = True
                data = inflater.unconsumed_tail
                if piece:
                    yield piece
        if rest := inflater.flush():  # every input byte went through decompress: little or nothing is left
            yield rest
    except zlib.error as exc:
        raise ModelUnavailableError(f"{what} sent a {codings[0]} body that does not decode ({exc}).") from exc


async def read_prefix(chunks: AsyncIterable[bytes], limit: int) -> bytes:
    """The first ``limit`` bytes of ``chunks``; the rest is not read (an error page's start is enough)."""
    parts: list[bytes] = []
    total = 0
    async for chunk in chunks:
        parts.append(chunk[: limit - total])
        total += len(parts[-1])
        if total >= limit:
            break
    return b"".join(parts)


#: What ends a line of a server-sent event stream: CRLF, LF or CR, and nothing else (the SSE
#: specification). Not ``str.splitlines``'s wider set: U+2028, U+2029 and U+0085 may stand
#: unescaped inside a JSON string (a model quoting a user's text), and are data.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


async def capped_lines(
    chunks: AsyncIterable[bytes], limit: int | None, *, what: str, headers: Mapping[str, str] | None = None
) -> AsyncIterator[str]:
    """The lines of a streamed body (without their endings: CRLF, LF or CR, as server-sent
    events end them), stopping with :func:`too_large`'s error once the body passes ``limit``
    bytes; a line that never ends is bounded by the same limit."""
    if limit is not None and headers is not None:
        declared = _declared_length(headers)
        if declared is not None and declared > limit:
            raise too_large(what, limit)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending: list[str] = []
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if limit is not None and total > limit:
            raise too_large(what, limit)
        text = decoder.decode(chunk)
        if not text:
            continue
        pending.append(text)
        if "\n" not in text and "\r" not in text:
            continue  # still inside one line: no join, no split
        joined = "".join(pending)
        lines = _LINE_BREAK.split(joined)
        last = lines.pop()  # after the last line end: unfinished
        if joined.endswith("\r"):
            last = lines.pop() + "\r"  # a "\r" whose "\n" may be in the next chunk: not ended yet
        pending = [last] if last else []
        for line in lines:
            yield line
    lines = _LINE_BREAK.split("".join(pending) + decoder.decode(b"", final=True))
    if lines[-1] == "":
        lines.pop()  # the body's last line end ends a line; it does not start one
    for line in lines:
        yield line


# --- classification -------------------------------------------------------------------------

# Substrings of lower-cased error messages (and string error codes) that mean a network or
# server hiccup. "terminated" is how undici reports a connection cut mid-body
# ("TypeError: terminated"); it also covers "connection terminated due to connection timeout".
_TRANSIENT_TEXT = (
    "terminated",
    "fetch failed",
    "econnreset",
    "econnrefused",
    "enotfound",
    "eai_again",
    "socket hang up",
    "network error",
    "timed out",
    "timeout",
    "connection reset",
    "connection closed",
)
# Messages that are permanent even if they happen to contain a transient word
# ("schema validation failed: timeout must be a number").
_PERMANENT_TEXT = ("invalid api key", "schema validation failed")

_STATUS_FIELDS = ("status", "status_code", "statusCode")
_RETRYABLE_FIELDS = ("is_retryable", "isRetryable")
# Where wrapped errors hide: Python's own chaining, then the JS-style fields that HTTP
# clients and SDK errors use. Explicit causes come before the implicit __context__.
_CHAIN_FIELDS = ("__cause__", "cause", "error", "__context__")


def _field(node: object, name: str) -> object:
    if isinstance(node, Mapping):
        return node.get(name)
    return getattr(node, name, None)


def _is_abort(node: BaseException | Mapping[object, object]) -> bool:
    if isinstance(node, asyncio.CancelledError | OperationAbortedError):
        return True
    if isinstance(node, Mapping):
        names = [node.get("name")]
    else:
        names = [cls.__name__ for cls in type(node).__mro__]
    # undici reports a request aborted by its signal as an AbortError with this code.
    return "AbortError" in names or _field(node, "code") in ("ABORT_ERR", "UND_ERR_ABORTED")


def _node_verdict(node: BaseException | Mapping[object, object]) -> bool | None:
    """What one error says about itself: True transient, False permanent, None no opinion."""
    if _is_abort(node):
        return False
    if isinstance(node, ModelUnavailableError):  # includes IncompleteResponseError
        return True
    if isinstance(node, ModelRequestError | MissingCredentialsError | ModelOutputError):
        return False
    if isinstance(node, TimeoutError | ConnectionError | socket.gaierror):
        return True
    for name in _RETRYABLE_FIELDS:
        flag = _field(node, name)
        if isinstance(flag, bool):
            return flag
    for name in _STATUS_FIELDS:
        status = _field(node, name)
        if isinstance(status, int) and not isinstance(status, bool):
            verdict = status_verdict(status)
            if verdict is not None:
                return verdict
    code = _field(node, "code")
    if isinstance(code, int) and not isinstance(code, bool):  # OpenRouter puts HTTP codes here
        verdict = status_verdict(code)
        if verdict is not None:
            return verdict
    if isinstance(code, str):
        lowered = code.lower()
        if lowered.startswith("und_err_") or any(word in lowered for word in _TRANSIENT_TEXT):
            return True
    message = _field(node, "message") if isinstance(node, Mapping) else str(node)
    if isinstance(message, str):
        lowered = message.lower()
        if any(text in lowered for text in _PERMANENT_TEXT):
            return False
        if any(text in lowered for text in _TRANSIENT_TEXT):
            return True
    return None


def is_transient(error: object) -> bool:
    """Whether retrying the call that raised ``error`` may succeed.

    ``error`` is usually an exception; a plain mapping is read the same way (its keys stand
    for attributes), because provider SDKs and JSON error bodies often carry ``status`` or
    ``code`` in a dict. Anything else (None, a string, a number) is not transient.

    The error and everything it wraps (``__cause__``, ``.cause``, ``.error``,
    ``__context__``; cycles are safe) are examined nearest first, and the first one with an
    opinion decides. Nearest first matters: a ``TimeoutError`` raised by
    :func:`asyncio.timeout` wraps a ``CancelledError`` but is a timeout, not an abort, while a
    generic wrapper around a ``429`` is a rate limit. Per error, in order:

    1. an abort (``CancelledError``, :class:`~obsmem.errors.OperationAbortedError`, a class
       named ``AbortError``, code ``ABORT_ERR``) is never transient: the caller asked to stop;
    2. obsmem's own types: :class:`~obsmem.errors.ModelUnavailableError` (and
       :class:`~obsmem.errors.IncompleteResponseError`) yes; ``ModelRequestError``,
       ``MissingCredentialsError``, ``ModelOutputError`` no. Python's ``TimeoutError``,
       ``ConnectionError`` and ``socket.gaierror`` yes;
    3. an explicit ``is_retryable``/``isRetryable`` flag is believed either way;
    4. an HTTP status in ``status``/``status_code``/``statusCode``, or a numeric ``code``:
       :func:`status_verdict` (408, 409, 425, 429 and 5xx yes, other 4xx no);
    5. a string ``code`` starting ``UND_ERR_`` (undici) or naming a socket error yes;
    6. the message: "invalid api key" or "schema validation failed" no; otherwise any of
       terminated, fetch failed, ECONNRESET, ECONNREFUSED, ENOTFOUND, EAI_AGAIN, socket hang
       up, network error, timed out, timeout, connection reset/closed yes.

    Nothing with an opinion anywhere in the chain means not transient.
    """
    queue: deque[object] = deque([error])
    seen: set[int] = set()
    while queue:
        node = queue.popleft()
        if id(node) in seen or not isinstance(node, BaseException | Mapping):
            continue
        seen.add(id(node))
        verdict = _node_verdict(node)
        if verdict is not None:
            return verdict
        queue.extend(_field(node, name) for name in _CHAIN_FIELDS)
    return False


# --- refused connections -------------------------------------------------------------------


class RefusedConnection(ConnectionRefusedError):
    """Nothing accepted the connection to ``host``: no server listens there (yet).

    A transport that sees a refused connection raises its
    :class:`~obsmem.errors.ModelUnavailableError` *from* one of these (a server may come up,
    so the error stays transient), which tells :func:`with_retry` how little to retry it:
    ``RetryPolicy.local_refused_retries`` times when ``local`` (the host is this machine: a
    local model server that is not running) and ``RetryPolicy.remote_refused_retries`` times
    otherwise (a remote server restarting). It is an ``OSError``, not an obsmem error: callers
    still catch ``ModelUnavailableError``, and find the host here, as its ``__cause__``.
    """

    def __init__(self, host: str | None, *, local: bool) -> None:
        self.host = host
        self.local = local
        where = "this machine" if local else "a remote host"
        super().__init__(errno.ECONNREFUSED, f"connection refused by {host or 'the server'} ({where})")


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine.

    ``localhost`` and ``*.localhost`` (RFC 6761), 127.0.0.0/8, ``::1``, the IPv4-mapped
    loopback and the unspecified addresses (``0.0.0.0``, ``::``, which connect locally) are.
    Other names are not resolved: a name that merely points here counts as remote.
    """
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def refused_connection(error: BaseException) -> bool:
    """Whether ``error`` or anything it wraps is the operating system's "connection refused"."""
    queue: deque[object] = deque([error])
    seen: set[int] = set()
    while queue:
        node = queue.popleft()
        if id(node) in seen or not isinstance(node, BaseException):
            continue
        seen.add(id(node))
        if isinstance(node, ConnectionRefusedError) or (
            isinstance(node, OSError) and node.errno == errno.ECONNREFUSED
        ):
            return True
        queue.extend((node.__cause__, node.__context__))
    return False


# --- schedule -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff: ``initial_delay_s * factor**n``, capped, with multiplicative jitter,
    within a deadline.

    The defaults wait 1, 2, 4, 8, 16, 32, 64 and 120 s before retries 1 to 8 (247 s before
    jitter), so a call gives up after about four minutes. ``max_delay_s`` is a hard ceiling
    on any single wait, including a provider's ``retry_after`` and the jittered last steps.

    ``max_total_s`` (default 300 s; None for no deadline) bounds the whole loop, measured on
    the loop's clock from the first attempt: a wait that would end past it is not started,
    and the loop fails at once with :class:`~obsmem.errors.ModelUnavailableError` instead
    (a ``retry-after: 20`` with 10 s of budget left fails now, it does not sleep). The default
    schedule fits inside it; slow attempts or long ``retry-after`` waits are what it cuts. So
    no loop runs longer than ``max_total_s`` plus the one attempt started before it, whatever
    the provider says; :meth:`worst_case_s` gives the bound for an attempt timeout.

    A refused connection (an error caused by a :class:`RefusedConnection`) is retried at most
    ``local_refused_retries`` times (default 1) when the server is on this machine and
    ``remote_refused_retries`` times (default 3, waiting about 1, 2 and 4 s) otherwise, within
    ``max_retries``.
    """

    max_retries: int = 8
    initial_delay_s: float = 1.0
    factor: float = 2.0
    max_delay_s: float = 120.0
    jitter: float = 0.2
    max_total_s: float | None = 300.0
    local_refused_retries: int = 1
    remote_refused_retries: int = 3

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ConfigError("retry.max_retries", f"{self.max_retries} is negative", allowed=">= 0")
        if self.initial_delay_s < 0:
            raise ConfigError("retry.initial_delay_s", f"{self.initial_delay_s} is negative", allowed=">= 0")
        if self.factor < 1:
            raise ConfigError("retry.factor", f"{self.factor} would shrink the delays", allowed=">= 1")
        if self.max_delay_s < self.initial_delay_s:
            raise ConfigError(
                "retry.max_delay_s",
                f"{self.max_delay_s} is below initial_delay_s ({self.initial_delay_s})",
                allowed=">= initial_delay_s",
            )
        if not 0 <= self.jitter < 1:
            raise ConfigError("retry.jitter", f"{self.jitter} is out of range", allowed="0 <= jitter < 1")
        if self.max_total_s is not None and not self.max_total_s >= 0:  # also refuses NaN
            raise ConfigError(
                "retry.max_total_s", f"{self.max_total_s} is not a duration", allowed=">= 0 seconds, or None"
            )
        for option in ("local_refused_retries", "remote_refused_retries"):
            if getattr(self, option) < 0:
                raise ConfigError(f"retry.{option}", f"{getattr(self, option)} is negative", allowed=">= 0")

    def refused_retries(self, *, local: bool) -> int:
        """How many times a refused connection is retried (never more than ``max_retries``)."""
        return min(self.max_retries, self.local_refused_retries if local else self.remote_refused_retries)

    def worst_case_s(self, attempt_timeout_s: float = 0.0) -> float:
        """The longest a retry loop on this policy can take, when each attempt may run for
        ``attempt_timeout_s`` before failing.

        Without a deadline: every wait at its ceiling (a ``retry-after`` can push each one
        there) plus every attempt at its timeout. With one: ``max_total_s`` plus the attempt
        started just before it, if that is less. The defaults give 300 s plus one attempt.
        """
        if attempt_timeout_s < 0:
            raise ValueError(f"attempt_timeout_s must be >= 0, got {attempt_timeout_s}")
        unbounded = self.max_retries * self.max_delay_s + (self.max_retries + 1) * attempt_timeout_s
        if self.max_total_s is None:
            return unbounded
        return min(unbounded, self.max_total_s + attempt_timeout_s)

    def delays(self) -> list[float]:
        """The wait before each retry, before jitter: one entry per retry."""
        return [self._base_delay(attempt) for attempt in range(1, self.max_retries + 1)]

    def delay_for(
        self, attempt: int, rng: random.Random | None = None, *, retry_after: float | None = None
    ) -> float:
        """The wait before retry number ``attempt`` (1 for the first retry), jittered.

        ``retry_after`` is a delay the provider asked for: the wait is at least that long,
        but never longer than ``max_delay_s``. ``rng`` makes the jitter reproducible; without
        it the module-level :mod:`random` generator is used.
        """
        if attempt < 1:
            raise ValueError(f"attempt counts retries from 1, got {attempt}")
        delay = self._base_delay(attempt)
        if self.jitter:
            uniform = rng.uniform if rng is not None else random.uniform
            delay *= 1 + uniform(-self.jitter, self.jitter)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.max_delay_s)

    def _base_delay(self, attempt: int) -> float:
        # Multiply step by step and stop at the cap, so a large attempt never overflows a float.
        delay = self.initial_delay_s
        for _ in range(attempt - 1):
            if delay >= self.max_delay_s:
                break
            delay *= self.factor
        return min(delay, self.max_delay_s)


# --- the loop -------------------------------------------------------------------------------


async def _backoff(delay: float, clock: Clock, abort: asyncio.Event | None, what: str) -> None:
    """Sleep ``delay`` on ``clock``, or raise OperationAbortedError as soon as ``abort`` is set."""
    if abort is None:
        await clock.sleep(delay)
        return
    if abort.is_set():
        raise OperationAbortedError(f"retrying {what}")
    sleeper = asyncio.ensure_future(clock.sleep(delay))
    watcher = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait((sleeper, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:  # also on our own cancellation: leave no task behind
        sleeper.cancel()
        watcher.cancel()
    if abort.is_set():
        raise OperationAbortedError(f"retrying {what}")
    sleeper.result()  # a clock that failed fails the retry loop too


def _retry_after(error: BaseException) -> float | None:
    return error.retry_after if isinstance(error, ModelUnavailableError) else None


def _refusal(error: BaseException) -> RefusedConnection | None:
    """The :class:`RefusedConnection` that ``error`` is or was raised from, if any."""
    node: BaseException | None = error
    for _ in range(4):  # the transport's error, a wrapper or two: never a long chain
        if node is None:
            return None
        if isinstance(node, RefusedConnection):
            return node
        node = node.__cause__
    return None


def _out_of_time(
    error: BaseException, *, what: str, attempts: int, elapsed: float, delay: float, budget: float
) -> ModelUnavailableError:
    """The error for a wait that would end past ``budget``: says so, keeps the last status."""
    asked = _retry_after(error)
    if asked is not None and asked >= delay:
        reason = f"the server asked to wait {asked:g} s"
    else:
        reason = f"the next wait is {delay:g} s"
    status = error.status_code if isinstance(error, ModelUnavailableError) else None
    return ModelUnavailableError(
        f"Gave up on the {what} after {attempts} attempt{'s' if attempts != 1 else ''} and {elapsed:g} s: "
        f"{reason}, which would pass the retry deadline of {budget:g} s (RetryPolicy.max_total_s). "
        f"Last error: {redact_secrets(error)}",
        status_code=status,
        retry_after=asked,
    )


async def with_retry(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy = RetryPolicy(),
    clock: Clock | None = None,
    abort: asyncio.Event | None = None,
    rng: random.Random | None = None,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    what: str = "model call",
    logger: logging.Logger | None = None,
) -> T:
    """Await ``call()`` until it succeeds, retrying transient errors on ``policy``'s schedule.

    - A non-transient error (see :func:`is_transient`) is re-raised at once, unchanged.
    - When retries run out, the *last* error is re-raised, so the caller sees the most
      recent state of the provider. A refused connection (an error raised from a
      :class:`RefusedConnection`) has its own, smaller allowance (:meth:`RetryPolicy.refused_retries`).
    - A delay the provider asked for (``ModelUnavailableError.retry_after``) is the least
      the loop waits, within ``policy.max_delay_s``.
    - No wait ends past ``policy.max_total_s`` (measured on ``clock`` from the first
      attempt): when the next one would, the loop raises a
      :class:`~obsmem.errors.ModelUnavailableError` at once that says so, chained to the
      last error and carrying its ``status_code`` and ``retry_after``.
    - ``abort``, when set, stops the loop: before the first call (no call is made) or during
      a backoff wait (the wait is cut short) with :class:`~obsmem.errors.OperationAbortedError`.
      A call already in flight is not interrupted by ``abort``; cancel the task for that.
    - ``asyncio.CancelledError`` (and any other ``BaseException``) is never caught.
    - ``on_retry(attempt, error, delay)`` runs before each wait, ``attempt`` counting
      retries from 1; every retry is also logged at WARNING on ``logger`` (default this
      module's). ``what`` names the call in the log line and the abort error.
    """
    clock = clock if clock is not None else SystemClock()
    logger = logger if logger is not None else _logger
    if abort is not None and abort.is_set():
        raise OperationAbortedError(f"retrying {what}")
    started = clock.monotonic()
    attempt = 0
    refusals = 0
    while True:
        try:
            return await call()
        except Exception as error:
            attempt += 1
            if attempt > policy.max_retries or not is_transient(error):
                raise
            refusal = _refusal(error)
            if refusal is not None:
                refusals += 1
                if refusals > policy.refused_retries(local=refusal.local):
                    raise
            asked = _retry_after(error)
            delay = policy.delay_for(attempt, rng, retry_after=asked)
            elapsed, budget = clock.monotonic() - started, policy.max_total_s
            # A server that asks for more than the deadline leaves: fail now, not after max_delay_s
            # (which would send the request again long before the server said it may).
            if budget is not None and asked is not None and elapsed + asked > budget:
                delay = asked
            if budget is not None and elapsed + delay > budget:
                raise _out_of_time(
                    error, what=what, attempts=attempt, elapsed=elapsed, delay=delay, budget=budget
                ) from error
            # At WARNING the error's type and status only: a provider's message may quote the
            # request (the user's text) or the key. Its text goes to DEBUG, as log_failure does.
            status = getattr(error, "status_code", None)
            kind = type(error).__name__ + (f" (HTTP {status})" if isinstance(status, int) else "")
            label = what.removesuffix(" call")
            logger.warning("Transient %s error, retry %d of %d in %.1f s: %s", label, attempt, policy.max_retries,
                           delay, kind)  # fmt: skip
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("Transient %s error, retry %d: %s", label, attempt, redact_secrets(error))
            if on_retry is not None:
                on_retry(attempt, error, delay)
            await _backoff(delay, clock, abort, what)
