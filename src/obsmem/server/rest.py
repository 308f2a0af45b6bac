"""The REST API over one :class:`~obsmem.Memory` (``/api/…``), every route confined to its key.

Threads, messages, turns (begin / step / end, each returning the context), context,
observations and generations, recall, knowledge search, resource delete / export / import,
key management for admin keys, a thread's memory status (and a server-sent event stream of it)
and the receipt of the context a reply was made from. Messages are obsmem's own dicts (``{"role", "parts"}``) or, with
``"format": "openai"``, Chat Completions messages (converted by :mod:`obsmem.convert`).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.routing import Match
from starlette.types import Scope

from obsmem import UsageReport
from obsmem import (
    ContextWindow, InvalidInputError, Memory, Message, MessageNotFoundError, NotFoundError, Thread,
    ThreadChangedError, ThreadNotFoundError, from_openai, to_openai,
)
from obsmem.knowledge import Knowledge, TrustState
from obsmem.om.receipts import Receipt
from obsmem.om.sections import observations_shown, visible_sections
from obsmem.om.status import ThreadStatus
from obsmem.profiles import PRICES_AS_OF
from obsmem.server.access import Principal, addressable, authenticate, bearer_token, check_dev_host, scopable
from obsmem.server.errors import (
    ERROR_RESPONSES, AuthenticationError, PermissionDeniedError, ResourceNotFoundError, ThreadIdTakenError,
    TurnNotFoundError,
)
from obsmem.server.paths import SegmentRoute
from obsmem.server.service import OpenTurn, Service
from obsmem.storage.contract import ObservationRecord, resource_orgs, resource_totals
from obsmem.transfer import KnowledgeReachError, export_resource, import_resource
from obsmem.types import check_finite

__all__ = [
    "acting", "context_json", "current_principal", "receipt_json", "router", "service_of", "visible_message", "visible_receipt",
]

Id = Annotated[str, Field(min_length=1, max_length=200)]


def service_of(request: Request) -> Service:
    service = request.app.state.service
    assert isinstance(service, Service)
    return service


async def current_principal(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Principal:
    service = service_of(request)  # (checked again after KeyFirst's check: revoked meanwhile is revoked)
    check_dev_host(request.headers.get("host"), dev=service.settings.dev)  # --dev: a rebound host name gets nothing
    return await authenticate(service.keys, bearer_token(authorization, x_api_key), dev=service.settings.dev)


Caller = Annotated[Principal, Depends(current_principal)]
ServiceDep = Annotated[Service, Depends(service_of)]

# SegmentRoute: an id holding '/' (the gateway takes any) is named with '%2F' in every route
router = APIRouter(prefix="/api", responses=ERROR_RESPONSES, route_class=SegmentRoute)


# -- bodies ---------------------------------------------------------------------------------
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ThreadIn(_Body):
    id: Id
    resource_id: Id | None = None
    title: Annotated[str, Field(max_length=1000)] | None = None
    metadata: dict[str, Any] | None = None


#: The most message parts one request may carry (obsmem's ``parts``; OpenAI's content parts and
#: tool calls), all its messages together: a turn's work is linear in its parts and runs on the
#: server's event loop (about 20 µs a part), so 400,000 tiny parts in a 12 MB body held every
#: tenant's requests for seconds. Text is not bounded here (a long text is one part).
MAX_REQUEST_PARTS = 4096


def _part_count(message: dict[str, Any]) -> int:
    count = 0
    for key in ("parts", "content", "tool_calls"):
        items = message.get(key)
        count += len(items) if isinstance(items, list) else 0
    return count


class MessagesIn(_Body):
    messages: Annotated[list[dict[str, Any]], Field(max_length=1000)]
    format: Literal["obsmem", "openai"] = "obsmem"

    @model_validator(mode="after")
    def _bounded(self) -> MessagesIn:
        if sum(_part_count(m) for m in self.messages) > MAX_REQUEST_PARTS:
            raise ValueError(
                f"the messages hold more than {MAX_REQUEST_PARTS} parts (content parts and tool calls, "
                "all messages together); send them in several requests"
            )
        return self


class TurnIn(MessagesIn):
    model: Annotated[str, Field(max_length=200)] | None = None


class StepIn(MessagesIn):
    pass


class EndIn(MessagesIn):
    messages: Annotated[list[dict[str, Any]], Field(max_length=1000)] = []  # the reply may have gone through step


class RecallIn(_Body):
    mode: Literal["messages", "threads", "search"] = "messages"
    query: Annotated[str, Field(max_length=2000)] | None = None
    group_id: Id | None = None
    cursor: Id | None = None
    target_thread_id: Id | None = None
    anchor: Literal["start", "end"] = "start"
    page: Annotated[int, Field(ge=-1000, le=1000)] = 1
    limit: Annotated[int, Field(ge=1, le=200)] = 20
    detail: Literal["low", "high"] = "low"
    token_budget: Annotated[int, Field(ge=0, le=100_000)] = 2000


class ImportIn(_Body):
    export: Annotated[str, Field(min_length=1)]
    into_resource: Id | None = None


class KeyIn(_Body):
    org_id: Id | None = None
    resource_id: Id | None = None
    read_only: bool = False
    admin: bool = False
    label: Annotated[str, Field(max_length=200)] | None = None


# -- JSON views -----------------------------------------------------------------------------
def thread_json(thread: Thread) -> dict[str, Any]:
    return thread.model_dump(mode="json")


def message_json(message: Message) -> dict[str, Any]:
    return message.model_dump(mode="json")


def context_json(context: ContextWindow) -> dict[str, Any]:
    """The context as obsmem messages and as Chat Completions messages, ready to send."""
    return {
        "messages": [message_json(m) for m in context.messages],
        "openai": to_openai(context.messages),
        "has_observations": context.has_observations,
        "raw_messages": len(context.raw_messages),
        "trimmed": context.trimmed,
    }


#: How many of a thread's messages a request reads at a time, newest first, for the tool calls
#: its results answer (see :func:`call_history`).
HISTORY_TAIL = 256
#: How far back (in messages) :func:`call_history` looks for the call a tool result answers: a
#: result whose call is not among the thread's newest ``HISTORY_REACH`` messages is refused (400),
#: so a result naming a call that exists nowhere reads at most this many rows, however long the
#: thread.
HISTORY_REACH = 2048


async def _call_history(service: Service, thread_id: str, body: MessagesIn) -> list[Message] | None:
    """What an OpenAI-format ``body`` is converted against: the stored messages holding the tool
    calls its ``tool`` messages answer when it does not hold them (their tool's name is on the
    call). None when nothing is needed (no such message): a plain turn reads no history at all.
    The thread's :data:`HISTORY_TAIL` newest messages, else (a call older than them) the whole
    thread: a request's reads do not grow with the conversation."""
    if body.format != "openai":
        return None
    # Only string ids name a call: another value is the converter's to refuse (a 422 naming it).
    answered = {
        i for m in body.messages if m.get("role") == "tool" and isinstance(i := m.get("tool_call_id"), str)
    }
    if not answered:
        return None
    made = {
        i for m in body.messages if isinstance(m.get("tool_calls"), list)
        for call in m["tool_calls"] if isinstance(call, dict) and isinstance(i := call.get("id"), str)
    }
    return await call_history(service, thread_id, answered, made) or None


