"""The OpenAI-compatible memory gateway: ``POST /v1/chat/completions`` and ``POST /v1/responses``.

A client (the official ``openai`` SDK, unmodified: ``base_url=<server>/v1``, ``api_key=<obsmem
key>``) names its thread in the ``X-Obsmem-Thread`` header or ``metadata["thread_id"]``, and its
resource in ``X-Obsmem-Resource``, ``metadata["resource_id"]`` or ``user`` (default: the key's
resource). For each request the gateway

1. saves the new input: the messages after the last assistant message of the request (so a
   client may send its whole history, or only the new message; earlier answers are in memory
   already because the gateway saved them). On a thread that holds nothing yet the whole
   history is saved (a client moving onto the gateway keeps its conversation); a retried
   request whose input the thread already ends with, unanswered, saves nothing again. A thread id
   taken by another resource than the request names is refused (409), as over REST. The
   client's system / developer messages
   (``instructions`` on the Responses API) are sent along each time and not stored;
2. builds the context with :meth:`Memory.begin_turn` (observations + raw tail), converted by
   :mod:`obsmem.convert`;
3. forwards the request, with the context in place of the history, to the configured upstream
   (any OpenAI-compatible server) with the *server's* upstream key; the client's key is never
   sent upstream, and the upstream key never leaves the server. With ``--upstream-kind anthropic``
   Chat Completions are translated to and from the Anthropic Messages API
   (:mod:`obsmem.server.anthropic_upstream`);
4. streams the upstream answer back unchanged (bytes as received; the last chunk only once the
   answer is saved, so the next request finds it) and saves it (``turn.end``), which starts memory
   work in the background (buffered observation and
   reflection run as Memory's background tasks, or on workers with ``background="queue"``).

A streamed answer is saved only when it completed: on Chat Completions choice 0 got a
``finish_reason`` or ``[DONE]`` came, on the Responses API ``response.completed`` or
``response.incomplete`` (saved as the same answer not streamed would be), over an Anthropic
upstream ``message_stop``. A stream cut off, failed upstream, past the deadline or holding an
event the gateway cannot read (relayed all the same: the relay never breaks on an event's shape)
saves no answer, so the client's retry of the same request is a retry (its input saved once).
One upstream exchange is bounded in all by ``upstream_total_timeout_s`` (each read by
``upstream_timeout_s``): past it a stream ends with an error event (``data: {"error": …}``, which
the ``openai`` client raises) and a whole answer is answered 504. A stream the upstream closes
before its answer's end (no ``finish_reason``, ``[DONE]`` or terminal Responses event) ends with
the same error event after what came. Reading stops at ``[DONE]`` (nothing follows it), so an
upstream that holds its connection open after it delays no answer. A Responses stream's terminal
event (OpenAI sends no ``[DONE]`` after it) is saved and sent at once, and the stream ended at most
:data:`TERMINAL_GRACE_S` after it (time for a ``[DONE]`` the upstream sends). The deadline holds for a client
that stops reading too (:class:`_Watchdog`): past it the upstream is let go and the turn ended.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, TypeGuard

import httpx
from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from obsmem import (
    InvalidInputError,
    Message,
    ThreadNotFoundError,
    FilePart,
    ReasoningPart,
    ToolCallPart,
    ToolResultPart,
    Turn,
    from_openai,
    from_openai_responses,
    to_openai,
    to_openai_responses,
)
from obsmem._http import mask_secret
from obsmem.om.selection import ANSWERED_LATE_KEY, UNANSWERED_KEY
from obsmem.server.access import Principal
from obsmem import telemetry
from obsmem.models.sse import parse_sse
from obsmem.server.anthropic_upstream import ANTHROPIC_VERSION, AnthropicStream, anthropic_request, chat_completion, sse_chunk
from obsmem.server.errors import ERROR_RESPONSES, ThreadIdTakenError, UpstreamError, error_body
from obsmem.server.rest import Caller, ServiceDep, call_history
from obsmem.storage.forgetting import forgotten_ids
from obsmem.turn import retried_input
from obsmem.server.service import Service

__all__ = ["ChatAnswer", "ResponsesAnswer", "UpstreamTimeoutError", "router"]

logger = logging.getLogger("obsmem.server.gateway")
_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    504: {**ERROR_RESPONSES[502], "description": "The upstream did not answer within upstream_total_timeout_s"},
}
router = APIRouter(prefix="/v1", tags=["gateway"], responses=_RESPONSES)


class UpstreamTimeoutError(UpstreamError):
    """The upstream did not finish its answer within the server's ``upstream_total_timeout_s``,
    or sent nothing for ``upstream_timeout_s`` (answered 504; in a stream, sent as its last event)."""

#: The most an upstream answer may carry (a whole response, or a stream in all); past it a
#: response is refused (502) and a stream ends with an error event.
MAX_UPSTREAM_BYTES = 32 * 1024 * 1024
#: How long a Responses stream waits, after its terminal event, for what may follow (a ``[DONE]``,
#: the upstream's close) before the gateway ends it: the answer is saved and sent at the event.
TERMINAL_GRACE_S = 1.0
#: An upstream answer this large or larger is decoded (and translated) in a thread, not on the loop.
_OFF_LOOP_BYTES = 256 * 1024
#: The longest line a streamed answer may hold.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: What ends a line of server-sent events: CRLF, LF or a lone CR (the SSE specification).
_LINE_END = re.compile(rb"\r\n|\r|\n")

_THREAD_KEYS = ("thread_id", "obsmem_thread_id")
_RESOURCE_KEYS = ("resource_id", "obsmem_resource_id")
_REQUEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
    }
}


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except RecursionError:  # nested past Python's recursion limit: refused, not a 500 with its traceback
        raise InvalidInputError("The request body is JSON nested too deeply", argument="body") from None
    except ValueError:
        raise InvalidInputError("The request body is not JSON", argument="body") from None
    if not isinstance(body, dict):
        raise InvalidInputError("The request body must be a JSON object", argument="body")
    return body


def _target(body: dict[str, Any], thread_header: str | None, resource_header: str | None) -> tuple[str, str | None]:
    """The thread and resource a request names; the obsmem keys leave ``metadata`` (not sent upstream)."""
    metadata = body.get("metadata")
    named: dict[str, Any] = {}
    if isinstance(metadata, dict):
        named = {k: metadata[k] for k in (*_THREAD_KEYS, *_RESOURCE_KEYS) if k in metadata}
        rest = {k: v for k, v in metadata.items() if k not in named}
        if rest:
            body["metadata"] = rest
        else:
            body.pop("metadata")
    thread = thread_header or next((named[k] for k in _THREAD_KEYS if k in named), None)
    resource = resource_header or next((named[k] for k in _RESOURCE_KEYS if k in named), None) or body.get("user")
    if not isinstance(thread, str) or not thread.strip() or len(thread) > 200:
        raise InvalidInputError(
            "Name the thread: header 'X-Obsmem-Thread' or metadata['thread_id'] (a non-empty string)",
            argument="thread_id",
        )
    if resource is not None and (not isinstance(resource, str) or not resource.strip() or len(resource) > 200):
        raise InvalidInputError("The resource must be a non-empty string", argument="resource_id")
    return thread, resource


async def _thread(service: Service, principal: Principal, thread_id: str, resource_id: str | None) -> None:
    """The thread, checked for this key; created in the key's org when it does not exist. A
    thread of another resource than the request names (an org key serving many end users, each
    naming a thread id) is refused as REST refuses it (ThreadIdTakenError): never another end
    user's conversation sent upstream, nor this one saved into theirs."""
    try:
        thread = await principal.thread(service.memory, thread_id)
        if resource_id is not None and thread.resource_id != principal.resource(resource_id):
            raise ThreadIdTakenError(thread_id)
    except ThreadNotFoundError:
        try:
            await principal.create_thread(service.memory, thread_id, resource_id)
        except ThreadIdTakenError:  # another tenant's thread: to this key it does not exist
            raise ThreadNotFoundError(thread_id) from None


def _after_last(items: list[Any], is_answer: Callable[[Any], bool]) -> list[Any]:
    last = max((i for i, item in enumerate(items) if is_answer(item)), default=-1)
    return items[last + 1 :]


async def _unsaved(service: Service, thread_id: str, conversation: list[Any], new: list[Any]) -> list[Any]:
    """What of a request to save: ``new`` (after the last answer: earlier answers are in memory,
    the gateway saved them), or the whole ``conversation`` when it carries a history on a thread
    that holds nothing yet (a client moving onto the gateway, a new thread id), which would
    otherwise be lost."""
    if len(new) == len(conversation) or await service.memory.store.list_messages(thread_id, limit=1):
        return new
    thread = await service.memory.store.get_thread(thread_id)
    if thread is not None and forgotten_ids(thread):
        return new  # emptied by forget, not new: the client's history holds what was forgotten
    return conversation


async def _retried(service: Service, thread_id: str, parsed: list[Message]) -> list[Message]:
    """The stored copies of ``parsed`` when the thread ends with exactly that input, unanswered:
    a client retrying a request whose attempt saved it and then failed (a 429, a dropped
    connection; the ``openai`` client retries by itself). Passed as copies, they are not saved
    again. The same words after an answer are a new message."""
    store = service.memory.store
    stored = await retried_input(store, thread_id, parsed, same=_same_parts)
    if stored is not None:
        return stored
    joined = await _held_outputs(service, thread_id, parsed)
    if joined is not None:
        return joined
    # Sent again with more: the results of parallel calls, of which the failed attempt held only
    # some (the upstream refused a call without its result). The results it saved, the thread's
    # newest messages, are taken as stored; the rest are saved after them. The thread's newest
    # message names where they end (results answer distinct calls): two reads at most.
    leading = next((i for i, m in enumerate(parsed) if m.role != "tool"), len(parsed))
    if leading == 0:
        return parsed
    try:
        newest = await store.list_messages(thread_id, limit=1, newest_first=True)
    except ThreadNotFoundError:
        return parsed
    held = next(
        (i + 1 for i, m in enumerate(parsed[: min(leading, len(parsed) - 1)]) if newest and _same_parts(newest[0], m)),
        0,
    )
    if held:
        stored = await retried_input(store, thread_id, parsed[:held], same=_same_parts)
        if stored is not None:
            return [*stored, *parsed[held:]]
    return parsed


async def _held_outputs(service: Service, thread_id: str, parsed: list[Message]) -> list[Message] | None:
    """Responses API outputs sent again with more: a request's consecutive outputs are one tool
    message, so the outputs a failed attempt saved (one tool message an attempt, the thread's
    newest, unanswered) are the first parts of the new request's first message, not messages of
    their own. Those are taken as stored and the rest saved after them; None where the thread
    does not end so."""
    first = parsed[0] if parsed else None
    if first is None or first.role != "tool" or len(first.parts) < 2:
        return None
    try:
        tail = await service.memory.store.list_messages(thread_id, limit=min(len(first.parts) - 1, 64),
                                                        newest_first=True)  # fmt: skip
    except ThreadNotFoundError:
        return None
    held: list[Message] = []
    for message in tail:
        if message.role != "tool":
            break
        held.insert(0, message)
    for start in range(len(held)):
        run = held[start:]
        parts = tuple(part for message in run for part in message.parts)
        rest = first.parts[len(parts) :]
        if rest and isinstance(rest[0], ToolResultPart) and first.parts[: len(parts)] == parts:
            return [*run, first.model_copy(update={"parts": rest}), *parsed[1:]]
    return None


