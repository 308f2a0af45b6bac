"""The MCP server (official MCP Python SDK 2.x, ``MCPServer``): memory tools for any MCP client.

Tools: ``recall`` (the thread's conversation and observation groups; retrieval mode),
``search_knowledge``, ``remember`` (a fact into the knowledge store), ``forget`` (a value,
everywhere in a thread or resource and in the knowledge the key may change), ``memory_status``
(a thread's memory state now, as ``GET /api/threads/{id}/status``) and ``receipt`` (what the
context a reply was made from held, as ``GET /api/messages/{id}/receipt``). Resource template:
``obsmem://threads/{thread_id}/observations`` (the thread's current observations).

Scoped by the API key exactly like REST (:mod:`obsmem.server.access`): over streamable HTTP
(mounted at ``/mcp`` in ``obsmem serve``) each request's ``Authorization: Bearer …`` is checked
before the SDK sees it and again for each tool call; over stdio (``obsmem mcp``) the key comes
from ``OBSMEM_API_KEY`` when the process starts.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar, cast

from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from obsmem import InvalidInputError, ObsmemError
from obsmem.om.receipts import Receipt
from obsmem.server.access import (
    MALFORMED_RECEIPT,
    Principal,
    authenticate,
    bearer_token,
    check_dev_host,
    unreadable_receipt,
)
from obsmem.server.errors import (
    AuthenticationError,
    ServiceError,
    error_body,
    status_for,
)
from obsmem.server.rest import Id, capture_fact, forget_for, knowledge_scope, receipt_json, visible_receipt
from obsmem.server.service import Service

# The bounds of the REST API's arguments (obsmem.server.rest): a tool takes no more than a route.
Query = Annotated[str, Field(min_length=1, max_length=2000)]
Fact = Annotated[str, Field(min_length=1, max_length=10_000)]
_ID_LENGTH = 200  # as Id

#: The MCP library's logger of failed tool calls and resource reads: each line names what the
#: client sent (the tool's name; the resource's URI, twice: it is in the error too).
_SDK_LOGGER = "mcp.server.mcpserver.server"
#: How much of one such argument a log line keeps.
_LOGGED_CHARS = 1000

__all__ = ["build_mcp", "guarded"]

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])

#: ``recall``'s ``page``, as the library's recall tool and REST read it (0 is read as 1).
_RECALL_PAGE = (
    "1 (default), 2, 3 … read on; -1, -2 … read the other way: without a cursor or group_id, from the "
    "thread's latest messages back; with a cursor, back from just before it."
)

#: ``recall``'s ``anchor``: the direction a ``next_page`` reads on in (its arguments carry it).
_RECALL_ANCHOR = (
    "With a cursor: start (default) reads on from that message, end reads back up to it. The "
    "answer's next_page gives it with the cursor: pass both to read on in the same direction."
)

#: How much of a receipt ``receipt(resolve=True)`` resolves: its first groups (each to its first
#: 200 messages) and raw messages; ``groups_truncated`` / ``raw_truncated`` say when it left some.
_RESOLVED_GROUPS = 100
_RESOLVED_RAW = 500


def _resolvable(receipt: Receipt) -> tuple[Receipt, bool]:
    """``receipt`` with only what ``receipt(resolve=True)`` resolves: its first groups and no more
    raw ids, or seqs of a raw span (twice as many: a span holds markers too), than it answers; and
    whether any of the raw tail was cut."""
    span = receipt.raw_span
    if span is not None and span[2] - span[1] >= 2 * _RESOLVED_RAW:
        span = (span[0], span[1], span[1] + 2 * _RESOLVED_RAW - 1)
    raw = dataclasses.replace(
        receipt, raw_message_ids=receipt.raw_message_ids[: _RESOLVED_RAW + 1],
        raw_outside=receipt.raw_outside[: _RESOLVED_RAW + 1], raw_span=span,
    )  # fmt: skip
    return dataclasses.replace(raw, groups=receipt.groups[:_RESOLVED_GROUPS]), raw != receipt


class _ClippedArguments(logging.Filter):
    """Clip the text arguments of the MCP library's log lines to :data:`_LOGGED_CHARS`.

    A client names a tool or a resource with what it likes: a URI of megabytes was written whole
    to the log, twice, and ``obsmem serve``'s handler (the library's rich handler, behind the
    redacting filter) took seconds per megabyte, and more memory still, on the event loop that
    serves every tenant."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_clipped(arg) for arg in record.args)
        return True


def _clipped(value: object) -> object:
    if isinstance(value, str) and len(value) > _LOGGED_CHARS:
        return f"{value[:_LOGGED_CHARS]}… ({len(value):,} characters)"
    return value