async def call_history(
    service: Service, thread_id: str, answered: set[str], made: set[str], *, argument: str = "messages"
) -> list[Message]:
    """The stored messages holding the tool calls a request's results answer (``answered``, by
    call id) when the request does not make them itself (``made``): a result's tool is named on
    its call. The thread's newest messages, read :data:`HISTORY_TAIL` at a time back to the
    oldest such call, never further than :data:`HISTORY_REACH`; none without such a result. A
    call older than that (or one that exists nowhere, on a thread longer than that) is refused
    with :class:`~obsmem.errors.InvalidInputError` naming ``argument``: a request's reads do not
    grow with the conversation (REST and the gateway). On a shorter thread a call that exists
    nowhere is left to the converter to refuse."""
    wanted = answered - made
    if not wanted:
        return []
    read: list[Message] = []  # newest first
    while True:
        limit = min(HISTORY_TAIL, HISTORY_REACH - len(read))
        page = await service.memory.store.list_messages(
            thread_id, before_seq=read[-1].seq if read else None, limit=limit, newest_first=True
        )
        read.extend(page)
        missing = wanted - {c.tool_call_id for m in read for c in m.tool_calls}
        if not missing or len(page) < limit:  # every call found, or the whole thread read
            return read[::-1]
        if len(read) >= HISTORY_REACH:
            break
    names = ", ".join(repr(i) for i in sorted(missing))
    raise InvalidInputError(
        f"a tool result answers {names}, but no tool call with that id is among this thread's newest "
        f"{HISTORY_REACH} messages (results are matched to calls that recent); send the assistant "
        "message that made the call with its result", argument=argument,
    )


def _parsed(body: MessagesIn, history: list[Message] | None = None) -> list[Message] | list[dict[str, Any]]:
    if body.format == "openai":
        return from_openai(body.messages, history=history or ())
    return body.messages


def _owned(principal: Principal, messages: list[Message] | list[dict[str, Any]], thread: Thread) -> None:
    """Messages naming a thread must name this one (the store checks it too)."""
    items: list[Any] = list(messages)
    for index, message in enumerate(items):
        named = message.thread_id if isinstance(message, Message) else message.get("thread_id")
        if named is not None and named != thread.id:
            raise InvalidInputError(f"messages[{index}] names another thread", argument=f"messages[{index}]")