def _same_parts(stored: Message, given: Message) -> bool:
    return stored.role == given.role and stored.parts == given.parts


#: What the gateway asks its upstream for: an unencoded body. It relays the bytes as they come,
#: under its own headers, and reads them to save the answer; httpx's default (gzip, deflate, …)
#: would have real upstreams compress them.
IDENTITY = "identity"


def _upstream(service: Service, path: str) -> tuple[str, dict[str, str]]:
    settings = service.settings
    if not settings.upstream_url:
        raise UpstreamError("This server has no upstream model configured (obsmem serve --upstream URL).")
    headers = {"Content-Type": "application/json", "Accept-Encoding": IDENTITY}
    if settings.upstream_key:
        headers["Authorization"] = f"Bearer {settings.upstream_key}"
    return settings.upstream_url.rstrip("/") + path, headers


def _masking(service: Service) -> Callable[[bytes], bytes]:
    """What makes relayed upstream bytes safe to hand a client: the server's upstream key masked
    (``sk-…WXYZ``) wherever the upstream echoed it (a 401 quoting the credential it refused, a
    proxy reflecting its request's headers). The README's promise is that the key never leaves
    the server, whatever the upstream sends."""
    spellings = [(s.encode(), shown.encode()) for s, shown in _spellings(service.settings.upstream_key)]

    def mask(data: bytes) -> bytes:
        for secret, shown in spellings:
            if secret in data:
                data = data.replace(secret, shown)
        return data

    return mask


def _spellings(key: str | None) -> list[tuple[str, str]]:
    """The upstream key as an upstream may write it back, each with its masked form: as it is,
    and with each '/' escaped ('\\/': PHP's json_encode and other JSON encoders; '\\u002F') and
    each '+' escaped ('\\u002B': .NET's System.Text.Json by default), which a key holding '/' or
    '+' (a base64 secret) has."""
    if not key:
        return []
    shown = mask_secret(key)
    slashes = ("/", "\\/", "\\u002F", "\\u002f") if "/" in key else ("/",)
    pluses = ("+", "\\u002B", "\\u002b") if "+" in key else ("+",)
    spelled = dict.fromkeys(key.replace("/", slash).replace("+", plus) for slash in slashes for plus in pluses)
    return [(spelling, shown) for spelling in spelled]


def _masked_text(service: Service, text: str) -> str:
    for secret, shown in _spellings(service.settings.upstream_key):
        text = text.replace(secret, shown)
    return text


class _WholeEvents:
    """The relayed stream cut after its last whole event (a blank line ends one: ``\\n\\n``,
    ``\\r\\n\\r\\n`` or ``\\r\\r``), so an upstream read that ends inside an event never sends
    half of it on. Each byte is searched once (a few bytes back, for an ending split across
    reads), and the part held back is appended to, never copied whole per read."""

    _ENDINGS = (b"\r\n\r\n", b"\n\n", b"\r\r")

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        """Add ``chunk``; return what is now whole (possibly nothing)."""
        pending = self._pending
        start = max(0, len(pending) - 3)
        pending += chunk
        end = max((at + len(e) for e in self._ENDINGS if (at := pending.rfind(e, start)) >= 0), default=-1)
        if end < 0:
            return b""
        ready = bytes(pending[:end])
        del pending[:end]
        return ready

    def rest(self) -> bytes:
        rest, self._pending = bytes(self._pending), bytearray()
        return rest


class _Sse:
    """Reads server-sent events from raw chunks (split anywhere) and hands each data payload on.

    An event's ``data:`` lines are joined with a newline and the event is read at the blank line
    that ends it, as the SSE specification (and the ``openai`` client) reads them: a server may
    spread one JSON payload over several lines. :meth:`close` reads a last event the stream's
    end cut short of its blank line."""

    def __init__(self, on_data: Callable[[Any], None], on_done: Callable[[], None] = lambda: None) -> None:
        self._pending = bytearray()
        self._data: list[str] = []  # the data lines of the event being read
        self._on_data = on_data
        self._on_done = on_done
        self._after_cr = False  # the last chunk fed ended with a CR (its LF may open the next)
        self.done = False  # ``data: [DONE]`` came: the stream's last event

    def feed(self, chunk: bytes) -> None:
        # Only the new bytes are searched for line ends (linear in the stream however it is split).
        # A line ends at CRLF, LF or a lone CR, as the SSE specification says; a CR that ends one
        # chunk may have its LF open the next (one line end, not an empty line between).
        # The relay feeds whole events (_WholeEvents), so a line always ends in the chunk it is
        # fed in: a long event is read whole, as the client gets it. The cap on what is left
        # pending only guards a caller feeding raw reads.
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._after_cr = chunk.endswith(b"\r")
        start = 0
        lines: list[bytes] = []
        for end in _LINE_END.finditer(chunk):
            lines.append(bytes(self._pending + chunk[start : end.start()]))
            self._pending.clear()
            start = end.end()
        self._pending += chunk[start:]
        if len(self._pending) > MAX_LINE_BYTES:
            self._pending.clear()
        for raw in lines:
            line = raw.decode("utf-8", errors="replace")
            if not line:
                self._dispatch()
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)

    def close(self) -> None:
        """The stream ended: read what is left of its last event."""
        self.feed(b"\n")
        self._dispatch()

    def _dispatch(self) -> None:
        if not self._data:
            return
        data = "\n".join(self._data).strip()
        self._data = []
        if data == "[DONE]":
            self.done = True
            self._on_done()
            return
        if not data:
            return
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to decode: skipped
            return
        self._on_data(parsed)


class _Unreadable(Exception):
    """A streamed event whose shape the answer accumulator cannot read."""


class _Call:
    """One streamed tool call: its pieces kept in lists and joined once (linear in the deltas)."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name: list[str] = []
        self.arguments: list[str] = []

    def wire(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": "".join(self.name), "arguments": "".join(self.arguments)}}  # fmt: skip


class ChatAnswer:
    """A Chat Completions answer, from a whole response or assembled from stream chunks.

    A streamed answer is saveable once complete (choice 0 got a ``finish_reason``, or ``[DONE]``
    came) and only if every event of choice 0 could be read: an event of another shape (a
    ``delta`` that is not an object, a tool call ``index`` that is not an integer, a ``name``
    that is not a string…) marks it unreadable, and nothing of it is saved rather than a
    possibly wrong answer. The relay forwards such events unchanged all the same.
    """

    def __init__(self) -> None:
        self.content: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.message: dict[str, Any] | None = None
        self.complete = False
        self.unreadable = False
        self._finished = False  # a finish_reason came on choice 0 (read however its event is shaped)
        self._head: dict[str, Any] = {}  # id, created and model of the stream's chunks
        self._finish: Any = None  # choice 0's finish_reason
        self._usage: Any = None

    def whole(self, body: Any) -> None:
        choices = body.get("choices") if isinstance(body, dict) else None
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            self.message = message if isinstance(message, dict) else None

    def done(self) -> None:
        """``[DONE]`` came: the stream completed."""
        self.complete = True

    def ended(self) -> bool:
        """Whether the stream said its answer is over (``[DONE]``, or choice 0's
        ``finish_reason``), whether or not its events could be read."""
        return self.complete or self._finished

    def last(self) -> bool:
        """Whether nothing can follow in the stream: never said by an event (a usage chunk may
        follow choice 0's ``finish_reason``), only by ``[DONE]``, which the reader tells."""
        return False

    def chunk(self, data: Any) -> None:
        if isinstance(data, dict):
            for key in ("id", "created", "model"):
                self._head.setdefault(key, data.get(key))
            if data.get("usage") is not None:
                self._usage = data["usage"]
        if not self._finished:
            self._finished = _finish_reason_in(data)
            if self._finished:
                self._finish = next((c.get("finish_reason") for c in data["choices"] if isinstance(c, dict)
                                     and c.get("index", 0) == 0 and c.get("finish_reason") is not None), None)  # fmt: skip
        if self.unreadable:
            return
        try:
            self._read(data)
        except _Unreadable as exc:
            self.unreadable = True
            logger.warning("an upstream stream event could not be read (%s); relayed, but the answer is not saved",
                           exc)  # fmt: skip

    def _read(self, data: Any) -> None:
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list):
            return
        first = [c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0]  # n > 1: the first is kept
        if not first:
            return
        delta = first[0].get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            raise _Unreadable("'delta' is not an object")
        content = delta.get("content")
        if isinstance(content, str):
            self.content.append(content)
        elif content is not None:
            raise _Unreadable("'content' is not a string")
        calls = delta.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise _Unreadable("'tool_calls' is not a list")
        for call in calls or []:
            self._call(call)
        if first[0].get("finish_reason") is not None:
            self.complete = True

    def _call(self, call: Any) -> None:
        if not isinstance(call, dict):
            raise _Unreadable("a tool call is not an object")
        index = call.get("index", 0)
        if not isinstance(index, int) or isinstance(index, bool):
            raise _Unreadable("a tool call's 'index' is not an integer")
        function = call.get("function")
        if function is None:
            function = {}
        if not isinstance(function, dict):
            raise _Unreadable("a tool call's 'function' is not an object")
        call_id, name, arguments = call.get("id"), function.get("name"), function.get("arguments")
        if any(value is not None and not isinstance(value, str) for value in (call_id, name, arguments)):
            raise _Unreadable("a tool call's 'id', 'name' or 'arguments' is not a string")
        slot = self.calls.get(index)
        if slot is None:
            slot = self.calls[index] = _Call()
        slot.id = call_id or slot.id
        if name:
            slot.name.append(name)
        if arguments:
            slot.arguments.append(arguments)

    def completed(self) -> bool:
        """Whether the whole answer came (a whole response, or a stream to its end)."""
        return self.message is not None or (self.complete and not self.unreadable)

    def unsaved(self) -> str | None:
        """Why a streamed answer that came is not saved (None: it is, or nothing came)."""
        if self.message is not None or not (self.content or self.calls or self.unreadable):
            return None
        if self.unreadable:
            return "an event of it could not be read"
        return None if self.complete else "the stream ended before the answer was complete"

    def _assembled(self) -> dict[str, Any] | None:
        """The streamed answer as one message, if it completed and could be read."""
        if not (self.content or self.calls) or self.unsaved() is not None:
            return None
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i].wire() for i in sorted(self.calls)]
        return message

    def response(self) -> dict[str, Any] | None:
        """The streamed answer as the ``chat.completion`` a request without ``stream`` gets (choice
        0), if it completed and could be read."""
        message = self._assembled()
        if message is None:
            return None
        completion = {**self._head, "object": "chat.completion",
                      "choices": [{"index": 0, "message": message, "finish_reason": self._finish or "stop"}]}  # fmt: skip
        if self._usage is not None:
            completion["usage"] = self._usage
        return completion

    def messages(self, history: list[Message]) -> list[Message]:
        message = self.message if self.message is not None else self._assembled()
        if message is None:
            return []
        return from_openai([message], history=history)


