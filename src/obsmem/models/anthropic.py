"""Anthropic's Messages API over HTTP (``POST /v1/messages``), streamed or not.

Only the wire format lives here; :mod:`obsmem.models.transport` sends the requests and maps
failures. What differs from Chat Completions, and why the code looks the way it does:

- system text travels in the top-level ``system`` field, not as a message;
- roles must alternate user/assistant, so consecutive messages of one role are merged, and
  tool results (a ``tool`` message in obsmem) become ``tool_result`` blocks of a user turn;
- ``max_tokens`` is required: without a configured limit a per-model default is sent;
- temperature is 0–1 (values above 1 are clamped);
- a stream is typed events (``message_start``, ``content_block_delta`` with ``text_delta`` or
  ``input_json_delta``, ``message_delta`` with the stop reason and output usage,
  ``message_stop``); an ``error`` event mid-stream (``overloaded_error``) is transient;
- ``stop_reason``: ``end_turn``/``stop_sequence`` → ``stop``, ``max_tokens`` → ``length``,
  ``tool_use`` → ``tool_calls``, ``refusal`` → ``content_filter``, anything else (``pause_turn``)
  → ``other``; a stream without ``message_stop`` → ``unknown``. The last three are retried as
  incomplete responses.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx

from obsmem.errors import ModelError
from obsmem.models.base import FinishReason, ModelRequest, ModelResponse, Usage
from obsmem.models.transport import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT_S,
    JSON_BODY_EVENT,
    MAX_REPORTED_TOKENS,
    Endpoint,
    HttpCaller,
    answer_shape,
    check_response_limit,
    malformed,
    output_char_limit,
    status_error,
    too_much_output,
)
from obsmem.profiles import default_max_output_tokens
from obsmem.types import FilePart, Message, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "ANTHROPIC_VERSION",
    "CACHE_CONTROL",
    "MAX_CACHE_BREAKPOINTS",
    "AnthropicModel",
    "default_max_tokens",
    "to_anthropic_messages",
]

ANTHROPIC_VERSION = "2023-06-01"

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
# Error types of a mid-stream ``error`` event mapped to the HTTP status that means the same.
_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "timeout_error": 504,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
}


def default_max_tokens(model: str) -> int:
    """The output limit sent when none is configured: the model family's own ceiling, roughly.

    Anthropic requires one; the table (Claude 3: 4,096, 3.5: 8,192, later: 32,000) is
    :func:`obsmem.profiles.default_max_output_tokens`.
    """
    limit = default_max_output_tokens("anthropic", model)
    assert limit is not None  # every Anthropic model has one
    return limit


def _finish(raw: object) -> FinishReason:
    if raw is None:
        return "unknown"
    return _FINISH.get(str(raw), "other")


def _file_block(part: FilePart) -> dict[str, Any] | None:
    kind = "image" if part.is_image else "document"
    if part.data is not None:
        data = part.data.split(",", 1)[1] if part.data.startswith("data:") else part.data
        return {"type": kind, "source": {"type": "base64", "media_type": part.media_type, "data": data}}
    if part.url is not None:
        return {"type": kind, "source": {"type": "url", "url": part.url}}
    return None


def _result_content(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)


CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
"""The marker that ends a cacheable prefix (five-minute cache)."""

MAX_CACHE_BREAKPOINTS = 4
"""The Messages API refuses a request with more ``cache_control`` markers than this."""


def to_anthropic_messages(
    messages: list[Message], cache_breakpoints: tuple[tuple[int, int], ...] = ()
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """obsmem messages as the Messages API's ``(system, messages)``.

    ``cache_breakpoints`` (``(message index, part index)``, see
    :class:`~obsmem.models.base.ModelRequest`) put ``cache_control`` on the block made of that
    part; the first :data:`MAX_CACHE_BREAKPOINTS` that map to a block are used. The system is a
    string, or a list of text blocks when one of its messages carries a breakpoint.
    """
    marks = set(sorted(set(cache_breakpoints))[:MAX_CACHE_BREAKPOINTS])
    system: list[dict[str, Any]] = []
    wire: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.role == "system":
            if message.text:
                block: dict[str, Any] = {"type": "text", "text": message.text}
                if any(m == index for m, _ in marks):
                    block["cache_control"] = dict(CACHE_CONTROL)
                system.append(block)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        for position, part in enumerate(message.parts):
            converted: dict[str, Any] | None = None
            if isinstance(part, TextPart) and part.text:
                converted = {"type": "text", "text": part.text}
            elif isinstance(part, FilePart):
                converted = _file_block(part)
            elif isinstance(part, ToolCallPart):
                args = part.args if isinstance(part.args, dict) else {"input": part.args}
                converted = {"type": "tool_use", "id": part.tool_call_id, "name": part.tool_name, "input": args}
            elif isinstance(part, ToolResultPart):
                converted = {
                    "type": "tool_result",
                    "tool_use_id": part.tool_call_id,
                    "content": _result_content(part.result),
                }
                if part.is_error:
                    converted["is_error"] = True
            if converted is None:
                continue
            if (index, position) in marks:
                converted["cache_control"] = dict(CACHE_CONTROL)
            blocks.append(converted)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if not system:
        return None, wire
    if any("cache_control" in block for block in system):
        return system, wire
    return "\n\n".join(block["text"] for block in system), wire


def _tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    wire = []
    for tool in tools:
        if "input_schema" in tool:
            wire.append(tool)
            continue
        entry = {
            "name": tool["name"],
            "input_schema": tool.get("parameters", {"type": "object", "properties": {}}),
        }
        if tool.get("description"):
            entry["description"] = tool["description"]
        wire.append(entry)
    return wire


def _int(value: object) -> int:
    """A token count: a whole number > 0, at most MAX_REPORTED_TOKENS (the ledger stores it); else 0."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return 0
    return min(value, MAX_REPORTED_TOKENS)