def _clip_library_log() -> None:
    logger = logging.getLogger(_SDK_LOGGER)
    if not any(isinstance(f, _ClippedArguments) for f in logger.filters):
        logger.addFilter(_ClippedArguments())


def _reported(error_type: type[Exception]) -> Callable[[_F], _F]:
    """Report obsmem's errors to the client by class and message (the SDK withholds other errors'
    text): a thread another key owns reads ``ThreadNotFoundError: Thread '…' does not exist``."""

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except (ObsmemError, ServiceError) as exc:
                raise error_type(f"{type(exc).__name__}: {exc}") from None

        return cast(_F, run)

    return decorate


def build_mcp(service: Service, principal: Principal | None = None) -> MCPServer:
    """An MCP server over ``service``. ``principal``: fixed (stdio); None: from each HTTP request."""
    _clip_library_log()
    server: MCPServer = MCPServer(
        "obsmem", version="0.1.0",
        instructions="Observational memory: recall earlier conversation, search and add knowledge, forget values.",
    )  # fmt: skip

    async def caller(ctx: Context) -> Principal:
        if principal is not None:
            # A key from the key store (obsmem mcp: authenticate) is checked at each call, as
            # over HTTP: the process runs as long as its client, and a key revoked meanwhile is
            # refused from then on. (A principal made by hand has no key store to ask.)
            if principal.keys is not None and principal.key_id is not None:
                key = await principal.keys.get(principal.key_id)
                if key is None or key.revoked:
                    raise AuthenticationError("The API key is malformed, unknown or revoked.")
            return principal
        headers = ctx.headers or {}
        token = bearer_token(headers.get("authorization"), headers.get("x-api-key"))
        return await authenticate(service.keys, token, dev=service.settings.dev)

    def need_knowledge() -> Any:
        if service.knowledge is None:
            raise InvalidInputError("This server has no knowledge store (obsmem serve --knowledge …)")
        return service.knowledge

    # A tool that could only fail is not listed: recall needs retrieval mode, search_knowledge
    # and remember a knowledge store (obsmem serve --knowledge …).
    retrieval = service.memory.config.retrieval.enabled
    knowledge = service.knowledge is not None

    def tool(listed: bool) -> Callable[[_F], _F]:
        return server.tool() if listed else (lambda fn: fn)

    @tool(retrieval)
    @_reported(ToolError)
    async def recall(
        thread_id: Id, ctx: Context, query: Query | None = None, cursor: Id | None = None,
        group_id: Id | None = None,
        page: Annotated[int, Field(ge=-1000, le=1000, description=_RECALL_PAGE)] = 1,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        anchor: Annotated[Literal["start", "end"] | None, Field(description=_RECALL_ANCHOR)] = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Look back in a thread's memory: with ``query``, search its observation groups; with
        ``group_id``, the messages a group covers; with ``cursor``, the conversation from a
        message id; otherwise the conversation from its start. ``page`` 2, 3 … read on; -1, -2 …
        read the other way (from the latest messages, or back from the cursor); the answer's
        ``page`` is the page it holds. To read on, call recall again with the thread_id and the
        arguments in the answer's ``next_page`` (its cursor and anchor)."""
        who = await caller(ctx)
        await who.thread(service.memory, thread_id)
        args: dict[str, Any] = {"page": page, "limit": limit}
        if query is not None:
            args |= {"mode": "search", "query": query}
        for name, value in (("cursor", cursor), ("group_id", group_id), ("anchor", anchor)):
            if value is not None:
                args[name] = value
        answer = await service.memory.call_recall_tool(thread_id, args)
        mistake = answer.get("error") if set(answer) == {"error"} else None
        if isinstance(mistake, str):  # the recall tool's answer to a model: over MCP, a tool error
            raise ToolError(mistake)
        return answer

    @tool(knowledge)
    @_reported(ToolError)
    async def search_knowledge(
        query: Query, ctx: Context, resource_id: Id | None = None, limit: Annotated[int, Field(ge=1, le=100)] = 10
    ) -> list[dict[str, Any]]:
        """Search the knowledge this key may see (its org, or its resource within the org)."""
        who = await caller(ctx)
        scope = knowledge_scope(who, resource_id)
        hits = await need_knowledge().search(query, scope, limit=max(1, min(limit, 100)))
        return [{"text": h.text, "scope": h.scope, "id": h.id, "node_id": h.node_id, "score": h.score} for h in hits]

    @tool(knowledge)
    @_reported(ToolError)
    async def remember(
        text: Fact, ctx: Context, subject: Annotated[str, Field(min_length=1, max_length=200)] = "user",
        resource_id: Id | None = None, thread_id: Id | None = None,
    ) -> dict[str, Any]:
        """Remember a fact about ``subject`` in the knowledge store (an explicit request: stored verified)."""
        who = await caller(ctx)
        who.may_write()
        if thread_id is not None:
            resource_id = (await who.thread(service.memory, thread_id)).resource_id
        return await capture_fact(service, who, text, subject, resource_id, thread_id)

    @server.tool()
    @_reported(ToolError)
    async def forget(
        value: Fact, ctx: Context, thread_id: Id | None = None, resource_id: Id | None = None
    ) -> dict[str, int]:
        """Forget every occurrence of ``value`` in a thread (or in every thread of the resource),
        and in the knowledge this key may change: its resource's, or its org's for an org key."""
        who = await caller(ctx)
        return await forget_for(service, who, value, thread_id=thread_id, resource_id=resource_id)

    @server.tool()
    @_reported(ToolError)
    async def memory_status(thread_id: Id, ctx: Context) -> dict[str, Any]:
        """A thread's memory state now: ``phase`` (idle, buffering, observation-due, observing,
        reflecting, backoff ...), the message window against its thresholds, buffered
        observations with the seq span each covers, memory work in flight and backoff."""
        who = await caller(ctx)
        await who.thread(service.memory, thread_id)
        return (await service.memory.status(thread_id)).data()

    @server.tool()
    @_reported(ToolError)
    async def receipt(message_id: Id, ctx: Context, resolve: bool = False) -> dict[str, Any]:
        """What the context an assistant reply was made from held: the generation, observation
        groups with their seq spans, raw messages, knowledge records, pins and tokens per section.
        ``resolve``: each group's covered messages and the raw messages, as ids and seqs (the first
        100 groups, 200 messages each, and 500 raw messages; ``groups_truncated``, ``raw_truncated``
        and each group's ``truncated`` say when some were left)."""
        who = await caller(ctx)
        try:
            message, found = await visible_receipt(who, service.memory, message_id)
            answer = await receipt_json(who, service.memory, message, found)
            if resolve:  # of a bounded part: a receipt may be metadata a client stored, of any size
                bounded, cut = _resolvable(found)
                resolved = await receipt_json(who, service.memory, message, bounded, resolve=True, per_group=200)
                answer["groups"] = resolved["groups"]
                answer["groups_truncated"] = len(found.groups) > _RESOLVED_GROUPS
                answer["raw"] = resolved["raw"][:_RESOLVED_RAW]
                answer["raw_truncated"] = cut or len(resolved["raw"]) > _RESOLVED_RAW
            return answer
        except (ObsmemError, ServiceError):
            raise
        except MALFORMED_RECEIPT:  # a receipt a client stored itself, of a shape obsmem cannot read
            raise unreadable_receipt(message_id) from None

    # A thread id is no filesystem path: '/lead', 'a/../b' and '..' are ids the gateway takes,
    # read from the store and checked against the key like any other (the SDK's default policy
    # refuses them as path traversal).
    @server.resource("obsmem://threads/{thread_id}/observations", mime_type="text/plain",
                     security=ResourceSecurity(exempt_params=frozenset({"thread_id"})))
    @_reported(ResourceError)
    async def observations(thread_id: str, ctx: Context) -> str:
        """The thread's current observations, as its context shows them (empty until something
        was observed; in resource scope without sharing, never another thread's)."""
        if len(thread_id) > _ID_LENGTH:  # (as Id: the library reports a failed Id as a server fault)
            raise InvalidInputError(
                f"Invalid thread_id: an id has at most {_ID_LENGTH} characters, got {len(thread_id):,}",
                argument="thread_id",
            )
        who = await caller(ctx)
        await who.thread(service.memory, thread_id)
        return await service.memory.get_observations(thread_id)

    return server


class _Guard:
    """``app`` (the MCP streamable HTTP endpoint) behind the API key check: no key, no MCP.

    A class, not a function, so Starlette's ``Route`` treats it as an ASGI app."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:  # fmt: skip
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            try:
                check_dev_host(headers.get("host"), dev=self.service.settings.dev)
                await authenticate(
                    self.service.keys, bearer_token(headers.get("authorization"), headers.get("x-api-key")),
                    dev=self.service.settings.dev,
                )  # fmt: skip
            except Exception as exc:
                status = status_for(exc)
                body = json.dumps(error_body(type(exc).__name__, str(exc))).encode()
                await send({"type": "http.response.start", "status": status, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                ]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def guarded(app: ASGIApp, service: Service) -> ASGIApp:
    """``app`` behind the API key check (see :class:`_Guard`)."""
    return _Guard(app, service)