#: Message metadata: the Responses API item ids (``fc_…``) of the message's function calls, by
#: call id. A reasoning model's ``reasoning`` item is paired with the items that follow it by
#: their item ids (one sent back without the other is a 400: "Item 'rs_…' of type 'reasoning' was
#: provided without its required following item"); the converters keep the reasoning's id (its
#: replay) and not the calls'.
CALL_ITEM_IDS = "obsmem_responses_call_item_ids"
#: Message metadata: how the Responses items the converters do not take came, so that they are
#: sent back as they came. ``calls`` and ``outputs``, by call id: the type, item id, status and
#: other fields of a custom tool's, computer use's, a shell's or apply_patch's call (stored as a
#: tool call, its fields its arguments) and of its output (stored as a tool result); ``messages``:
#: the item id and status of each assistant ``message`` item (``msg_…``) of the message, in order,
#: paired with a reasoning item as calls are.
RESPONSES_ITEMS = "obsmem_responses_items"

#: Call items the converters do not take, by type: the name their tool is stored under (a custom
#: tool's call names its own). Each is stored as a tool call and its output (``<type>_output``) as
#: the call's result, so memory keeps them together as it keeps function calls and their results.
_TOOL_CALLS: dict[str, str | None] = {
    "custom_tool_call": None,
    "computer_call": "computer",
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
}
_TOOL_OUTPUTS = frozenset(f"{kind}_output" for kind in _TOOL_CALLS)
#: Call items the API takes only with their item id: sent with it whether or not a reasoning item
#: comes before them (the others, as function calls, only after one).
_ID_REQUIRED = frozenset({"computer_call", "local_shell_call"})
#: The items of the tools OpenAI runs itself (hosted tools), by type: the fields that are what the
#: tool returned. Each is stored as a call answered by its result in the same message (what the
#: tool found is a tool's result in memory: data, never a user's words) and sent back as it came.
_HOSTED: dict[str, tuple[str, ...]] = {
    "web_search_call": (),
    "file_search_call": ("results",),
    "code_interpreter_call": ("outputs",),
    "image_generation_call": ("result",),
    "mcp_list_tools": ("tools", "error"),
    "mcp_call": ("output", "error"),
}
#: A hosted MCP tool's request for the user's approval: stored as a call that the user's
#: ``mcp_approval_response`` answers, as a function call's output answers it.
_APPROVAL_REQUEST, _APPROVAL = "mcp_approval_request", "mcp_approval_response"
#: The fields of an item that say how it came rather than what it holds.
_ITEM_FIELDS = ("type", "id", "status")
#: The items of a model's answer (after the last of them, a request's input is new).
_ANSWER_ITEMS = frozenset({"function_call", "reasoning", *_TOOL_CALLS, *_HOSTED, _APPROVAL_REQUEST})


class ResponsesAnswer:
    """A Responses API answer: ``output`` of the response, or of the stream's completed event."""

    _KEEP = ("message", "function_call", "reasoning", *_TOOL_CALLS, *_HOSTED, _APPROVAL_REQUEST)

    #: The events after which a stream has nothing more to say.
    _TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")

    def __init__(self, *, stored: bool = True) -> None:
        self.output: list[Any] | None = None
        self._response: dict[str, Any] | None = None  # the terminal event's response
        self._ended = False
        self._stored = stored  # the request let the upstream keep its items (``store`` not false)

    def whole(self, body: Any) -> None:
        output = body.get("output") if isinstance(body, dict) else None
        if isinstance(output, list):
            self.output = output

    def chunk(self, data: Any) -> None:
        # the stream's two terminal events that carry an answer; response.incomplete (e.g. at
        # max_output_tokens) is saved as the same response not streamed is saved
        kind = data.get("type") if isinstance(data, dict) else None
        if kind in ("response.completed", "response.incomplete"):
            self.whole(data.get("response"))
            if self.output is not None:
                self._response = data["response"]
        self._ended = self._ended or kind in self._TERMINAL

    def done(self) -> None:
        self._ended = True

    def ended(self) -> bool:
        """Whether the stream came to one of its terminal events (or ``[DONE]``)."""
        return self._ended

    def last(self) -> bool:
        """Whether nothing can follow in the stream: a terminal event is the Responses stream's
        last (OpenAI sends no ``[DONE]`` after it)."""
        return self._ended

    def completed(self) -> bool:
        """Whether the whole answer came (a response, or a stream's terminal event with it)."""
        return self.output is not None

    def unsaved(self) -> str | None:
        return None

    def response(self) -> dict[str, Any] | None:
        """The streamed answer as the response a request without ``stream`` gets, if it completed."""
        return self._response

    def messages(self, history: list[Message]) -> list[Message]:
        if not self.output:
            return []
        output = [item for item in self.output if isinstance(item, dict)]
        if not self._stored:
            # Asked with store=false, OpenAI keeps none of the answer's items: a reasoning item
            # without its encrypted_content (none asked for in ``include``) cannot go back by its id
            # ("Item with id 'rs_…' not found. Items are not persisted when `store` is set to
            # false"). Kept without the id, it is saved as reasoning and never sent back.
            output = [{k: v for k, v in item.items() if k != "id"}
                      if item.get("type") == "reasoning" and not item.get("encrypted_content") else item
                      for item in output]  # fmt: skip
        kept = [
            item for at, item in enumerate(output) if item.get("type") in self._KEEP
            # a reasoning item goes back only with the item that followed it (OpenAI refuses it
            # without: "… was provided without its required following item"); one followed by an
            # item not kept (a web search, code interpreter or MCP call) is left out with it
            and not (item.get("type") == "reasoning" and at + 1 < len(output)
                     and output[at + 1].get("type") not in self._KEEP)
        ]  # fmt: skip
        return _from_responses(kept, history)


def _call_key(item: dict[str, Any]) -> str:
    """The field of an output item naming the call it answers: ``id`` on a local shell call's."""
    return "id" if item.get("type") == "local_shell_call_output" else "call_id"


#: How each call or output of a call id came, in the items' order (a model may reuse call ids):
#: None for a function call's or output's.
_Shapes = dict[str, list[dict[str, Any] | None]]