def _usage(raw: object) -> Usage:
    """Anthropic's ``usage``: ``input_tokens`` excludes the cache reads and writes, which are
    reported apart; :class:`Usage` counts every input token and says which were cached."""
    if not isinstance(raw, dict):
        return Usage()
    read, written = _int(raw.get("cache_read_input_tokens")), _int(raw.get("cache_creation_input_tokens"))
    return Usage(_int(raw.get("input_tokens")) + read + written, _int(raw.get("output_tokens")), read, written)


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    call_id: str = ""
    name: str = ""


@dataclass
class _StreamState:
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)  # the latest value of each usage field
    stop_reason: object = None
    stopped: bool = False
    model: str | None = None
    chars: int = 0  # of text and tool input so far, for the client-side output limit

    def response(self) -> ModelResponse:
        text: list[str] = []
        calls: list[ToolCallPart] = []
        for index, block in sorted(self.blocks.items()):
            if block.kind == "text":
                text.extend(block.text)
            elif block.kind == "tool_use":
                raw = "".join(block.text)
                try:
                    args: dict[str, Any] | str = json.loads(raw) if raw.strip() else {}
                except ValueError:
                    args = raw
                calls.append(
                    ToolCallPart(
                        tool_call_id=block.call_id or f"toolu_{index}",
                        tool_name=block.name or "unknown_tool",
                        args=args if isinstance(args, dict | str) else raw,
                    )
                )
        finish = _finish(self.stop_reason) if self.stopped else "unknown"
        return ModelResponse(
            "".join(text), tuple(calls), _usage(self.usage), finish, self.model
        )