# -- threads --------------------------------------------------------------------------------
@router.post("/threads", status_code=201, tags=["threads"])
async def create_thread(body: ThreadIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    # an id every /api/threads/{id} route (and the knowledge scope) can name: 'a/b' would be
    # created and then never read or deleted here. (The gateway keeps taking any id it names.)
    addressable(body.id, "id")
    if body.resource_id is not None:
        addressable(body.resource_id, "resource_id")
    check_finite(body.metadata, "metadata")  # before the access check creates anything
    thread, created = await principal.create_thread(
        service.memory, body.id, body.resource_id, title=body.title, metadata=body.metadata
    )
    if not created:
        raise ThreadIdTakenError(body.id)
    return thread_json(thread)


@router.get("/threads", tags=["threads"])
async def list_threads(
    principal: Caller, service: ServiceDep, resource_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100, offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    after: Annotated[str | None, Query(min_length=1, max_length=1000, description="The previous page's 'next'.")] = None,
    order: Annotated[Literal["oldest", "newest"], Query(description="'newest': most recently active first.")] = "oldest",
) -> dict[str, Any]:  # fmt: skip
    """The resource's threads, oldest first, ``limit`` a page. ``next`` (on a full page only) is
    the ``after`` of the next page: read from the listing's index at that point, so a page costs
    the same however far in it is, and a thread deleted meanwhile skips no other (``offset``
    reads and skips every earlier thread, and skips one when one is deleted).

    ``order=newest``: most recently active first (a thread's activity moves when it is created
    and whenever a message is saved into it), paged the same way with ``next`` (no ``offset``):
    a thread that gets a message between pages moves to the top, shown in the next pass, not
    again in this one; every other thread shows once."""
    if order == "newest":
        if offset:
            raise InvalidInputError("order=newest pages with after, not offset", argument="offset")
        before = None if after is None else _newest_cursor(after)
        resource, newest = await principal.newest_batch(service.memory, resource_id, limit=limit, before=before)
        listed = {"resource_id": resource, "threads": [thread_json(t) for t in newest]}
        full = len(newest) == limit and newest.next_before is not None
        return listed | {"next": _next_newest(newest.next_before)} if full else listed  # type: ignore[arg-type]
    if after is None:
        resource, page = await principal.thread_page(service.memory, resource_id, limit=limit, offset=offset)
    else:
        if offset:
            raise InvalidInputError("Send after or offset, not both: after starts the page by itself.", argument="offset")
        last_id, last_created = _thread_cursor(after)
        resource, page, _ = await principal.thread_batch(
            service.memory, resource_id, limit=limit, after=last_id, since=last_created
        )
    found = {"resource_id": resource, "threads": [thread_json(t) for t in page]}
    # only on a full page: a listing that fits in one page answers exactly as it did before cursors
    return found | {"next": _next_threads(page[-1])} if len(page) == limit else found


def _next_threads(thread: Thread) -> str:
    """The cursor of the page after ``thread``: its id, and its creation time (where the listing
    goes on when it is deleted meanwhile), as URL-safe text."""
    data = json.dumps([thread.id, thread.created_at.isoformat()], ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _next_newest(before: str) -> str:
    """The cursor of the newest-first page after one whose ``next_before`` is ``before``."""
    data = json.dumps(["newest", before], ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _newest_cursor(text: str) -> str:
    try:
        kind, before = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if kind != "newest" or not isinstance(before, str) or not before:
            raise ValueError(text)
    except (ValueError, TypeError):
        raise InvalidInputError("after: not a 'next' this listing gave", argument="after") from None
    return before


def _thread_cursor(text: str) -> tuple[str, datetime]:
    try:
        thread_id, created = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        instant = datetime.fromisoformat(created)
        if not isinstance(thread_id, str) or instant.tzinfo is None:
            raise ValueError(text)
    except (ValueError, TypeError):  # binascii.Error and json's errors are ValueErrors
        raise InvalidInputError("after: not a 'next' this listing gave", argument="after") from None
    return thread_id, instant


@router.get("/threads/{thread_id}", tags=["threads"])
async def get_thread(thread_id: str, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    return thread_json(await principal.thread(service.memory, thread_id))


@router.delete("/threads/{thread_id}", tags=["threads"])
async def delete_thread(thread_id: str, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    try:
        await principal.thread(service.memory, thread_id)
    except ThreadNotFoundError:
        # A delete of it that a crash cut off (the server killed midway): its row is gone, the
        # rest not yet. The request retried finishes it, for a key that may see that thread.
        cut_off = await service.memory.unfinished_delete(thread_id)
        if cut_off is None or not principal.sees(cut_off):
            raise
    return {"deleted": await service.memory.delete_thread(thread_id, actor=principal.actor)}


# -- messages -------------------------------------------------------------------------------
@router.post("/threads/{thread_id}/messages", status_code=201, tags=["messages"])
async def append_messages(thread_id: str, body: MessagesIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    thread = await principal.thread(service.memory, thread_id)
    messages = _parsed(body, await _call_history(service, thread_id, body))
    _owned(principal, messages, thread)
    saved = await service.memory.save_messages(thread_id, messages)
    return {"messages": [message_json(m) for m in saved]}


@router.get("/threads/{thread_id}/messages", tags=["messages"])
async def list_messages(
    thread_id: str, principal: Caller, service: ServiceDep,
    after_seq: Annotated[int, Query(ge=0, le=2**53)] = 0, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:  # fmt: skip
    await principal.thread(service.memory, thread_id)
    page = await service.memory.list_messages(thread_id, after_seq=after_seq, limit=limit + 1)
    more = len(page) > limit
    page = page[:limit]
    next_seq = page[-1].seq if more and page else None
    return {"messages": [message_json(m) for m in page], "next_after_seq": next_seq}


# -- turns ----------------------------------------------------------------------------------
@router.post("/threads/{thread_id}/turns", status_code=201, tags=["turns"])
async def begin_turn(thread_id: str, body: TurnIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    thread = await principal.thread(service.memory, thread_id)
    messages = _parsed(body, await _call_history(service, thread_id, body))
    _owned(principal, messages, thread)
    turn = await service.memory.begin_turn(thread_id=thread_id, messages=messages, model=body.model)
    turn_id = await service.hold(turn, principal, thread_id)
    return {"turn_id": turn_id, "thread_id": thread_id, "context": context_json(turn.context)}


async def _begun_on(service: Service, turn_id: str, entry: OpenTurn, thread: Thread) -> None:
    """The turn's thread is still the one it began on. One deleted and made again under its id
    since is another thread: the turn (its context holds the deleted thread's messages) is let go
    here, nothing saved, and is not found (TurnNotFoundError), like an ended one."""
    began = entry.turn.thread
    now = (thread.created_at, thread.org_id, thread.resource_id)
    if now != (began.created_at, began.org_id, began.resource_id):
        await service.release(turn_id)
        raise TurnNotFoundError(turn_id)


@router.post("/turns/{turn_id}/step", tags=["turns"])
async def step_turn(turn_id: str, body: StepIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    entry = await service.held(turn_id, principal)
    thread = await principal.thread(service.memory, entry.thread_id)
    await _begun_on(service, turn_id, entry, thread)
    messages = _parsed(body, entry.turn.context.messages)
    _owned(principal, messages, thread)
    context = await entry.turn.step(messages)
    return {"turn_id": turn_id, "thread_id": entry.thread_id, "context": context_json(context)}


@router.post("/turns/{turn_id}/end", tags=["turns"])
async def end_turn(turn_id: str, body: EndIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    entry = await service.held(turn_id, principal)
    thread = await principal.thread(service.memory, entry.thread_id)
    await _begun_on(service, turn_id, entry, thread)
    messages = _parsed(body, entry.turn.context.messages)
    _owned(principal, messages, thread)
    async with service.ending(turn_id):  # a step or an end meanwhile waits for this one
        await service.release(turn_id)
        try:
            await entry.turn.end(messages)
        except (InvalidInputError, ThreadChangedError):
            # refused before anything was saved: the turn stays open for the end sent again
            if not entry.turn.ended:
                await service.hold_again(turn_id, entry, principal)
            raise
    context = await service.memory.get_context(entry.thread_id)
    return {"turn_id": turn_id, "thread_id": entry.thread_id, "context": context_json(context)}


# -- context, observations, recall ----------------------------------------------------------
@router.get("/threads/{thread_id}/context", tags=["memory"])
async def get_context(thread_id: str, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    await principal.thread(service.memory, thread_id)
    return context_json(await service.memory.get_context(thread_id))


@router.get("/threads/{thread_id}/observations", tags=["memory"])
async def get_observations(thread_id: str, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    await principal.thread(service.memory, thread_id)
    record = await service.memory.get_record(thread_id)
    return {
        "thread_id": thread_id,
        "observations": await service.memory.get_observations(thread_id),  # what its context shows
        "record": _record_json(record, thread_id, service) if record else None,
    }


def _record_json(record: ObservationRecord, thread_id: str, service: Service) -> dict[str, Any]:
    """``record`` as ``thread_id`` may read it: in resource scope without sharing, only its own
    observations, per-thread state, buffered chunks and part of the buffered reflection (made
    over every thread's sections: the record is the resource's)."""
    config = service.memory.config
    if record.scope != "resource" or config.share_threads_in_resource:
        return record.model_dump(mode="json")
    reflection = record.buffered_reflection
    if reflection is not None:
        reflection = reflection.model_copy(update={"text": visible_sections(reflection.text, thread_id, shared=False)})
    shown = record.model_copy(update={
        "active_observations": observations_shown(record, thread_id, config),
        "threads": {k: v for k, v in record.threads.items() if k == thread_id},
        "buffered_chunks": tuple(c for c in record.buffered_chunks if c.thread_id == thread_id),
        "buffered_reflection": reflection,
    })  # fmt: skip
    return shown.model_dump(mode="json")


@router.get("/threads/{thread_id}/generations", tags=["memory"])
async def list_generations(
    thread_id: str, principal: Caller, service: ServiceDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> dict[str, Any]:
    await principal.thread(service.memory, thread_id)
    records = await service.memory.list_generations(thread_id, limit=limit)
    return {"thread_id": thread_id, "generations": [_record_json(r, thread_id, service) for r in records]}


@router.post("/threads/{thread_id}/recall", tags=["memory"])
async def recall(thread_id: str, body: RecallIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """``Memory.recall``: a failure answers its status in the API's error shape (the recall
    *tool* answers ``{"error": ...}`` with a result, for a model to correct itself)."""
    await principal.thread(service.memory, thread_id)
    if body.target_thread_id is not None:
        await principal.thread(service.memory, body.target_thread_id)
    result = await service.memory.recall(thread_id, **body.model_dump(exclude_none=True))
    return result.as_dict()


# -- status and receipts (issue 21) ---------------------------------------------------------
#: The longest a status stream stays open (its ``max_s``); a client reconnects for more.
STREAM_MAX_S = 3600.0
#: A comment line this often keeps an idle status stream (and the proxies on its way) open.
KEEPALIVE_S = 15.0


@router.get("/threads/{thread_id}/status", tags=["memory"])
async def thread_status(thread_id: str, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """The thread's memory state now (``Memory.status``): ``phase``, the window against its
    thresholds, buffered observations with their seq spans, memory work in flight, backoff."""
    await principal.thread(service.memory, thread_id)
    return (await service.memory.status(thread_id)).data()


def _sse(event: str, data: dict[str, Any], event_id: int | None = None) -> str:
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n"


#: Why a stream may stop before ``max_s``: None while it may go on, else its ``end`` reason.
StreamCheck = Callable[[], Awaitable[str | None]]


async def status_events(
    memory: Memory, thread_id: str, *, max_s: float, interval_s: float, keepalive_s: float = KEEPALIVE_S,
    check: StreamCheck | None = None,
) -> AsyncIterator[str]:
    """Server-sent events from ``Memory.watch``: a ``status`` event now and at each change, a
    comment every ``keepalive_s`` while nothing changes, and an ``end`` event after ``max_s``.
    The watch runs in its own task (cancelled when the stream ends or the client goes away).
    ``check`` runs before each status and keep-alive is sent: a reason from it ends the stream
    with that reason instead (the key revoked, the thread deleted meanwhile)."""
    changes: asyncio.Queue[ThreadStatus] = asyncio.Queue()

    async def pump() -> None:
        async for status in memory.watch(thread_id, interval_s=interval_s):
            await changes.put(status)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_s
    watcher = loop.create_task(pump())
    count = 0
    stopped: str | None = None
    try:
        while (left := deadline - loop.time()) > 0 and not watcher.done():
            try:
                status = await asyncio.wait_for(changes.get(), min(left, keepalive_s))
            except TimeoutError:
                status = None
            if check is not None:
                try:
                    stopped = await check()
                except Exception:  # the store failing: the stream ends as a failed watch ends it
                    stopped = "error"
                if stopped is not None:
                    break
            if status is None:
                yield ": keep-alive\n\n"
                continue
            count += 1
            yield _sse("status", status.data(), count)
        failed = watcher.done() and not watcher.cancelled() and watcher.exception() is not None
        yield _sse("end", {"reason": stopped or ("error" if failed else "max_s"), "events": count})
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


@router.get(
    "/threads/{thread_id}/status/stream", tags=["memory"], response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "Server-sent events: status, end"}},
)  # fmt: skip
async def thread_status_stream(
    thread_id: str, principal: Caller, service: ServiceDep, request: Request,
    max_s: Annotated[float, Query(gt=0, le=STREAM_MAX_S, description="Close the stream after this many seconds.")] = 60.0,
    interval_s: Annotated[float, Query(ge=0.05, le=60, description="Read the store this often.")] = 0.5,
) -> StreamingResponse:  # fmt: skip
    """The thread's status as server-sent events (``Memory.watch``): an ``event: status`` with the
    same data as ``GET …/status`` now and at each change, until ``max_s`` seconds have passed
    (then ``event: end``, reason ``max_s``) or the client goes away. The key and the thread are
    checked again before each event: a key revoked meanwhile ends the stream (reason
    ``revoked``), and so does the thread deleted (``not_found``), even when its id was taken
    again since."""
    thread = await principal.thread(service.memory, thread_id)
    token = bearer_token(request.headers.get("authorization"), request.headers.get("x-api-key"))
    return StreamingResponse(
        status_events(service.memory, thread_id, max_s=max_s, interval_s=interval_s,
                      check=functools.partial(_still_readable, service, token, thread)),
        media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )  # fmt: skip


async def _still_readable(service: Service, token: str | None, thread: Thread) -> str | None:
    """None while ``token``'s key is live and still sees ``thread`` (the very thread: one made
    again under its id after a delete is another); else why a read of it ends."""
    try:
        principal = await authenticate(service.keys, token, dev=service.settings.dev)
    except AuthenticationError:
        return "revoked"
    try:
        now = await principal.thread(service.memory, thread.id)
    except ThreadNotFoundError:
        return "not_found"
    return None if now.created_at == thread.created_at and now.org_id == thread.org_id else "not_found"


async def visible_message(principal: Principal, memory: Memory, message_id: str) -> Message:
    """The message, if this key may see its thread; else MessageNotFoundError, as for a missing one."""
    found = await memory.store.get_messages([message_id]) if message_id else []
    if not found or found[0].thread_id is None:
        raise MessageNotFoundError(message_id)
    thread = await memory.store.get_thread(found[0].thread_id)
    if thread is None or not principal.sees(thread):
        raise MessageNotFoundError(message_id)
    return found[0]


async def visible_receipt(principal: Principal, memory: Memory, message_id: str) -> tuple[Message, Receipt]:
    """The message and the receipt of the context it was made from (404 when it has none)."""
    message = await visible_message(principal, memory, message_id)
    receipt = await memory.receipt(message.id)
    if receipt is None:
        raise NotFoundError(
            f"Message '{message_id}' has no receipt (only a reply saved through a turn keeps one)."
        )
    return message, receipt


def _message_ref(message: Message, text: bool) -> dict[str, Any]:
    ref: dict[str, Any] = {"id": message.id, "thread_id": message.thread_id, "seq": message.seq, "role": message.role}
    if text:
        ref["text"] = message.text
    return ref


async def receipt_json(
    principal: Principal, memory: Memory, message: Message, receipt: Receipt, *, resolve: bool = False,
    text: bool = False, per_group: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The receipt's data; with ``resolve`` each group's covered messages and the raw tail's as
    ids and seqs (``text``: with their text). Messages of threads the key may not see (none in
    practice: a context shows only its own resource's threads) are left out."""
    out: dict[str, Any] = {
        "message_id": message.id, "thread_id": message.thread_id, "receipt": receipt.data(),
        "total_tokens": receipt.total_tokens,
    }  # fmt: skip
    if resolve:
        sources = await memory.receipt_sources(receipt, per_group=None if per_group is None else per_group + 1)
        seen: dict[str, bool] = {}

        async def allowed(m: Message) -> bool:
            if m.thread_id is None:
                return False
            if m.thread_id not in seen:
                thread = await memory.store.get_thread(m.thread_id)
                seen[m.thread_id] = thread is not None and principal.sees(thread)
            return seen[m.thread_id]

        out["groups"] = [
            {"id": g.id, "thread_id": g.thread_id, "first_seq": g.first_seq, "last_seq": g.last_seq, "kind": g.kind,
             "messages": [_message_ref(m, text) for m in sources.get(g.id, [])[:per_group] if await allowed(m)],
             "truncated": per_group is not None and len(sources.get(g.id, [])) > per_group}
            for g in receipt.groups
        ]  # fmt: skip
        out["raw"] = [_message_ref(m, text) for m in sources.get("raw", []) if await allowed(m)]
    return out


@router.get("/messages/{message_id:path}/receipt", tags=["memory"])
async def message_receipt(
    message_id: str, principal: Caller, service: ServiceDep, resolve: bool = False, text: bool = False,
    per_group: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> dict[str, Any]:
    """What the context an assistant reply was made from held (``Memory.receipt``): generation,
    observation groups with their seq spans, raw messages, knowledge records, pins, tokens per
    section and the context's hash. ``resolve=true``: each group's covered messages and the raw
    messages (``Memory.receipt_sources``) as ids and seqs; ``text=true``: with their text. A group
    lists at most ``per_group`` messages (the first of its span; ``truncated`` says when more)."""
    message, receipt = await visible_receipt(principal, service.memory, message_id)
    return await receipt_json(principal, service.memory, message, receipt, resolve=resolve, text=text,
                              per_group=per_group)  # fmt: skip


# -- knowledge ------------------------------------------------------------------------------
def knowledge_scope(principal: Principal, resource_id: str | None = None) -> str:
    """The knowledge scope a key reads from: its org, or its resource within the org."""
    if principal.org_id is None:
        raise PermissionDeniedError("Knowledge is scoped by org: use an API key (not --dev without one).")
    # one segment, as a resource's: a key of org 'acme/resource:alice' (made before keys create
    # refused such an org) would read and write alice's knowledge in org acme
    addressable(principal.org_id, "org_id")
    resource = resource_id if principal.resource_id is None else principal.resource(resource_id)
    if resource:  # one segment: 'alice/thread:t1' would name a thread's scope, not a resource's
        addressable(resource, "resource_id")
    return f"org:{principal.org_id}" + (f"/resource:{resource}" if resource else "")


@router.get("/knowledge/search", tags=["knowledge"])
async def search_knowledge(
    principal: Caller, service: ServiceDep, q: Annotated[str, Query(min_length=1, max_length=2000)],
    resource_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> dict[str, Any]:  # fmt: skip
    if service.knowledge is None:
        raise InvalidInputError("This server has no knowledge store (obsmem serve --knowledge …)", argument="q")
    scope = knowledge_scope(principal, resource_id)
    hits = await service.knowledge.search(q, scope, limit=limit)
    return {"scope": scope, "hits": [
        {"kind": h.kind, "id": h.id, "node_id": h.node_id, "text": h.text, "scope": h.scope, "score": h.score}
        for h in hits
    ]}  # fmt: skip


class RememberIn(_Body):
    text: Annotated[str, Field(min_length=1, max_length=10_000)]
    subject: Annotated[str, Field(min_length=1, max_length=200)] = "user"
    resource_id: Id | None = None
    thread_id: Id | None = None
    candidate: bool = False


@router.post("/knowledge", status_code=201, tags=["knowledge"])
async def remember(body: RememberIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """Capture a fact about ``subject`` into the knowledge store: verified (an explicit request),
    or with ``candidate`` a candidate waiting in the review queue."""
    principal.may_write()
    resource = body.resource_id
    if body.thread_id is not None:
        resource = (await principal.thread(service.memory, body.thread_id)).resource_id
    return await capture_fact(service, principal, body.text, body.subject, resource, body.thread_id,
                              candidate=body.candidate)  # fmt: skip


def acting(knowledge: Knowledge, principal: Principal) -> Knowledge:
    """``knowledge`` writing as ``principal`` (``key:<key id>``) in the audit log, as the
    inspector does: what a key changes through the API is never logged as the service's own."""
    return Knowledge(knowledge.store, embedder=knowledge.embedder, actor=principal.actor,
                     reembed=knowledge.index.reembed)  # converts others' vectors only if the server's does


async def capture_fact(
    service: Service, principal: Principal, text: str, subject: str, resource_id: str | None, thread_id: str | None,
    *, candidate: bool = False,
) -> dict[str, Any]:
    """One fact into the knowledge store at the key's scope (shared by REST and MCP)."""
    if service.knowledge is None:
        raise InvalidInputError("This server has no knowledge store (obsmem serve --knowledge …)", argument="text")
    if not text.strip():
        raise InvalidInputError("Nothing to remember: text is empty", argument="text")
    scope = knowledge_scope(principal, resource_id)
    text = service.memory.redacted(text)  # the privacy boundary, as for a pin
    knowledge = acting(service.knowledge, principal)
    node = await knowledge.node(subject, "entity", scope, reason="remembered through the service")
    record = await knowledge.append(
        node.id, text, scope, reason="remembered through the service", source_thread_id=thread_id,
        trust=TrustState.CANDIDATE if candidate else TrustState.VERIFIED,
    )  # fmt: skip
    return {"id": record.id, "node_id": node.id, "scope": scope, "text": text}


async def forget_for(
    service: Service, principal: Principal, value: str, *, thread_id: str | None = None,
    resource_id: str | None = None,
) -> dict[str, int]:
    """Forget ``value`` in a thread the key sees, or in every thread of a resource it may reach
    whole, and in the knowledge the key may change (its resource's; its org's for an org key):
    shared by REST and MCP. Audited as the key, unless obsmem's word for the key ('key:<id>',
    'dev') holds the value by chance (a user surnamed Key): as the service then, not refused."""
    from obsmem.knowledge.store.erasure import holds_value

    principal.may_write()
    # Memory.forget alone also reaches the knowledge of the scopes above the thread (the org's,
    # shared by every resource); a key bound to a resource may not change those records.
    within = None if principal.org_id is None else knowledge_scope(principal)
    actor: str | None = principal.actor
    if holds_value(principal.actor, value):
        actor = None  # Memory.forget's default actor
    if thread_id is not None:
        thread = await principal.thread(service.memory, thread_id)
        return await service.memory.forget(value, thread_id=thread.id, knowledge_within=within, actor=actor)
    if resource_id is None and principal.resource_id is None:
        raise PermissionDeniedError("Name the thread_id or resource_id to forget in.")
    resource = await principal.resource_whole(service.memory, resource_id)  # forget reads its threads
    if principal.org_id is not None and not await resource_orgs(service.memory.store, resource):
        # No thread: a resource the knowledge store holds nothing of in the key's org is not found,
        # as DELETE and export answer (Memory.forget would refuse the scope it falls back on,
        # org:default, as outside the key's: a 400 naming a scope the client never sent).
        from obsmem.knowledge.lifecycle import stored_scopes

        knowledge = service.memory.knowledge
        if knowledge is None or not await stored_scopes(knowledge, resource_id=resource,
                                                        within=f"org:{principal.org_id}"):  # fmt: skip
            raise ResourceNotFoundError(resource)
    return await service.memory.forget(value, resource_id=resource, knowledge_within=within, actor=actor)


# -- resources ------------------------------------------------------------------------------
@router.delete("/resources/{resource_id}", tags=["resources"])
async def delete_resource(resource_id: str, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """Delete a resource: its threads and everything stored for them, and its knowledge in the
    key's org (only there: the same id's knowledge in another org is another tenant's). A
    resource whose threads are all deleted but that still has knowledge in the key's org is
    deleted too; one with neither is not found (404), whatever another org holds."""
    from obsmem.knowledge.lifecycle import stored_scopes

    principal.may_write()
    resource, threads = await principal.resource_threads(service.memory, resource_id)
    # a resource id no knowledge scope can hold (the gateway's 'tenant/42') has none: the org is
    # the ceiling then (read as a scope, 'a/thread:t1' would reach resource a's knowledge)
    within = None if principal.org_id is None else f"org:{principal.org_id}" + (
        f"/resource:{resource}" if scopable(resource) else ""
    )
    knowledge = service.memory.knowledge
    if not threads:
        # Threads whose rows a delete cut off by a crash took (the server killed midway): the
        # request retried finishes it, for a key that may see every one of them.
        cut_off = await service.memory.unfinished_deletes(resource)
        if cut_off and all(principal.sees(t) for t in cut_off):
            threads = cut_off
    if not threads and (knowledge is None or not await stored_scopes(knowledge, resource_id=resource, within=within)):
        raise ResourceNotFoundError(resource)
    deleted = await service.memory.delete_resource(resource, knowledge_within=within, actor=principal.actor)
    return {"resource_id": resource, "deleted": deleted}


class ForgetIn(_Body):
    value: Annotated[str, Field(min_length=1, max_length=10_000)]


@router.post("/threads/{thread_id}/forget", tags=["threads"])
async def forget_in_thread(
    thread_id: str, body: ForgetIn, principal: Caller, service: ServiceDep
) -> dict[str, Any]:
    """Forget every occurrence of ``value`` in the thread (messages, tool calls and results,
    observations of every generation, working memory) and in the knowledge the key may change:
    what :meth:`obsmem.Memory.forget` removes, counted by kind."""
    counts = await forget_for(service, principal, body.value, thread_id=thread_id)
    return {"thread_id": thread_id, "forgotten": counts}


@router.post("/resources/{resource_id}/forget", tags=["resources"])
async def forget_in_resource(
    resource_id: str, body: ForgetIn, principal: Caller, service: ServiceDep
) -> dict[str, Any]:
    """Forget every occurrence of ``value`` in every thread of the resource and in the knowledge
    the key may change (a resource holding another org's thread is not found)."""
    counts = await forget_for(service, principal, body.value, resource_id=resource_id)
    return {"resource_id": resource_id, "forgotten": counts}


Since = Annotated[str | None, Query(max_length=40, description="From this UTC day (2025-03-01) or ISO instant.")]
Until = Annotated[str | None, Query(max_length=40, description="Before this UTC day or ISO instant.")]


def _instant(text: str | None, argument: str) -> datetime | date | None:
    if text is None:
        return None
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        value = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"Invalid {argument}: {text!r} is not a date or an ISO datetime",
                                argument=argument) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def ledger_json(report: UsageReport) -> dict[str, Any]:
    """The cost ledger's report: rows per (UTC day, role, model), the total, the prices' date."""
    return {
        "rows": [dataclasses.asdict(row) for row in report.rows],
        "by_role": [dataclasses.asdict(row) for row in report.by("role")],
        "total": dataclasses.asdict(report.total()),
        "prices_as_of": PRICES_AS_OF,
    }


@router.get("/threads/{thread_id}/usage", tags=["threads"])
async def thread_usage(
    thread_id: str, principal: Caller, service: ServiceDep, since: Since = None, until: Until = None
) -> dict[str, Any]:
    """What the thread's memory model calls cost (the cost ledger; estimates)."""
    thread = await principal.thread(service.memory, thread_id)
    report = await service.memory.usage(
        thread_id=thread.id, since=_instant(since, "since"), until=_instant(until, "until")
    )
    return {"thread_id": thread.id, "ledger": ledger_json(report)}


@router.get("/resources/{resource_id}/usage", tags=["resources"])
async def usage(
    resource_id: str, principal: Caller, service: ServiceDep, since: Since = None, until: Until = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Threads in per_thread.")] = 100,
    after: Annotated[str | None, Query(min_length=1, max_length=1000, description="The previous page's 'next'.")] = None,
) -> dict[str, Any]:  # fmt: skip
    """What memory holds for a resource: threads, messages and tokens observed (resource-wide);
    under ``per_thread`` a page of its threads (``limit``, oldest first; ``next``, None on the
    last page, is the ``after`` of the next) with their messages, observation tokens, tokens
    observed so far, pending (unobserved) tokens and generations; and under ``ledger`` what its
    memory model calls cost (the cost ledger, ``since`` / ``until`` bounding it). The totals are
    numbers the store counts (:func:`~obsmem.storage.contract.resource_totals`: no thread, message
    or record read for them); the page reads its threads, their heads and their message counts."""
    memory = service.memory
    cursor = _thread_cursor(after) if after is not None else None  # a bad one refused before any read
    resource = await principal.resource_whole(memory, resource_id)
    totals = await resource_totals(memory.store, resource, scope=memory.config.scope)
    if not totals.threads:
        raise ResourceNotFoundError(resource)
    # a thread of another org made since the check must not be counted: its orgs checked again,
    # as before (when every thread read after the check was), no thread row read
    orgs = await resource_orgs(memory.store, resource)
    if principal.org_id is not None and any(org != principal.org_id for org in orgs):
        raise ResourceNotFoundError(resource)
    last_id, last_created = cursor if cursor else (None, None)
    _, page, _ = await principal.thread_batch(memory, resource, limit=limit + 1, after=last_id, since=last_created)
    shown, more = page[:limit], len(page) > limit
    rows: list[dict[str, Any]] = []
    heads: dict[str, ObservationRecord | None] = {}  # by lineage: in resource scope the page shares one
    for thread in shown:
        lineage = memory.engine.lineage(thread)
        if lineage not in heads:
            heads[lineage] = await memory.store.get_head(lineage)
        record = heads[lineage]
        try:
            messages = await memory.store.count_messages(thread.id)
        except ThreadNotFoundError:  # deleted since the page was read
            continue
        # generations are numbered from 0 and only ever deleted all together: the head's number
        # counts them, none read (a listing read up to 1,000 whole records a thread)
        generations = record.generation + 1 if record else 0
        rows.append({
            "thread_id": thread.id, "messages": messages,
            "observation_tokens": record.observation_tokens if record else 0,
            "total_tokens_observed": record.total_tokens_observed if record else 0,
            "pending_message_tokens": record.pending_message_tokens if record else 0,
            "generations": generations,
        })  # fmt: skip
    report = await memory.usage(
        resource_id=resource, since=_instant(since, "since"), until=_instant(until, "until")
    )
    return {
        "resource_id": resource, "threads": totals.threads, "messages": totals.messages,
        "total_tokens_observed": totals.tokens_observed, "per_thread": rows,
        "next": _next_threads(shown[-1]) if more else None, "ledger": ledger_json(report),
    }  # fmt: skip


@router.get("/resources/{resource_id}/export", response_class=PlainTextResponse, tags=["resources"])
async def export(resource_id: str, principal: Caller, service: ServiceDep) -> PlainTextResponse:
    resource, threads = await principal.resource_threads(service.memory, resource_id)
    if not threads:
        raise ResourceNotFoundError(resource)
    out = io.StringIO()
    # (an id no knowledge scope can name, 'tenant/42', exports no knowledge: export_resource)
    await export_resource(service.memory.store, resource, out, knowledge=service.knowledge)
    return PlainTextResponse(out.getvalue(), media_type="application/x-ndjson")


#: An export this long or longer is read for its owner in a thread (:func:`import_`).
_OFF_LOOP_CHARS = 256 * 1024


def _export_owner(text: str) -> tuple[str, set[str | None]]:
    """The resource an export holds and the orgs of its threads (read before anything is written)."""
    resource: str | None = None
    orgs: set[str | None] = set()
    # lines at "\n" only, as the import reads them: U+2028 or U+0085 inside a message's text
    # (JSON writes them raw) is no line break
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except RecursionError:  # nested past Python's limit: refused, not a 500 (and the import never reads it)
            raise InvalidInputError(f"export line {number} is JSON nested too deeply", argument="export") from None
        except ValueError:
            raise InvalidInputError(f"export line {number} is not JSON", argument="export") from None
        if not isinstance(item, dict):
            raise InvalidInputError(f"export line {number} is not an object", argument="export")
        if number == 1:
            resource = item.get("resource_id") if isinstance(item.get("resource_id"), str) else None
        elif item.get("kind") == "thread" and isinstance(item.get("data"), dict):
            orgs.add(item["data"].get("org_id"))
    if not resource:
        raise InvalidInputError("the export has no header naming its resource", argument="export")
    return resource, orgs


@router.post("/resources/import", status_code=201, tags=["resources"])
async def import_(body: ImportIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """Import an export. Its knowledge goes no further than the key: a resource key writes its
    resource's rows, and its org's only as they are already stored (so its own export comes back
    whole); an org key writes its org's."""
    principal.may_write()
    # every line parsed: a large export (up to max_import_bytes) is read in a thread, not on the loop
    short = len(body.export) < _OFF_LOOP_CHARS
    exported, orgs = _export_owner(body.export) if short else await asyncio.to_thread(_export_owner, body.export)
    target = body.into_resource or exported
    await principal.resource_owned(service.memory, target)  # (an import refuses a resource with threads)
    if principal.org_id is not None and orgs - {principal.org_id}:
        raise PermissionDeniedError("The export holds threads of another org; this key imports only its own org's.")
    reach = None if principal.org_id is None else knowledge_scope(principal)
    try:
        summary = await import_resource(
            service.memory.store, io.StringIO(body.export), knowledge=service.knowledge,
            into_resource=body.into_resource, knowledge_reach=reach,
        )  # fmt: skip
    except KnowledgeReachError as exc:
        raise PermissionDeniedError(str(exc)) from None
    return {"resource_id": summary.resource_id, "counts": summary.counts, "skipped": summary.skipped,
            "forgotten": summary.forgotten}  # fmt: skip


# -- keys (admin) ---------------------------------------------------------------------------
@router.post("/keys", status_code=201, tags=["keys"])
async def create_key(body: KeyIn, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """A new key, shown once. An admin key bound to a resource creates keys of that resource only."""
    org = principal.may_create_key(body.org_id, body.resource_id)
    await principal.may_bind(service.memory, service.keys, org, body.resource_id)
    key, secret = await service.keys.create(
        org, resource_id=body.resource_id, read_only=body.read_only, admin=body.admin, label=body.label
    )
    return {**key.public(), "secret": secret}


@router.get("/keys", tags=["keys"])
async def list_keys(
    principal: Caller, service: ServiceDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after: Annotated[str | None, Query(min_length=1, max_length=200, description="The previous page's 'next'.")] = None,
) -> dict[str, Any]:  # fmt: skip
    """The keys this admin key manages: its org's, or its resource's when it is bound to one,
    oldest first, ``limit`` a page; ``next`` (None on the last page) is the ``after`` of the next.
    Only the page's keys are read."""
    principal.may_manage_keys()
    if after is not None:
        cursor = await service.keys.get(after)
        if cursor is None or not principal.manages(cursor):  # another org's key: as a missing one
            raise InvalidInputError(f"after: no key '{after}' in this listing", argument="after")
    page = await service.keys.page(principal.org_id, resource_id=principal.resource_id, limit=limit + 1, after=after)
    shown = [k for k in page[:limit] if principal.manages(k)]  # (the query's filter; checked again)
    return {"keys": [k.public() for k in shown], "next": page[limit - 1].key_id if len(page) > limit else None}


@router.delete("/keys/{key_id}", tags=["keys"])
async def revoke_key(key_id: str, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """Revoke a key this admin key manages; any other is reported like a missing one."""
    principal.may_manage_keys()
    key = await service.keys.get(key_id)
    # a key's org and resource never change, so checking before the compare-and-set is safe
    managed = key is not None and principal.manages(key)
    if not managed or not await service.keys.revoke(key_id, org_id=principal.org_id):
        raise NotFoundError(f"No live key '{key_id}' in this org.")
    return {"key_id": key_id, "revoked": True}


# -- a thread named by an id holding '/' ------------------------------------------------------
# The gateway takes any thread id a client names ('user/1/chat'); REST creates none with a '/'.
# Its '/' arrives decoded ('user%2F1%2Fchat' reads 'user/1/chat'), so the routes above never
# match it: these, declared last (after every more specific route under /threads), read and
# delete such a thread by its whole id, with the same checks. Delete means gone for every thread.
class _SlashedIdRoute(SegmentRoute):
    """``/threads/{thread_id:path}``, except where the path ends in a '/' the client wrote (not
    ``%2F``): such a path names no id ('POST /api/threads/', 'GET /api/threads/t1/'), and goes on
    to Starlette's redirect without the trailing slash, as it did before these routes; matched
    here, it was a 405 (create, save), a 400 (list) or a 404 for a thread that exists (delete)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if isinstance(raw, bytes) and raw.endswith(b"/"):
            return Match.NONE, {}
        return super().matches(scope)


for _endpoint, _method in ((get_thread, "GET"), (delete_thread, "DELETE")):
    router.add_api_route(
        "/threads/{thread_id:path}", _endpoint, methods=[_method], tags=["threads"], include_in_schema=False,
        route_class_override=_SlashedIdRoute,
    )
