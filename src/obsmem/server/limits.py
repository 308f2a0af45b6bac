"""Bounds on what one request may send to ``obsmem serve``, enforced before anything else runs.

:class:`BodyLimits` is a pure ASGI middleware (it never buffers a body):

* a ``Content-Length`` over the limit is answered 413 at once: no key is checked and no byte of
  the body is read;
* a body sent without a length (chunked) is counted as it arrives; once it passes the limit the
  app is handed nothing more (it sees the client leave) and the client gets 413;
* a body that has not all arrived ``body_timeout_s`` after the request's headers is answered 408
  (uvicorn has no such timeout: its ``timeout_keep_alive`` covers only idle connections between
  requests);
* an answer given while part of the request's body is still unread (a route that reads none, or
  one of the refusals above) closes the connection, so nobody keeps it open by trickling the rest.

:func:`header_bounded_h11` is uvicorn's HTTP/1.1 protocol with a bound on headers: a connection
whose request headers have not all arrived ``header_timeout_s`` after its first byte (or, on a new
connection, after it opened) is closed. uvicorn has none: a client trickling header bytes, or
opening connections and sending nothing, holds each connection (a file descriptor) for as long as
it likes. The body's own bound (``body_timeout_s``, above) starts where this one ends.

The limit is ``max_body_bytes``, except for ``POST /api/resources/import`` (an export is larger
than any other request), which gets ``max_import_bytes``. Refusals use the service's error shape
(``BodyTooLargeError``, ``BodyTimeoutError``) and name the setting.

:class:`KeyFirst` checks the API key of a request with a body to the keyed routes (``/api/…``,
``/v1/…``) before any byte of the body is read (a route that declares a body model has it read
and parsed before its key dependency runs): without a valid key the answer is 401 and the
connection closes, so a client without a key cannot make the server take in a body. The route
checks the key again once the body is in (a key revoked while the body arrived is refused).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from obsmem.errors import ConfigError
from obsmem.server.errors import BodyTimeoutError, BodyTooLargeError, ServiceError, error_body, status_for

__all__ = ["IMPORT_PATH", "BodyLimits", "KeyFirst", "header_bounded_h11"]

#: The one route with its own, larger body limit (``max_import_bytes``).
IMPORT_PATH = "/api/resources/import"
#: The routes every request to which needs an API key.
KEYED_PREFIXES = ("/api/", "/v1/")
_CLOSE = (b"connection", b"close")
_DISCONNECT: Message = {"type": "http.disconnect"}


def _positive(value: float, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(name, f"expected a number above 0, got {value!r}")


class BodyLimits:
    """Wraps ``app`` (see the module's docstring); settings are those of
    :class:`~obsmem.server.service.ServerSettings` of the same names."""

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, max_import_bytes: int, body_timeout_s: float
    ) -> None:
        _positive(max_body_bytes, "max_body_bytes")
        _positive(max_import_bytes, "max_import_bytes")
        _positive(body_timeout_s, "body_timeout_s")
        self.app = app
        self.max_body_bytes = int(max_body_bytes)
        self.max_import_bytes = int(max_import_bytes)
        self.body_timeout_s = float(body_timeout_s)

    def _limit(self, scope: Scope) -> tuple[int, str]:
        if scope.get("method") == "POST" and _route_path(scope).rstrip("/") == IMPORT_PATH:
            return self.max_import_bytes, "max_import_bytes"
        return self.max_body_bytes, "max_body_bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = self._limit(scope)
        declared: int | None = None
        chunked = False
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if declared is not None and declared > limit:
            await _refuse(send, _too_large(limit, setting))
            return

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout_s
        body_done = not chunked and not declared
        received = 0
        refusal: ServiceError | None = None
        started = False

        async def guarded_receive() -> Message:
            nonlocal body_done, received, refusal
            if refusal is not None:
                return dict(_DISCONNECT)
            if body_done:  # past the body: the wait for a disconnect (a stream) has no deadline
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                refusal = BodyTimeoutError(
                    f"The request body did not arrive within {self.body_timeout_s:g} s "
                    "(body_timeout_s; obsmem serve --body-timeout-s)."
                )
                return dict(_DISCONNECT)
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refusal = _too_large(limit, setting)
                    return dict(_DISCONNECT)
                if not message.get("more_body", False):
                    body_done = True
            else:  # the client left
                body_done = True
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refusal is not None and not started:
                return  # the app's answer to a body it never got whole: ours goes instead
            if message["type"] == "http.response.start" and not started:
                started = True
                if not body_done:
                    message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except Exception:
            if refusal is None or started:
                raise
        if refusal is not None and not started:
            await _refuse(send, refusal)


class KeyFirst:
    """Wraps ``app`` (see the module's docstring). ``authenticate(authorization, x_api_key)``
    checks a request's key headers (raising the service's 401 error); None: the server needs no
    key (``--dev``), and nothing is checked here."""

    def __init__(
        self, app: ASGIApp, *, authenticate: Callable[[str | None, str | None], Awaitable[object]] | None
    ) -> None:
        self.app = app
        self.authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.authenticate is None or scope["type"] != "http" or not _route_path(scope).startswith(KEYED_PREFIXES):
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = dict(scope.get("headers", ()))
        length = headers.get(b"content-length", b"").strip()
        if length in (b"", b"0") and b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
            await self.app(scope, receive, send)  # no body to keep out: the route checks the key
            return
        authorization, api_key = (headers.get(name) for name in (b"authorization", b"x-api-key"))
        try:
            await self.authenticate(
                None if authorization is None else authorization.decode("latin-1"),
                None if api_key is None else api_key.decode("latin-1"),
            )  # fmt: skip
        except ServiceError as exc:
            if status_for(exc) != 401:
                raise
            await _refuse(send, exc)
            return
        await self.app(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The request's path inside the app (without a ``root_path`` the server runs under)."""
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _too_large(limit: int, setting: str) -> BodyTooLargeError:
    option = setting.replace("_", "-")
    return BodyTooLargeError(
        f"The request body is larger than {limit} bytes ({setting}; obsmem serve --{option})."
    )


async def _refuse(send: Send, error: ServiceError) -> None:
    body = json.dumps(error_body(type(error).__name__, str(error))).encode()
    status = status_for(error)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), _CLOSE]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))  # as the routes' own 401 says
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_log = logging.getLogger("obsmem.server")


def header_bounded_h11(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol closing a connection whose request headers take longer than
    ``header_timeout_s`` (see the module's docstring); pass it as ``uvicorn.run(..., http=...)``."""
    _positive(header_timeout_s, "header_timeout_s")
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderBoundH11(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()  # a new connection's first request, however long before its first byte

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()  # the first byte of the next request on a kept-alive connection
            before = self.cycle
            super().data_received(data)
            if self.cycle is not before:  # a request's headers are all in: the body has its own bound
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                _log.info("closed a connection from %s: its request headers took over %s s (--header-timeout-s)",
                          _peer(self.client), header_timeout_s)  # fmt: skip
                self.transport.close()

    return HeaderBoundH11


def _peer(client: Any) -> str:
    return f"{client[0]}:{client[1]}" if isinstance(client, tuple) and len(client) == 2 else "a client"