class AnthropicModel:
    """A :class:`~obsmem.models.base.ChatModel` for Anthropic's Messages API.

    ``endpoint`` carries the key (``x-api-key``) and the ``anthropic-version`` header; build
    one with :func:`obsmem.models.infer_model` (``"anthropic:claude-sonnet-4-5"``) or
    :func:`obsmem.models.registry.anthropic_endpoint`.

    ``max_response_bytes`` and the client-side ``max_output_tokens`` check work as for
    :class:`~obsmem.models.openai.OpenAIChatModel` (8 MiB by default).
    """

    def __init__(
        self,
        model: str,
        endpoint: Endpoint,
        *,
        stream: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: httpx.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.model = model
        self.name = f"{endpoint.provider}:{model}"
        self.endpoint = endpoint
        self.stream = stream
        self.timeout_s = timeout_s
        self.max_response_bytes = check_response_limit(max_response_bytes)
        self._caller = HttpCaller(endpoint, client=client, max_response_bytes=max_response_bytes)

    def build_body(self, messages: list[Message], settings: ModelRequest) -> dict[str, Any]:
        """The exact JSON sent for ``messages``."""
        system, wire = to_anthropic_messages(messages, settings.cache_breakpoints)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_output_tokens or default_max_tokens(self.model),
            "messages": wire,
        }
        if system is not None:
            body["system"] = system
        if settings.temperature is not None:
            body["temperature"] = min(1.0, max(0.0, settings.temperature))
        if settings.tools:
            body["tools"] = _tools(settings.tools)
        if self.stream:
            body["stream"] = True
        body.update(settings.extra)
        return body

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        settings = settings or ModelRequest()
        body = self.build_body(messages, settings)
        timeout_s = settings.timeout_s or self.timeout_s
        with answer_shape(self.endpoint):
            if body.get("stream"):
                return await self._streamed(body, timeout_s, settings.max_output_tokens)
            return self._parse(await self._caller.post_json("v1/messages", body, timeout_s=timeout_s))

    async def _streamed(
        self, body: dict[str, Any], timeout_s: float, max_output_tokens: int | None = None
    ) -> ModelResponse:
        state = _StreamState()
        char_limit = output_char_limit(max_output_tokens)
        # aclosing: leaving the loop early (a [DONE], message_stop) still closes the connection.
        async with aclosing(self._caller.stream_events("v1/messages", body, timeout_s=timeout_s)) as events:
            async for event in events:
                if event.event == "ping":
                    continue
                try:
                    data = json.loads(event.data)
                except (ValueError, RecursionError) as exc:
                    raise malformed(self.endpoint, "a stream event that is not valid JSON") from exc
                if event.event == JSON_BODY_EVENT:  # the server ignored ``stream`` and sent one body
                    return self._parse(data)
                if not isinstance(data, dict):
                    raise malformed(self.endpoint, "a stream event that is not a JSON object")
                kind = data.get("type", event.event)
                if kind == "error":
                    raise self._error_event(data.get("error"))
                self._apply(state, kind, data)
                if char_limit is not None and state.chars > char_limit:
                    assert max_output_tokens is not None
                    raise too_much_output(self.endpoint, max_output_tokens)
                if state.stopped:
                    break
        return state.response()

    @staticmethod
    def _apply(state: _StreamState, kind: object, data: dict[str, Any]) -> None:
        if kind == "message_start":
            message = data.get("message") or {}
            state.model = message.get("model")
            if isinstance(message.get("usage"), dict):
                state.usage.update(message["usage"])
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            state.blocks[int(data.get("index", 0))] = _Block(
                kind=str(block.get("type")),
                text=[block.get("text") or ""],
                call_id=str(block.get("id") or ""),
                name=str(block.get("name") or ""),
            )
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            target = state.blocks.setdefault(int(data.get("index", 0)), _Block(kind="text"))
            piece = ""
            if delta.get("type") == "text_delta":
                piece = delta.get("text") or ""
            elif delta.get("type") == "input_json_delta":
                piece = delta.get("partial_json") or ""
            if delta.get("type") in ("text_delta", "input_json_delta"):
                target.text.append(piece)
                state.chars += len(piece)
        elif kind == "message_delta":
            state.stop_reason = (data.get("delta") or {}).get("stop_reason", state.stop_reason)
            # Cumulative counts; a field the delta leaves out (or sends as null) keeps its value.
            delta_usage = data.get("usage")
            if isinstance(delta_usage, dict):
                state.usage.update({k: v for k, v in delta_usage.items() if v is not None})
        elif kind == "message_stop":
            state.stopped = True

    def _error_event(self, error: object) -> ModelError:
        kind = error.get("type") if isinstance(error, dict) else None
        status = _STREAM_ERROR_STATUS.get(str(kind), 500)
        return status_error(self.endpoint, status, {}, json.dumps({"error": error}).encode())

    def _parse(self, data: object) -> ModelResponse:
        if not isinstance(data, dict):
            raise malformed(self.endpoint, "a response that is not a JSON object")
        if data.get("type") == "error":
            raise self._error_event(data.get("error"))
        content = data.get("content")
        if not isinstance(content, list):
            raise malformed(self.endpoint, "a response without content")
        text: list[str] = []
        calls: list[ToolCallPart] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                args = block.get("input")
                calls.append(
                    ToolCallPart(
                        tool_call_id=str(block.get("id")),
                        tool_name=str(block.get("name")),
                        args=args if isinstance(args, dict) else {},
                    )
                )
        return ModelResponse(
            "".join(text),
            tuple(calls),
            _usage(data.get("usage")),
            _finish(data.get("stop_reason")),
            data.get("model"),
        )