def _hosted_call_id(item: dict[str, Any]) -> str:
    """The call id a hosted tool's item is stored under: its item id, or (an item without one) one
    made of what it holds, the same each time it is sent."""
    if isinstance(item.get("id"), str) and item["id"]:
        return str(item["id"])
    digest = hashlib.sha256(json.dumps(item, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return f"{item['type']}_{digest[:24]}"


def _hosted_name(item: dict[str, Any]) -> str:
    name = item.get("name")
    if item["type"] in ("mcp_call", _APPROVAL_REQUEST) and isinstance(name, str) and name:
        return name
    return str(item["type"]).removesuffix("_call")


def _as_function_items(items: list[Any]) -> tuple[list[Any], _Shapes, _Shapes]:
    """``items`` with the tool items the converters do not take as ``function_call`` /
    ``function_call_output`` items, and how each call and output came (by call id, in order; for
    :data:`RESPONSES_ITEMS`). A call's fields other than its type, ids, status (and a custom call's
    name) are its arguments, a JSON object; an output's ``output`` its result (a screenshot as an
    image). A hosted tool's item is a call whose arguments are what it was asked, its shape noting
    what it returned (the result :func:`_from_responses` puts after it); an MCP approval the output
    of the request it answers."""
    plain: list[Any] = []
    calls: _Shapes = {}
    outputs: _Shapes = {}
    for index, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in _HOSTED or kind == _APPROVAL_REQUEST:
            call_id = _hosted_call_id(item)
            returned = _HOSTED.get(kind, ())
            arguments = {k: v for k, v in item.items() if k not in (*_ITEM_FIELDS, *returned)}
            shape: dict[str, Any] = {k: item[k] for k in _ITEM_FIELDS if k in item}
            if kind != _APPROVAL_REQUEST:
                shape["returned"] = {k: item[k] for k in returned if k in item}
            calls.setdefault(call_id, []).append(shape)
            plain.append({"type": "function_call", "call_id": call_id, "name": _hosted_name(item),
                          "arguments": json.dumps(arguments, ensure_ascii=False)})  # fmt: skip
        elif kind == _APPROVAL:
            call_id = item.get("approval_request_id")
            if not isinstance(call_id, str) or not call_id or not isinstance(item.get("approve"), bool):
                raise InvalidInputError(f"input[{index}]: an mcp_approval_response needs 'approval_request_id' (the "
                                        "request it answers) and 'approve' (true or false)", argument="input")  # fmt: skip
            fields = {k: v for k, v in item.items() if k not in ("type", "approval_request_id")}
            outputs.setdefault(call_id, []).append({"type": _APPROVAL, "fields": fields})
            plain.append({"type": "function_call_output", "call_id": call_id,
                          "output": json.dumps({k: v for k, v in fields.items() if k in ("approve", "reason")},
                                               ensure_ascii=False)})  # fmt: skip
        elif kind in _TOOL_CALLS:
            call_id, name = item.get("call_id"), _TOOL_CALLS[kind] or item.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                what = "a 'call_id'" + (" and a 'name'" if _TOOL_CALLS[kind] is None else "")
                raise InvalidInputError(f"input[{index}]: a {kind} item needs {what} (non-empty strings)",
                                        argument="input")  # fmt: skip
            kept = ("type", "call_id", "id", "status", *(("name",) if _TOOL_CALLS[kind] is None else ()))
            arguments = {k: v for k, v in item.items() if k not in kept}
            calls.setdefault(call_id, []).append({"type": kind, **{k: item[k] for k in ("id", "status")
                                                                   if isinstance(item.get(k), str)}})  # fmt: skip
            plain.append({"type": "function_call", "call_id": call_id, "name": name,
                          "arguments": json.dumps(arguments, ensure_ascii=False)})  # fmt: skip
        elif kind in _TOOL_OUTPUTS:
            key = _call_key(item)
            call_id = item.get(key)
            if not isinstance(call_id, str) or not call_id:
                raise InvalidInputError(f"input[{index}]: a {kind} item needs '{key}' (the call it answers)",
                                        argument="input")  # fmt: skip
            output, shape = _function_output(kind, item, index)
            outputs.setdefault(call_id, []).append(shape)
            plain.append({"type": "function_call_output", "call_id": call_id, "output": output})
        else:
            if kind == "function_call":
                calls.setdefault(str(item.get("call_id")), []).append(None)
            elif kind == "function_call_output":
                outputs.setdefault(str(item.get("call_id")), []).append(None)
            plain.append(item)
    return plain, calls, outputs


def _function_output(kind: str, item: dict[str, Any], index: int) -> tuple[Any, dict[str, Any]]:
    """An output item's result (as a function_call_output's ``output``), and how it came: its type
    and the fields that are not its result, ids or type."""
    fields = {k: v for k, v in item.items() if k not in ("type", "call_id", "id", "output")}
    shape: dict[str, Any] = {"type": kind, "fields": fields}
    output = item.get("output")
    if kind == "computer_call_output":
        if not isinstance(output, dict):
            raise InvalidInputError(f"input[{index}]: a computer_call_output's 'output' must be a screenshot "
                                    "object", argument="input")  # fmt: skip
        image = output.get("image_url")
        if isinstance(image, str) and image:  # stored as an image (a file part), not its base64 as text
            _check_screenshot(image, index)
            shape["screenshot"] = {k: v for k, v in output.items() if k != "image_url"}
            return [{"type": "input_image", "image_url": image}], shape
        if not (isinstance(output.get("file_id"), str) and output["file_id"]):
            raise InvalidInputError(f"input[{index}]: a computer_call_output's screenshot needs an 'image_url' or a "
                                    "'file_id'", argument="input")  # fmt: skip
        shape["screenshot"] = output  # a file_id: kept as it is
        return "", shape
    if kind == "apply_patch_call_output" and output is None:
        shape["no_output"] = True
        return "", shape
    return output, shape


_DATA_IMAGE = re.compile(r"data:image/[\w.+-]+(?:;[^,;]*)*;base64,")


def _check_screenshot(image: str, index: int) -> None:
    """Refuses a screenshot given as a data URI that is not a base64 image. Saved, it was sent
    back on every later request: a non-image went upstream as a screenshot with no image (its
    file part is not an image), and the upstream refused each request while it was in the window."""
    if not image.startswith("data:"):
        return  # a URL: the upstream fetches it
    head = _DATA_IMAGE.match(image)
    payload = image[head.end() :] if head else ""
    try:
        valid = bool(payload) and bool(base64.b64decode(payload, validate=True))
    except (binascii.Error, ValueError):
        valid = False
    if not valid:
        raise InvalidInputError(f"input[{index}]: a computer_call_output's screenshot 'image_url' must be an image "
                                "URL or a base64 image data URI (data:image/png;base64,…)", argument="input")  # fmt: skip


def _from_responses(items: list[Any], history: list[Message]) -> list[Message]:
    """Responses API items (a request's new input, or an answer's output) as messages, with what
    :func:`_responses_input` needs to send them back as they came noted in their metadata."""
    plain, calls, outputs = _as_function_items(items)
    messages = from_openai_responses(plain, history=history)
    call_ids: dict[str, list[str | None]] = {}  # the function calls' item ids, by call id in order
    for item in items:
        if isinstance(item, dict) and item.get("type") in ("function_call", *_TOOL_CALLS):
            item_id = item.get("id") if item.get("type") == "function_call" else None
            call_ids.setdefault(str(item.get("call_id")), []).append(item_id if isinstance(item_id, str) and item_id
                                                                     else None)  # fmt: skip
    answers = _answer_messages(items)
    if len(answers) != sum(m.role == "assistant" for m in messages):
        answers = []  # the converter grouped them otherwise: no message ids rather than wrong ones
    said = iter(answers)
    noted: list[Message] = []
    for message in messages:
        note: dict[str, Any] = {}
        items_note: dict[str, Any]
        if message.role == "assistant":
            own_ids = {c.tool_call_id: _next(call_ids, c.tool_call_id) for c in message.tool_calls}
            own_calls = {c.tool_call_id: _next(calls, c.tool_call_id) for c in message.tool_calls}
            own_ids = {k: v for k, v in own_ids.items() if v is not None}
            message, own_calls = _hosted_results(message, own_calls)
            if own_ids:
                note[CALL_ITEM_IDS] = own_ids
            items_note = {"calls": {k: v for k, v in own_calls.items() if v is not None}}
            ids = next(said, [])
            if any(ids):
                items_note["messages"] = ids
        else:
            own = {p.tool_call_id: _next(outputs, p.tool_call_id) for p in message.parts
                   if isinstance(p, ToolResultPart)}  # fmt: skip
            items_note = {"outputs": {k: v for k, v in own.items() if v is not None}}
        items_note = {k: v for k, v in items_note.items() if v}
        if items_note:
            note[RESPONSES_ITEMS] = items_note
        noted.append(message.model_copy(update={"metadata": {**message.metadata, **note}}) if note
                     else message)  # fmt: skip
    return noted


def _hosted_results(
    message: Message, shapes: dict[str, dict[str, Any] | None]
) -> tuple[Message, dict[str, dict[str, Any] | None]]:
    """``message`` with each hosted tool's call (by its shape in ``shapes``) followed by what the
    tool returned, as its result (a call answered in its own message, as OpenAI ran it), and the
    shapes noting which fields that result holds instead of holding them again."""
    hosted = {k: v for k, v in shapes.items() if isinstance(v, dict) and "returned" in v}
    if not hosted:
        return message, shapes
    parts: list[Any] = []
    for part in message.parts:
        parts.append(part)
        shape = hosted.get(part.tool_call_id) if isinstance(part, ToolCallPart) else None
        if isinstance(part, ToolCallPart) and shape is not None:
            returned = dict(shape["returned"])
            image = returned.pop("result", None) if shape.get("type") == "image_generation_call" else None
            parts.append(ToolResultPart(tool_call_id=part.tool_call_id, tool_name=part.tool_name,
                                        result=returned or shape.get("status", "completed"),
                                        is_error=bool(returned.get("error"))))  # fmt: skip
            if isinstance(image, str) and image:  # the image made: kept as an image, not its base64 as a text
                parts.append(FilePart(media_type=_image_type(image), data=image, filename=f"{part.tool_call_id}.image"))
    noted = {k: ({**{f: v for f, v in shape.items() if f != "returned"}, "returned": sorted(shape["returned"])}
                 if k in hosted and isinstance(shape, dict) else shape) for k, shape in shapes.items()}  # fmt: skip
    return message.model_copy(update={"parts": tuple(parts)}), noted


def _image_type(data: str) -> str:
    """The media type of a base64 image, by its first bytes (an image generation call does not say)."""
    for head, media_type in (("iVBOR", "image/png"), ("/9j/", "image/jpeg"), ("UklGR", "image/webp"),
                             ("R0lGOD", "image/gif")):  # fmt: skip
        if data.startswith(head):
            return media_type
    return "image/png"


def _hosted_files(message: Message) -> dict[str, FilePart]:
    """The images hosted tools made (an image generation call's), by the call id of the result they
    follow in ``message``."""
    note = message.metadata.get(RESPONSES_ITEMS)
    calls = note.get("calls") if isinstance(note, dict) else None
    if not isinstance(calls, dict):
        return {}
    files: dict[str, FilePart] = {}
    before: Any = None
    for part in message.parts:
        shape = calls.get(before.tool_call_id) if isinstance(before, ToolResultPart) else None
        if isinstance(part, FilePart) and isinstance(before, ToolResultPart) and isinstance(shape, dict) \
                and shape.get("type") in _HOSTED:  # fmt: skip
            files[before.tool_call_id] = part
        before = part
    return files


def _next(queues: dict[str, list[Any]], key: str) -> Any:
    """The next of ``key``'s queue (taken off it), None when there is none."""
    queue = queues.get(key)
    return queue.pop(0) if queue else None


def _answer_messages(items: list[Any]) -> list[list[dict[str, Any]]]:
    """For each run of answer items (which the converter makes one assistant message), the id and
    status of each of its assistant ``message`` items ({} for one without an id)."""
    runs: list[list[dict[str, Any]]] = []
    run: list[dict[str, Any]] | None = None
    for item in items:
        kind = item.get("type", "message" if "role" in item else None) if isinstance(item, dict) else None
        is_message = kind == "message" and item.get("role") == "assistant"
        if not (is_message or kind in _ANSWER_ITEMS):
            run = None
            continue
        if run is None:
            run = []
            runs.append(run)
        if is_message:
            item_id, status = item.get("id"), item.get("status")
            run.append({"id": item_id, "status": status if isinstance(status, str) else "completed"}
                       if isinstance(item_id, str) and item_id else {})  # fmt: skip
    return runs


def _responses_input(messages: list[Message]) -> list[dict[str, Any]]:
    """``messages`` as Responses input, each message's items as they came (:data:`RESPONSES_ITEMS`)."""
    kinds: dict[str, str] = {}  # the type of each call sent so far, by call id (the latest: ids may be reused)
    items: list[dict[str, Any]] = []
    for message in _late_files_in_place(messages):
        sent = _message_items(message, kinds)
        kinds.update({str(i.get("call_id") if "call_id" in i else i.get("id")): i["type"] for i in sent
                      if i.get("type") in ("function_call", *_TOOL_CALLS, *_HOSTED, _APPROVAL_REQUEST)})  # fmt: skip
        items.extend(sent)
    return _without_unanswered_computer_calls(items)


def _late_files_in_place(messages: list[Message]) -> list[Message]:
    """``messages`` with the files of an output that came late (a computer call's screenshot sent
    after the user went on) back with their result. Memory puts a late result in the place of the
    'no result' that closed its call (the closing message, which notes it under
    :data:`ANSWERED_LATE_KEY`), and keeps the files that came after it where they came, in a tool
    message of their own: sent as they are, the screenshot went as a user's image and its call,
    answered by no screenshot, was left out. Moved after their result with how the output came,
    the call goes with its screenshot, in its place. Files of several late outputs of one request
    are matched to them in order only where each output is a screenshot (one image each)."""
    closings: dict[str, int] = {}  # call id answered late -> where its closing message is in ``out``
    out: list[Message] = []
    for message in messages:
        late = message.metadata.get(ANSWERED_LATE_KEY)
        if message.role == "tool" and message.metadata.get(UNANSWERED_KEY) and isinstance(late, list):
            closings.update({str(call_id): len(out) for call_id in late})
        note = message.metadata.get(RESPONSES_ITEMS)
        shapes = note.get("outputs") if isinstance(note, dict) else None
        files = [p for p in message.parts if isinstance(p, FilePart)]
        if (message.role != "tool" or not files or len(files) != len(message.parts) or not isinstance(shapes, dict)
                or not shapes or not all(call_id in closings for call_id in shapes)):  # fmt: skip
            out.append(message)
            continue
        if len(shapes) == 1:
            owned = {call_id: files for call_id in shapes}
        elif len(files) == len(shapes) and all(isinstance(s, dict) and s.get("type") == "computer_call_output"
                                               for s in shapes.values()):  # fmt: skip
            owned = {call_id: [file] for call_id, file in zip(shapes, files, strict=True)}
        else:
            out.append(message)
            continue
        for call_id, own in owned.items():
            at = closings[call_id]
            out[at] = _with_files(out[at], call_id, own, shapes[call_id])
    return out


def _with_files(closing: Message, call_id: str, files: list[FilePart], shape: Any) -> Message:
    """``closing`` with ``files`` after the result for ``call_id``, and that output's shape noted."""
    parts: list[Any] = []
    for part in closing.parts:
        parts.append(part)
        if isinstance(part, ToolResultPart) and part.tool_call_id == call_id:
            parts.extend(files)
    note = closing.metadata.get(RESPONSES_ITEMS)
    note = dict(note) if isinstance(note, dict) else {}
    outputs = note.get("outputs")
    note["outputs"] = {**(outputs if isinstance(outputs, dict) else {}), call_id: shape}
    return closing.model_copy(update={"parts": tuple(parts), "metadata": {**closing.metadata, RESPONSES_ITEMS: note}})


def _without_unanswered_computer_calls(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` without the computer calls that have no screenshot to answer them, and their
    outputs: a call the user went on from, which memory closed with a 'no result' output (or a
    late output put in its place, without its screenshot). OpenAI answers a computer call only
    with a computer_call_output holding a screenshot, which there is none of. The reasoning item
    the call followed goes with it, and the items after it in that answer lose the ids they
    paired with it by (one sent with its id and without its reasoning item is refused too)."""
    answered = {i.get("call_id") for i in items if i.get("type") == "computer_call_output"}
    gone = {i.get("call_id") for i in items if i.get("type") == "computer_call" and i.get("call_id") not in answered}
    if not gone:
        return items
    kept: list[dict[str, Any]] = []
    unpaired = False  # a reasoning item of this answer was left out
    for item in items:
        kind = item.get("type")
        if kind == "computer_call" and item.get("call_id") in gone:
            if kept and kept[-1].get("type") == "reasoning":
                kept.pop()
                unpaired = True
            continue
        if kind == "function_call_output" and item.get("call_id") in gone:
            continue
        if not _is_answer(item):
            unpaired = False
        elif unpaired and kind not in _ID_REQUIRED and kind != "reasoning":
            item = {k: v for k, v in item.items() if k != "id"}
        kept.append(item)
    return kept


def _message_items(message: Message, kinds: dict[str, str]) -> list[dict[str, Any]]:
    """One message as Responses input. A reasoning item is sent with the item that followed it,
    by id: where one of its message's answer items has no id to give (saved before the gateway
    noted them: the answer message's before this version, the calls' before 181376c), OpenAI would
    refuse the request ("… was provided without its required following item"), so the message's
    reasoning items are left out and its items sent without the ids they pair by."""
    made = {id(f) for f in _hosted_files(message).values()}  # sent in their calls' items, not as attachments
    items = to_openai_responses([message.model_copy(update={"parts": tuple(p for p in message.parts
                                                                           if id(p) not in made)})] if made
                                else [message])  # fmt: skip
    came = _as_they_came(message, items, kinds, paired=True)
    if _pairs_whole(came):
        return came
    return _as_they_came(message, [i for i in items if i.get("type") != "reasoning"], kinds, paired=False)


def _pairs_whole(items: list[dict[str, Any]]) -> bool:
    """Whether each reasoning item sent with its id is followed by an item with one (or by nothing)."""
    return all(
        i + 1 == len(items) or isinstance(items[i + 1].get("id"), str)
        for i, item in enumerate(items) if item.get("type") == "reasoning" and isinstance(item.get("id"), str)
    )  # fmt: skip


def _as_they_came(
    message: Message, items: list[dict[str, Any]], kinds: dict[str, str], *, paired: bool
) -> list[dict[str, Any]]:
    """``items`` (``message`` as Responses input) as they came: custom, computer, shell and
    apply_patch calls and outputs in their own types; the item id given back (``paired``) to the
    calls and answer messages that follow a reasoning item sent with its id, as the model
    answered them (a call's item id without its reasoning item is refused too), and to the calls
    that take no other. An output that did not come as an item (memory's 'no result' for a call
    the user went on from, or a result given after it) answers in the type of its call
    (``kinds``, by call id): OpenAI takes no function_call_output for another kind of call."""
    note = message.metadata.get(RESPONSES_ITEMS)
    note = note if isinstance(note, dict) else {}
    calls, outputs = note.get("calls"), note.get("outputs")
    calls = calls if isinstance(calls, dict) else {}
    outputs = outputs if isinstance(outputs, dict) else {}
    call_ids = message.metadata.get(CALL_ITEM_IDS)
    call_ids = call_ids if isinstance(call_ids, dict) else {}
    said = note.get("messages")
    answers = [i for i in items if i.get("type") == "message" and i.get("role") == "assistant"]
    said_ids = iter(said if isinstance(said, list) and len(said) == len(answers) else [])
    parts = {p.tool_call_id: p for p in message.parts if isinstance(p, ToolResultPart)}
    results = {call_id: part.result for call_id, part in parts.items()}
    made = _hosted_files(message)
    reasoned = _reasoned_calls(message)
    # calls answered in their own (assistant) message: tools the provider ran. One without the note
    # of its item (forget took the note: 'completed' is in every item's status) cannot go as it came
    unnoted = {call_id for call_id in parts if not _is_hosted_shape(calls.get(call_id))} \
        if message.role == "assistant" else set()  # fmt: skip
    came: list[dict[str, Any]] = []
    after_reasoning = False  # a reasoning item sent with its id came before, in this answer
    for item in items:
        kind = item.get("type")
        if kind == "reasoning":
            after_reasoning = after_reasoning or (paired and isinstance(item.get("id"), str))
        elif kind == "function_call":
            call_id = item.get("call_id")
            shape = calls.get(call_id)
            if isinstance(shape, dict) and shape.get("type") in _HOSTED and call_id in reasoned and not after_reasoning:
                # its reasoning item is not sent (kept nowhere upstream: store=false), and OpenAI takes
                # a hosted tool's item only with its id and that id only with the reasoning item
                # before it: left out (memory keeps what it found)
                continue
            hosted_item = (_hosted_as_it_came(item, shape, results.get(str(call_id)), made.get(str(call_id)))
                           if _is_hosted_shape(shape) else None)  # fmt: skip
            # a custom, computer, shell or patch call whose arguments forget made '[forgotten]': no
            # item of its kind carries that, and as a function_call its output would answer nothing
            forgotten_call = (isinstance(shape, dict) and shape.get("type") in _TOOL_CALLS
                              and not isinstance(_arguments(item), dict))  # fmt: skip
            if forgotten_call:
                kinds[str(call_id)] = _LEFT_OUT  # its output (a later message) is left out too
            if call_id in unnoted or (_is_hosted_shape(shape) and hosted_item is None) or forgotten_call:
                # what it was asked is gone (forget made it '[forgotten]'), or how it came: no item
                # OpenAI takes, and as a function_call it has no output before the answer's next
                # item. Left out, with the reasoning item it followed (taken only with it) and an
                # approval of it (taken only after it; ``kinds``); memory keeps what it found
                if came and came[-1].get("type") == "reasoning":
                    came.pop()
                    after_reasoning = any(i.get("type") == "reasoning" and isinstance(i.get("id"), str)
                                          for i in came)  # fmt: skip
                continue
            if hosted_item is not None:
                item = hosted_item
            elif isinstance(shape, dict):
                item = _call_as_it_came(item, shape, after_reasoning)
            elif after_reasoning and isinstance(call_ids.get(call_id), str):
                item = {**item, "id": call_ids[call_id]}
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if kinds.get(call_id) == _LEFT_OUT:
                continue  # its call was left out (above): memory keeps what the tool gave
            shape = outputs.get(call_id)
            hosted = calls.get(call_id)
            if (isinstance(hosted, dict) and hosted.get("type") in _HOSTED) or call_id in unnoted:
                continue  # what a hosted tool returned went in its item (or with it, left out)
            if (isinstance(shape, dict) and shape.get("type") == _APPROVAL) or kinds.get(call_id) == _APPROVAL_REQUEST:
                approval = _approval(call_id, shape, results.get(call_id))
                if approval is None or kinds.get(call_id) != _APPROVAL_REQUEST:
                    # memory's 'no result' for a request the user went on from: no approval to send;
                    # or its request was not sent (left out): OpenAI takes no approval without it
                    continue
                item = approval
            elif isinstance(shape, dict):
                item = _output_as_it_came(item, shape, results.get(call_id))
            elif kinds.get(call_id) in _TOOL_CALLS and call_id in parts:
                item = _output_of_kind(kinds[call_id], item, parts[call_id])
        elif kind == "message" and item.get("role") == "assistant":
            ids = next(said_ids, None)
            if after_reasoning and isinstance(ids, dict) and isinstance(ids.get("id"), str):
                item = {**item, "id": ids["id"], "status": ids.get("status", "completed")}
        came.append(item)
    return came


def _is_hosted_shape(shape: Any) -> TypeGuard[dict[str, Any]]:
    """Whether ``shape`` notes a hosted tool's item or an MCP approval request."""
    return isinstance(shape, dict) and (shape.get("type") in _HOSTED or shape.get("type") == _APPROVAL_REQUEST)


def _reasoned_calls(message: Message) -> set[str]:
    """The call ids of ``message``'s calls that came after a reasoning item of it."""
    reasoned: set[str] = set()
    thought = False
    for part in message.parts:
        thought = thought or isinstance(part, ReasoningPart)
        if thought and isinstance(part, ToolCallPart):
            reasoned.add(part.tool_call_id)
    return reasoned


def _hosted_as_it_came(
    item: dict[str, Any], shape: dict[str, Any], result: Any, image: FilePart | None = None
) -> dict[str, Any] | None:
    """A hosted tool's item (or an MCP approval request) as it came: its type, id and status, what
    it was asked (the call's arguments) and what it returned (the call's result, and the image an
    image generation call made). None when the arguments are no object (forgotten), or the item
    came without an id (saved before such items were refused: OpenAI refuses it)."""
    if not shape.get("id"):
        return None
    try:
        arguments = json.loads(item["arguments"])
    except (ValueError, RecursionError):
        arguments = None
    if not isinstance(arguments, dict):
        return None
    returned = shape.get("returned")
    returned = returned if isinstance(returned, list) else []
    came = {k: shape[k] for k in _ITEM_FIELDS if k in shape}
    came.update(arguments)
    if isinstance(result, dict):
        came.update({k: result[k] for k in returned if k in result})
    if "result" in returned and shape.get("type") == "image_generation_call":
        # the image made, or null (none made: a failed generation); OpenAI requires the field
        came["result"] = image.data if image is not None else None
    return came


def _approval(call_id: str, shape: dict[str, Any] | None, result: Any) -> dict[str, Any] | None:
    """The ``mcp_approval_response`` a tool result answering an MCP approval request stands for
    (its fields as they came, or the decision the result holds: one given late, after the user
    went on); None for a result that holds no decision."""
    fields = shape.get("fields") if isinstance(shape, dict) else None
    if not isinstance(fields, dict):
        try:
            fields = json.loads(result) if isinstance(result, str) else None
        except (ValueError, RecursionError):
            fields = None
    if not isinstance(fields, dict) or not isinstance(fields.get("approve"), bool):
        return None
    return {"type": _APPROVAL, "approval_request_id": call_id, **fields}


#: In ``kinds`` (the type of each call sent so far): a call left out of what goes upstream.
_LEFT_OUT = "obsmem-left-out"


def _arguments(item: dict[str, Any]) -> Any:
    """A function_call item's arguments, decoded (None when they are not JSON)."""
    try:
        return json.loads(item["arguments"])
    except (ValueError, RecursionError, TypeError, KeyError):
        return None


def _call_as_it_came(item: dict[str, Any], shape: dict[str, Any], after_reasoning: bool) -> dict[str, Any]:
    kind = shape.get("type")
    try:
        arguments = json.loads(item["arguments"])
    except (ValueError, RecursionError):
        arguments = None
    if kind not in _TOOL_CALLS or not isinstance(arguments, dict):
        return item
    came = {**arguments, "type": kind, "call_id": item["call_id"]}
    if _TOOL_CALLS[kind] is None:
        came["name"] = item["name"]
    if isinstance(shape.get("status"), str):
        came["status"] = shape["status"]
    if isinstance(shape.get("id"), str) and (after_reasoning or kind in _ID_REQUIRED):
        came["id"] = shape["id"]
    return came


def _output_of_kind(kind: str, item: dict[str, Any], part: ToolResultPart) -> dict[str, Any]:
    """A function_call_output as the output of a ``kind`` call (one that did not come as such an
    item). A computer call's takes a screenshot, which there is none of: left as it is."""
    call_id, output = item["call_id"], item["output"]
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if kind == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}
    if kind == "local_shell_call":
        return {"type": "local_shell_call_output", "id": call_id, "output": text}
    if kind == "apply_patch_call":
        return {"type": "apply_patch_call_output", "call_id": call_id, "status": "failed" if part.is_error
                else "completed", "output": text}  # fmt: skip
    if kind == "shell_call":
        chunks = part.result if isinstance(part.result, list) and all(isinstance(c, dict) for c in part.result) \
            else [{"stdout": "" if part.is_error else text, "stderr": text if part.is_error else "",
                   "outcome": {"type": "exit", "exit_code": 1 if part.is_error else 0}}]  # fmt: skip
        return {"type": "shell_call_output", "call_id": call_id, "output": chunks}
    return item


def _output_as_it_came(item: dict[str, Any], shape: dict[str, Any], result: Any) -> dict[str, Any]:
    kind = shape.get("type")
    if kind not in _TOOL_OUTPUTS:
        return item
    fields = shape.get("fields")
    output = item["output"]
    if not isinstance(output, list) and isinstance(result, list):
        output = result  # a list of data (a shell's output chunks): the converter sends it as JSON text
    came: dict[str, Any] = {**(fields if isinstance(fields, dict) else {}), "type": kind}
    came[_call_key(came)] = item["call_id"]
    if kind == "computer_call_output":
        screenshot = shape.get("screenshot")
        screenshot = dict(screenshot) if isinstance(screenshot, dict) else {"type": "computer_screenshot"}
        parts = [p for p in output if isinstance(p, dict)] if isinstance(output, list) else []
        image = next((p.get("image_url") for p in parts if p.get("type") == "input_image"), None)
        if isinstance(image, str):
            screenshot["image_url"] = image
        came["output"] = screenshot
    elif not shape.get("no_output"):
        came["output"] = output
    return came


async def _finish(service: Service, turn: Turn, answer: ChatAnswer | ResponsesAnswer) -> None:
    """Save the answer (ending the turn starts memory work); a bad answer is logged, never raised."""
    reason = answer.unsaved()
    if reason is not None:
        logger.warning("the upstream answer is not saved: %s", reason)
    try:
        responses = answer.messages(turn.context.messages)
    except Exception as exc:
        telemetry.log_failure(logger, "the upstream answer could not be converted; saved without it",
                              error=exc, operation="gateway")
        responses = []
    await _end(service, turn, responses)


async def _end(service: Service, turn: Turn, responses: list[Message]) -> None:
    """``turn.end(responses)``, the answer's long texts counted in a thread first
    (:meth:`~obsmem.tokens.TokenCounter.warm`): the end's counts are then lookups, where a
    megabyte of answer counted on the event loop held every other request of the server
    (tens of milliseconds a megabyte; the turn's own input is warmed so by ``begin_turn``)."""
    if responses and not await _still_its_thread(service, turn):
        # deleted meanwhile and made again under its id (ids are client-named) by another org or
        # user: their thread, not this turn's (the end saves by id, and saved the answer there)
        logger.warning("the thread was deleted while its upstream answer came and its id taken by another "
                       "tenant: the answer is not saved")
        responses = []
    if responses:
        await service.memory.counter.warm(responses)
    await _closed(turn, responses)


async def _still_its_thread(service: Service, turn: Turn) -> bool:
    """Whether the thread stored under the turn's id is still of the turn's org and resource (a
    thread gone is left to :func:`_closed`)."""
    try:
        now = await service.memory.get_thread(turn.thread.id)
    except ThreadNotFoundError:
        return True
    return now.org_id == turn.thread.org_id and now.resource_id == turn.thread.resource_id


async def _closed(turn: Turn, responses: list[Message] | None = None) -> None:
    """``turn.end(responses)``; a thread deleted while its answer came (the user erased the
    conversation meanwhile) keeps nothing of it: the answer still reaches the client as it came,
    whole, and is not saved (delete means gone), where the end's ThreadNotFoundError raised in the
    response cut a stream off mid-way and swapped a whole answer for a 404."""
    try:
        await turn.end(responses or ())
    except ThreadNotFoundError:
        logger.warning("the thread was deleted while its upstream answer came: the answer is not saved")


def _json_off_loop(content: bytes) -> Awaitable[Any]:
    """``json.loads(content)``, in a thread past :data:`_OFF_LOOP_BYTES` (a large answer decoded on
    the event loop holds every other request)."""
    if len(content) < _OFF_LOOP_BYTES:
        return asyncio.sleep(0, json.loads(content))
    return asyncio.to_thread(json.loads, content)


async def _forward(
    service: Service, turn: Turn, path: str, payload: dict[str, Any], answer: ChatAnswer | ResponsesAnswer
) -> Response:
    url, headers = _upstream(service, path)
    assert service.http is not None
    stream = bool(payload.get("stream"))
    deadline = _deadline(service)
    try:
        request = service.http.build_request("POST", url, json=payload, headers=headers)
        async with asyncio.timeout_at(deadline):
            upstream = await service.http.send(request, stream=True)
    except TimeoutError:
        await _closed(turn)
        return _refused(_timeout_error(service))
    except httpx.HTTPError as exc:
        await _closed(turn)
        return _refused(_failure(service, exc))
    await _unencoded(upstream, turn)
    mask = _masking(service)
    if upstream.status_code != 200 or not stream or _is_json(upstream):
        # (a stream asked for, answered with one JSON body: an upstream that ignores ``stream``)
        try:
            content = mask(await _whole(upstream, turn, deadline))
        except TimeoutError:
            return _refused(_timeout_error(service))
        except httpx.HTTPError as exc:
            return _refused(_failure(service, exc))
        if upstream.status_code == 200:
            parsed: Any = None
            try:
                parsed = await _json_off_loop(content)
                answer.whole(parsed)
            except (ValueError, RecursionError):  # not JSON, or nested too deep: relayed, not saved
                pass
            if not stream and _is_event_stream(upstream):  # events, though none were asked for
                whole = await _read_events(content, answer)
                if whole is not None:
                    await _finish(service, turn, answer)
                    return JSONResponse(whole, headers=_hints(service, upstream))
            await _finish(service, turn, answer)
            if stream and isinstance(parsed, dict):  # the client reads the stream it asked for
                if "error" in parsed and not (parsed.get("choices") or parsed.get("output")):
                    # a failure reported with status 200: an error event, as a stream reports one
                    events = sse_chunk({"error": parsed["error"]})
                elif isinstance(answer, ChatAnswer):
                    events = _chat_events(parsed)
                else:
                    events = _responses_events(parsed)
                return Response(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        else:
            await _closed(turn)
        media = upstream.headers.get("content-type", "application/json")
        return Response(content, status_code=upstream.status_code, media_type=media, headers=_hints(service, upstream))

    reader = _Sse(answer.chunk, answer.done)

    async def relay() -> AsyncIterator[bytes]:
        # Each chunk goes on as it came, one behind: the last one (with the closing event) goes
        # only after the answer is saved, so a client that has the whole answer finds it in
        # memory on its next request. A read that fails part-way (the deadline, a stalled or
        # dropped upstream, the size limit) ends the stream with an error event, and nothing
        # of the answer is saved, unless the whole answer had come before it.
        finished = False
        failure: UpstreamError | None = None
        held: bytes | None = None
        total = 0
        events = _WholeEvents()  # only whole events go on: a failure never leaves half of one
        watchdog = _Watchdog(service, deadline, upstream, lambda: _finish(service, turn, answer))
        # After a Responses terminal event the answer is saved and sent at once; the stream then
        # waits at most TERMINAL_GRACE_S for what may follow it (a [DONE]), not for the upstream.
        grace: list[float] = []
        try:
            async for chunk in _until_first(deadline, grace, upstream.aiter_raw()):
                total += len(chunk)
                if total > MAX_UPSTREAM_BYTES:
                    failure = _too_large()
                    logger.warning("the upstream stream passed %d bytes; ended with an error", MAX_UPSTREAM_BYTES)
                    break
                ready = mask(events.feed(chunk))  # whole events: an echoed key is never split
                if not ready:
                    continue
                reader.feed(ready)
                if held is not None:
                    watchdog.writing = True
                    yield held
                    watchdog.writing = False
                    if watchdog.fired:  # the client stalled past the deadline: the upstream is gone
                        raise TimeoutError
                held = ready
                if reader.done:  # nothing follows [DONE]: an upstream holding its connection open holds no one
                    finished = True
                    break
                if answer.last() and not grace:
                    # a Responses terminal event (OpenAI sends no [DONE] after it): the answer is
                    # saved and goes on now, and the stream waits no longer than the grace
                    grace.append(asyncio.get_running_loop().time() + TERMINAL_GRACE_S)
                    await _finish(service, turn, answer)
                    watchdog.writing = True
                    yield held
                    watchdog.writing = False
                    held = None
                    if watchdog.fired:
                        raise TimeoutError
            else:
                rest = mask(events.rest())  # a last event without its blank line: the stream's end ends it
                reader.feed(rest)
                reader.close()
                finished = True
                if rest:
                    held = rest if held is None else held + rest
        except (TimeoutError, httpx.HTTPError) as exc:
            if grace:  # after the terminal event: the answer is whole and sent; the stream ends here
                finished = True
            else:
                failure = _timeout_error(service) if isinstance(exc, TimeoutError) else _failure(service, exc)
        finally:
            watchdog.cancel()
            await upstream.aclose()
            if not finished and failure is None:
                # the client went away: the answer is saved, off this task, only if it completed
                service.spawn(_finish(service, turn, answer))
        if finished and not answer.ended():
            # The upstream closed its stream cleanly, but the answer never said it was over:
            # the client hears it was cut (relayed as it came, the stream's end is not the answer's).
            failure = UpstreamError("The upstream stream ended before the answer was complete.")
            logger.warning("the upstream stream ended before its answer was complete; ended with an error")
        if failure is not None and not answer.completed():
            await _closed(turn)
            if held is not None:
                yield held
            yield _error_event(failure)
            return
        if finished or failure is not None:  # (a failure after the whole answer came: it stands)
            await _finish(service, turn, answer)
        if held is not None:
            yield held

    media = upstream.headers.get("content-type", "text/event-stream")
    return StreamingResponse(relay(), media_type=media, headers={"Cache-Control": "no-cache"})


ThreadHeader = Annotated[str | None, Header(alias="X-Obsmem-Thread")]
ResourceHeader = Annotated[str | None, Header(alias="X-Obsmem-Resource")]


async def _forward_anthropic(service: Service, turn: Turn, body: dict[str, Any], system: list[Message]) -> Response:
    """Chat Completions over an Anthropic upstream (see :mod:`obsmem.server.anthropic_upstream`)."""
    settings = service.settings
    if not settings.upstream_url:
        raise UpstreamError("This server has no upstream model configured (obsmem serve --upstream URL).")
    headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION, "Accept-Encoding": IDENTITY}
    if settings.upstream_key:
        headers["x-api-key"] = settings.upstream_key
    try:
        request = anthropic_request(body, [*system, *turn.context.messages])
    except InvalidInputError:  # a request that cannot be translated (400): the turn ends with its input
        await _closed(turn)
        raise
    stream = bool(body.get("stream"))
    if stream:
        request["stream"] = True
    assert service.http is not None
    deadline = _deadline(service)
    try:
        sent = service.http.build_request("POST", settings.upstream_url.rstrip("/") + "/messages", json=request,
                                          headers=headers)  # fmt: skip
        async with asyncio.timeout_at(deadline):
            upstream = await service.http.send(sent, stream=True)
    except TimeoutError:
        await _closed(turn)
        return _refused(_timeout_error(service))
    except httpx.HTTPError as exc:
        await _closed(turn)
        return _refused(_failure(service, exc))
    await _unencoded(upstream, turn)
    mask = _masking(service)
    if upstream.status_code != 200 or not stream or _is_json(upstream):  # (one JSON body: ``stream`` ignored)
        try:
            content = mask(await _whole(upstream, turn, deadline))
        except TimeoutError:
            return _refused(_timeout_error(service))
        except httpx.HTTPError as exc:
            return _refused(_failure(service, exc))
        if upstream.status_code != 200:
            await _closed(turn)
            return Response(content, status_code=upstream.status_code, headers=_hints(service, upstream),
                            media_type=upstream.headers.get("content-type", "application/json"))  # fmt: skip
        def translated() -> tuple[bytes, list[Message]]:
            completion, saved = chat_completion(json.loads(content), body.get("model"), turn.context.messages)
            return json.dumps(completion).encode(), saved

        try:  # a large answer is decoded, translated and encoded off the event loop
            wire, saved = translated() if len(content) < _OFF_LOOP_BYTES else await asyncio.to_thread(translated)
        except (ValueError, RecursionError, InvalidInputError) as exc:
            await _closed(turn)
            raise UpstreamError(f"The Anthropic answer could not be translated: {exc}") from None
        await _end(service, turn, saved)
        if stream:  # the client reads the stream it asked for
            return Response(_chat_events(json.loads(wire)), media_type="text/event-stream",
                            headers={"Cache-Control": "no-cache"})  # fmt: skip
        return Response(wire, media_type="application/json")

    options = body.get("stream_options")
    translator = AnthropicStream(body.get("model"), include_usage=isinstance(options, dict)
                                 and options.get("include_usage") is True)  # fmt: skip

    async def save() -> None:
        """Save the answer if the stream completed (``message_stop``); a cut one saves nothing."""
        if not translator.finished:
            if translator.blocks:
                logger.warning("the upstream answer is not saved: the stream ended before the answer was complete")
            await _closed(turn)
            return
        try:
            _, saved = chat_completion(translator.answer(), body.get("model"), turn.context.messages)
        except (ValueError, InvalidInputError) as exc:
            telemetry.log_failure(logger, "the upstream answer could not be converted; saved without it",
                                  error=exc, operation="gateway")
            saved = []
        await _end(service, turn, saved)

    async def relay() -> AsyncIterator[bytes]:
        # Like the OpenAI relay: the finish goes out only after the answer is saved. An error
        # event of the upstream, a read that fails part-way (the deadline, a stalled or dropped
        # upstream, a size limit), or a stream that ends before ``message_stop`` ends the stream
        # with an error event for the client (this stream is the gateway's own translation: it
        # knows the answer is unfinished), and nothing of the answer is saved.
        finished = False
        ended = False
        failure: UpstreamError | None = None
        watchdog = _Watchdog(service, deadline, upstream, save)
        try:
            async for event in parse_sse(_bounded_lines(upstream, deadline)):
                try:
                    data = json.loads(event.data)
                except (ValueError, RecursionError):
                    continue
                if isinstance(data, dict) and data.get("type") == "error":
                    failure = _anthropic_failure(data.get("error"), service)
                    logger.warning("the Anthropic upstream reported an error mid-stream: %s", failure)
                    break
                chunks = translator.event(event.event, data)
                if translator.finished:
                    await save()
                    finished = True
                for chunk in chunks:
                    watchdog.writing = True
                    yield mask(sse_chunk(chunk))
                    watchdog.writing = False
                    if watchdog.fired and not finished:  # the client stalled past the deadline
                        raise TimeoutError
                if finished:
                    break
            else:
                ended = True
        except TimeoutError:
            failure = _timeout_error(service)
        except httpx.HTTPError as exc:
            failure = _failure(service, exc)
        except UpstreamError as exc:  # a size limit (_bounded_lines)
            failure = exc
        finally:
            watchdog.cancel()
            await upstream.aclose()
            if not finished and not ended and failure is None:  # a client that went away: off this task
                service.spawn(save())
        if ended and not finished:
            failure = UpstreamError("The upstream stream ended before the answer was complete (no message_stop).")
            logger.warning("the upstream answer is not saved: the stream ended before the answer was complete")
        if failure is not None:
            await _closed(turn)
            yield _error_event(failure)
        elif finished:
            yield b"data: [DONE]\n\n"

    return StreamingResponse(relay(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


#: The upstream's headers a client gets with its answer: the retry hints the ``openai`` and
#: ``anthropic`` clients honour (``retry-after``, ``retry-after-ms``, ``x-should-retry``) and the
#: rate-limit state (when a limit resets). No other upstream header is passed on.
_HINT_NAMES = ("retry-after", "retry-after-ms", "x-should-retry")
_HINT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def _hints(service: Service, upstream: httpx.Response) -> dict[str, str]:
    """The retry and rate-limit headers of ``upstream`` (:data:`_HINT_NAMES`), the key masked."""
    return {name: _masked_text(service, value) for name, value in upstream.headers.items()
            if name.lower() in _HINT_NAMES or name.lower().startswith(_HINT_PREFIXES)}  # fmt: skip


def _is_event_stream(upstream: httpx.Response) -> bool:
    """Whether the upstream answered with server-sent events."""
    media = str(upstream.headers.get("content-type", ""))
    return media.split(";")[0].strip().lower() == "text/event-stream"


async def _read_events(content: bytes, answer: ChatAnswer | ResponsesAnswer) -> dict[str, Any] | None:
    """The whole answer in the events ``content`` holds (read into ``answer``; in a thread past
    :data:`_OFF_LOOP_BYTES`), or None if they did not complete it."""

    def read() -> dict[str, Any] | None:
        reader = _Sse(answer.chunk, answer.done)
        reader.feed(content)
        reader.close()
        return answer.response()

    return read() if len(content) < _OFF_LOOP_BYTES else await asyncio.to_thread(read)


def _is_json(upstream: httpx.Response) -> bool:
    """Whether the upstream answered with one JSON body (to a stream request: it ignored ``stream``)."""
    media = str(upstream.headers.get("content-type", ""))
    return media.split(";")[0].strip().lower() == "application/json"


def _chat_events(completion: dict[str, Any]) -> bytes:
    """A whole Chat Completion as the stream a client asked for: one chunk carrying each choice's
    whole message as its delta (tool calls given their ``index``) and finish reason, then ``[DONE]``."""
    choices = []
    for choice in completion.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        delta = dict(message) if isinstance(message, dict) else {}
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [{**call, "index": i} if isinstance(call, dict) else call for i, call in enumerate(calls)]
        choices.append({"index": choice.get("index", 0), "delta": delta, "finish_reason": choice.get("finish_reason"),
                        **({"logprobs": choice["logprobs"]} if "logprobs" in choice else {})})  # fmt: skip
    chunk = {"id": completion.get("id"), "object": "chat.completion.chunk", "created": completion.get("created"),
             "model": completion.get("model"), "choices": choices}  # fmt: skip
    if completion.get("usage") is not None:
        chunk["usage"] = completion["usage"]
    return sse_chunk(chunk) + b"data: [DONE]\n\n"


def _responses_events(response: dict[str, Any]) -> bytes:
    """A whole Responses API response as the stream a client asked for: its terminal event."""
    kind = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(str(response.get("status")),
                                                                                  "response.completed")  # fmt: skip
    data = json.dumps({"type": kind, "sequence_number": 0, "response": response})
    return f"event: {kind}\ndata: {data}\n\n".encode()


async def _unencoded(upstream: httpx.Response, turn: Turn) -> None:
    """Refuse (502) an upstream answer compressed though the gateway asked for none: its bytes
    are relayed as they come, and could be read neither by the client nor to save the answer."""
    encoding = upstream.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", IDENTITY):
        return
    await upstream.aclose()
    await _closed(turn)
    raise UpstreamError(f"The upstream model server sent a {encoding!r}-encoded answer though asked for none.")


class _Watchdog:
    """Lets go of a relay stalled writing to its client at the exchange's deadline.

    The deadline (``upstream_total_timeout_s``) bounds the relay's waits for the upstream
    (:func:`_until`), but a client that stops reading stalls the relay in its write instead:
    the gateway then reads no more of the upstream and would hold its connection (one of the
    pool's) and the turn for as long as the client liked. At the deadline, a relay caught
    ``writing`` has its upstream closed and ``end`` called off its task (the turn ended, its
    answer saved if the whole of it had come); the relay, if its client ever reads on, ends the
    stream with the timeout's error event (or, the answer whole, as it would have).
    A relay not writing at that moment is watched again a second later (it is about to wait on
    the upstream, which fails at once past the deadline, or to write again)."""

    _RECHECK_S = 1.0

    def __init__(
        self, service: Service, deadline: float, upstream: httpx.Response, end: Callable[[], Awaitable[None]]
    ) -> None:
        self.writing = False
        self.fired = False
        self._service, self._upstream, self._end = service, upstream, end
        self._handle = asyncio.get_running_loop().call_at(deadline, self._check)

    def _check(self) -> None:
        if not self.writing:
            self._handle = asyncio.get_running_loop().call_later(self._RECHECK_S, self._check)
            return
        self.fired = True
        logger.warning("a client stopped reading its stream past upstream_total_timeout_s; the upstream is let go")
        self._service.spawn(self._let_go())

    async def _let_go(self) -> None:
        await self._upstream.aclose()
        await self._end()

    def cancel(self) -> None:
        self._handle.cancel()


def _deadline(service: Service) -> float:
    """When (event-loop time) one upstream exchange begun now must be over."""
    return asyncio.get_running_loop().time() + service.settings.upstream_total_timeout_s


async def _until(deadline: float, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` until ``deadline`` (event-loop time); past it :class:`TimeoutError`, however
    steadily they come (keep-alive comments, a body a byte at a time)."""
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        yield chunk


async def _until_first(deadline: float, sooner: list[float], chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """:func:`_until`, the deadline brought forward to ``sooner[0]`` once the caller puts a time there."""
    while True:
        try:
            async with asyncio.timeout_at(min([deadline, *sooner])):
                chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        yield chunk


def _timeout_error(service: Service) -> UpstreamTimeoutError:
    limit = service.settings.upstream_total_timeout_s
    return UpstreamTimeoutError(
        f"The upstream model server did not finish its answer within {limit:g} s (upstream_total_timeout_s)."
    )


def _read_timeout_error(service: Service) -> UpstreamTimeoutError:
    limit = service.settings.upstream_timeout_s
    return UpstreamTimeoutError(f"The upstream model server sent nothing for {limit:g} s (upstream_timeout_s).")


def _failure(service: Service, exc: httpx.HTTPError) -> UpstreamError:
    """What the client is told of a failed exchange with the upstream (the text names httpx's
    error type only: the upstream's address stays on the server)."""
    if isinstance(exc, httpx.TimeoutException):
        return _read_timeout_error(service)
    return UpstreamError(f"The upstream model server failed: {type(exc).__name__}")


def _too_large() -> UpstreamError:
    return UpstreamError(f"The upstream answer is larger than {MAX_UPSTREAM_BYTES} bytes.")


def _refused(error: UpstreamError) -> Response:
    """A whole answer that could not be had: 504 past a timeout, else 502, in obsmem's error shape."""
    status = 504 if isinstance(error, UpstreamTimeoutError) else 502
    return JSONResponse(error_body(type(error).__name__, str(error)), status_code=status)


def _finish_reason_in(data: Any) -> bool:
    """Whether a Chat Completions chunk gives choice 0 a ``finish_reason``."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list):
        return False
    return any(isinstance(c, dict) and c.get("index", 0) == 0 and c.get("finish_reason") is not None for c in choices)


def _error_event(error: UpstreamError) -> bytes:
    """The last event of a stream that failed: ``data: {"error": …}`` (which the ``openai`` client
    raises as an APIError). It opens with a blank line, ending any event the upstream left half sent."""
    return b"\n\ndata: " + json.dumps(error_body(type(error).__name__, str(error))).encode() + b"\n\n"


def _anthropic_failure(error: Any, service: Service) -> UpstreamError:
    detail = error if isinstance(error, dict) else {}
    kind, message = detail.get("type"), detail.get("message")
    said = _masked_text(service, ": ".join(str(part) for part in (kind, message) if part) or "no detail")
    return UpstreamError(f"The upstream model server failed mid-answer ({said}).")


async def _whole(upstream: httpx.Response, turn: Turn, deadline: float) -> bytes:
    """The whole (bounded) answer, the response closed; a failed read (or the deadline) ends the turn first."""
    try:
        return await _read_bounded(upstream, deadline)
    except (httpx.HTTPError, UpstreamError, TimeoutError):
        await _closed(turn)
        raise
    finally:
        await upstream.aclose()


async def _read_bounded(upstream: httpx.Response, deadline: float) -> bytes:
    """The whole body of a non-streaming upstream answer, refused past :data:`MAX_UPSTREAM_BYTES`."""
    body = bytearray()
    async for chunk in _until(deadline, upstream.aiter_raw()):
        body += chunk
        if len(body) > MAX_UPSTREAM_BYTES:
            raise _too_large()
    return bytes(body)


async def _bounded_lines(upstream: httpx.Response, deadline: float) -> AsyncIterator[str]:
    """The lines of a streamed upstream answer; raises :class:`UpstreamError` past
    :data:`MAX_UPSTREAM_BYTES` in all or :data:`MAX_LINE_BYTES` in one line, and
    :class:`TimeoutError` past ``deadline``."""
    pending = bytearray()
    total = 0
    after_cr = False  # the last chunk ended with a CR: an LF opening the next is its CRLF's
    async for chunk in _until(deadline, upstream.aiter_raw()):
        total += len(chunk)
        if total > MAX_UPSTREAM_BYTES:
            logger.warning("the upstream stream passed %d bytes; ended with an error", MAX_UPSTREAM_BYTES)
            raise _too_large()
        if after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        after_cr = chunk.endswith(b"\r")
        start = 0
        for end in _LINE_END.finditer(chunk):  # CRLF, LF or a lone CR, as the SSE specification says
            pending += chunk[start : end.start()]
            yield pending.decode("utf-8", errors="replace")
            pending.clear()
            start = end.end()
        pending += chunk[start:]
        if len(pending) > MAX_LINE_BYTES:
            logger.warning("an upstream stream line passed %d bytes; ended with an error", MAX_LINE_BYTES)
            raise UpstreamError(f"A line of the upstream stream is longer than {MAX_LINE_BYTES} bytes.")
    if pending:
        yield pending.decode("utf-8", errors="replace")


@router.post("/chat/completions", openapi_extra=_REQUEST_BODY)
async def chat_completions(
    request: Request, principal: Caller, service: ServiceDep, thread: ThreadHeader = None,
    resource: ResourceHeader = None,
) -> Response:  # fmt: skip
    """Chat Completions through memory (streaming or not); the answer is the upstream's, unchanged."""
    principal.may_write()
    body = await _body(request)
    thread_id, resource_id = _target(body, thread, resource)
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise InvalidInputError("'messages' must be a list of message objects", argument="messages")
    system = [m for m in messages if m.get("role") in ("system", "developer")]
    conversation = [m for m in messages if m not in system]
    new = _after_last(conversation, lambda m: m.get("role") == "assistant")
    await _thread(service, principal, thread_id, resource_id)
    new = await _unsaved(service, thread_id, conversation, new)
    history = await call_history(
        service, thread_id, {str(m.get("tool_call_id")) for m in new if m.get("role") == "tool"},
        {str(c.get("id")) for m in new if isinstance(m.get("tool_calls"), list) for c in m["tool_calls"]
         if isinstance(c, dict)},
        argument="messages",
    )
    parsed = await _retried(service, thread_id, from_openai(new, history=history))
    model = body.get("model") if isinstance(body.get("model"), str) else None
    turn = await service.memory.begin_turn(thread_id=thread_id, messages=parsed, model=model)
    if service.settings.upstream_kind == "anthropic":
        return await _forward_anthropic(service, turn, body, from_openai(system))
    payload = {**body, "messages": [*system, *to_openai(turn.context.messages)]}
    return await _forward(service, turn, "/chat/completions", payload, ChatAnswer())


def _refuse_references(items: list[Any], new: list[Any]) -> None:
    """Refuses an ``item_reference`` in the input to save: it names an item OpenAI stored, which
    the gateway can neither read nor remember, and forwarded as it is the model would read what
    memory never holds (and lose it when it leaves the window; an upstream other than OpenAI
    refuses it). The gateway sends its own answers from memory: they need no reference."""
    for item in new:
        if item.get("type") == "item_reference":
            index = next(i for i, given in enumerate(items) if given is item)
            raise InvalidInputError(
                f"input[{index}]: an item_reference ({item.get('id')!r}) names an item stored by OpenAI, which this "
                "gateway cannot read: it sends the upstream the thread's memory, not OpenAI's stored items. Send "
                "the item itself (the gateway's own answers are in memory already and need not be sent).",
                argument="input",
            )


def _refuse_unsendable_hosted_items(items: list[Any], new: list[Any]) -> None:
    """Refuses an input to save holding a hosted tool's item (or an MCP approval request) that
    OpenAI would refuse: no ``id``, or one that is no string or empty (OpenAI requires it of every
    such item given back; an approval names its request by it), an MCP item's ``arguments`` that
    are no JSON string, or one id twice ('Duplicate item found with id …'). Saved, the item went
    upstream as it came at every request after, and each failed."""
    seen: set[str] = set()
    for item in new:
        kind, item_id = item.get("type"), item.get("id")
        if kind not in _HOSTED and kind != _APPROVAL_REQUEST:
            continue
        index = next(i for i, given in enumerate(items) if given is item)
        problem = None
        if not isinstance(item_id, str) or not item_id:
            problem = "its 'id' must be the item's id, a non-empty string"
        elif kind in ("mcp_call", _APPROVAL_REQUEST) and "arguments" in item and not isinstance(item["arguments"], str):
            problem = "its 'arguments' must be a JSON string"
        elif isinstance(item_id, str) and item_id in seen:
            problem = f"the item {item_id!r} comes twice in the input; send each item once"
        if problem is not None:
            raise InvalidInputError(f"input[{index}]: a {kind} that OpenAI would refuse: {problem}",
                                    argument="input")  # fmt: skip
        if isinstance(item_id, str):
            seen.add(item_id)


def _is_answer(item: Any) -> bool:
    kind = item.get("type", "message" if "role" in item else None)
    return kind in _ANSWER_ITEMS or (kind == "message" and item.get("role") == "assistant")


@router.post("/responses", openapi_extra=_REQUEST_BODY)
async def responses(
    request: Request, principal: Caller, service: ServiceDep, thread: ThreadHeader = None,
    resource: ResourceHeader = None,
) -> Response:  # fmt: skip
    """The Responses API through memory (streaming or not); ``previous_response_id`` and
    ``conversation`` are replaced by the thread's memory (not sent upstream). Custom tool, computer
    use, shell and apply_patch calls and their outputs are stored as tool calls and results and sent upstream as the items they came as;
    so are hosted tools' items (web search, file search, code interpreter, image generation, MCP:
    each a call answered by what it returned, an MCP approval the output of its request). An
    ``item_reference`` is refused (400): it names an item OpenAI stored, which memory cannot hold;
    so is ``background`` (its answer is fetched later from the upstream, where memory never sees it)."""
    principal.may_write()
    if service.settings.upstream_kind != "openai":
        raise InvalidInputError(
            "This server's upstream is Anthropic: the Responses API needs an OpenAI-compatible one; "
            "use /v1/chat/completions.", argument="upstream",
        )  # fmt: skip
    body = await _body(request)
    if body.get("background"):
        raise InvalidInputError(
            "'background' responses are not supported by the memory gateway: it saves each answer as it "
            "comes, and a background response is fetched later from the upstream by its id, where memory never "
            "sees it. Send the request without 'background' (with 'stream' for a long answer).",
            argument="background",
        )
    thread_id, resource_id = _target(body, thread, resource)
    raw = body.get("input")
    items: Any = [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InvalidInputError("'input' must be a string or a list of items", argument="input")
    system = [i for i in items if i.get("role") in ("system", "developer")]
    conversation = [i for i in items if i not in system]
    new = _after_last(conversation, _is_answer)
    await _thread(service, principal, thread_id, resource_id)
    new = await _unsaved(service, thread_id, conversation, new)
    _refuse_references(items, new)
    _refuse_unsendable_hosted_items(items, new)
    plain = _as_function_items(new)[0]
    history = await call_history(
        service, thread_id, {str(i.get("call_id")) for i in plain if i.get("type") == "function_call_output"},
        {str(i.get("call_id")) for i in plain if i.get("type") == "function_call"},
        argument="input",
    )
    parsed = await _retried(service, thread_id, _from_responses(new, history))
    model = body.get("model") if isinstance(body.get("model"), str) else None
    turn = await service.memory.begin_turn(thread_id=thread_id, messages=parsed, model=model)
    # the thread's memory stands for what OpenAI keeps of a conversation: sent on, the upstream would
    # put its stored items before the memory's context, and add that context to them at each request
    payload = {k: v for k, v in body.items() if k not in ("previous_response_id", "conversation")}
    payload["input"] = [*system, *_responses_input(turn.context.messages)]
    return await _forward(service, turn, "/responses", payload, ResponsesAnswer(stored=body.get("store") is not False))
