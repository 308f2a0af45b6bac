"""OpenAI Chat Completions over HTTP, and every server that speaks it (Ollama, vLLM, Groq …).

Only the wire format lives here: obsmem messages to ``/chat/completions`` JSON and back,
streamed (server-sent ``chat.completion.chunk`` events, usage from the final chunk via
``stream_options.include_usage``) or not. Talking to the server and mapping its failures is
:mod:`obsmem.models.transport`'s job; which server, key and base URL a ``provider:model``
string means is :mod:`obsmem.models.registry`'s.

Mapping, both ways:

- system/user/assistant text as ``content``; images as ``image_url`` parts;
- :class:`~obsmem.types.ToolCallPart` ↔ ``tool_calls`` (``function.arguments`` is a JSON
  string on the wire, a dict in obsmem; arguments that are not valid JSON stay a string);
- :class:`~obsmem.types.ToolResultPart` → one ``role: tool`` message per result;
- reasoning and data parts are never sent;
- ``finish_reason``: ``stop``, ``length``, ``tool_calls`` (and the legacy ``function_call``),
  ``content_filter`` as is; a stream that ends without one is ``unknown``, which the retry
  machinery treats as an incomplete, retryable response.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal

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
from obsmem.profiles import accepts_temperature
from obsmem.types import FilePart, Message, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "OpenAIChatModel",
    "StreamState",
    "accepts_temperature",
    "completion_error",
    "parse_completion",
    "parse_usage",
    "to_openai_messages",
    "to_openai_tools",
]

CACHE_KEY_PROVIDERS = frozenset({"openai", "azure"})
"""Providers whose Chat Completions accept ``prompt_cache_key`` (sent when a request has a cache key)."""

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def _finish(raw: object) -> FinishReason:
    if raw is None:
        return "unknown"
    return _FINISH.get(str(raw), "other")


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _file_part(part: FilePart) -> dict[str, Any] | None:
    source = part.url or part.data
    if source is None:
        return None
    if part.data is not None and not part.data.startswith("data:"):
        source = f"data:{part.media_type};base64,{part.data}"
    if part.is_image:
        image: dict[str, Any] = {"url": source}
        if part.detail:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if part.data is not None:
        return {"type": "file", "file": {"file_data": source, "filename": part.filename or "attachment"}}
    return {"type": "text", "text": f"[attachment: {part.url}]"}


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Plain text stays a string: the most widely accepted form across compatible servers."""
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """obsmem messages as Chat Completions ``messages``."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        content: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, FilePart):
                converted = _file_part(part)
                if converted is not None:
                    content.append(converted)
            elif isinstance(part, ToolCallPart):
                calls.append(
                    {
                        "id": part.tool_call_id,
                        "type": "function",
                        "function": {"name": part.tool_name, "arguments": _json_text(part.args)},
                    }
                )
            elif isinstance(part, ToolResultPart):
                results.append(
                    {"role": "tool", "tool_call_id": part.tool_call_id, "content": _json_text(part.result)}
                )
            # ReasoningPart and DataPart are never sent back to a model.
        if message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": _content(content) if content else None}
            if calls:
                entry["tool_calls"] = calls
            if content or calls:
                wire.append(entry)
        elif message.role != "tool" and content:
            wire.append({"role": message.role, "content": _content(content)})
        wire.extend(results)
    return wire


def to_openai_tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """Neutral tool definitions (``name``, ``description``, ``parameters`` JSON schema) on the wire.

    A definition already in OpenAI's ``{"type": "function", ...}`` form passes unchanged.
    """
    wire = []
    for tool in tools:
        if tool.get("type") == "function":
            wire.append(tool)
            continue
        function = {
            "name": tool["name"],
            "parameters": tool.get("parameters", {"type": "object", "properties": {}}),
        }
        if tool.get("description"):
            function["description"] = tool["description"]
        wire.append({"type": "function", "function": function})
    return wire


def _tool_call(call_id: str, name: str, arguments: str) -> ToolCallPart:
    try:
        args: dict[str, Any] | str = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        args = arguments
    if not isinstance(args, dict | str):
        args = arguments
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args=args)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 0
    try:
        return min(MAX_REPORTED_TOKENS, max(0, int(value)))
    except (ValueError, OverflowError):  # "many", 1e400
        return 0


def parse_usage(raw: object) -> Usage:
    """A ``usage`` object of Chat Completions (``prompt_tokens``, ``prompt_tokens_details.
    cached_tokens``) or of the Responses API (``input_tokens``, ``input_tokens_details.
    cached_tokens``) as :class:`Usage`; cache reads that a proxy reports Anthropic's way
    (``cache_read_input_tokens``, ``cache_creation_input_tokens``, LiteLLM) count too."""
    if not isinstance(raw, dict):
        return Usage()
    if "prompt_tokens" in raw or "completion_tokens" in raw:
        total_in, out = _int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens"))
        details = raw.get("prompt_tokens_details")
    else:
        total_in, out = _int(raw.get("input_tokens")), _int(raw.get("output_tokens"))
        details = raw.get("input_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = cached or _int(raw.get("cache_read_input_tokens"))
    written = _int(raw.get("cache_creation_input_tokens"))
    if isinstance(details, dict):
        written = written or _int(details.get("cache_creation_tokens"))
    return Usage(total_in, out, min(cached, total_in), min(written, max(0, total_in - cached)))


_usage = parse_usage


@dataclass
class StreamState:
    """What the chunks of one streamed completion add up to."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish: FinishReason = "unknown"
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    chars: int = 0  # of text and tool arguments so far, for the client-side output limit

    def add(self, chunk: dict[str, Any]) -> None:
        self.model = _name(chunk.get("model")) or self.model
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
                self.chars += len(str(delta["content"]))
            for call in delta.get("tool_calls") or ():
                slot = self.calls.setdefault(
                    int(call.get("index", len(self.calls))), {"id": "", "name": "", "args": ""}
                )
                function = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] = function.get("name") or slot["name"]
                arguments = function.get("arguments") or ""
                slot["args"] += arguments
                self.chars += len(arguments)
            if choice.get("finish_reason") is not None:
                self.finish = _finish(choice["finish_reason"])

    def response(self) -> ModelResponse:
        calls = tuple(
            _tool_call(slot["id"] or f"call_{index}", slot["name"], slot["args"])
            for index, slot in sorted(self.calls.items())
            if slot["name"]
        )
        return ModelResponse("".join(self.text), calls, self.usage, self.finish, self.model)


def _json(text: str, endpoint: Endpoint) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise malformed(endpoint, "a body that is not valid JSON") from exc


def completion_error(endpoint: Endpoint, error: object) -> ModelError:
    """An error object inside a 200 answer (OpenRouter, vLLM send them mid-stream) as an HTTP error."""
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code <= 599 else 500
    return status_error(endpoint, status, {}, json.dumps({"error": error}).encode())


def _name(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _text(content: object, endpoint: Endpoint) -> str:
    """A message's ``content``: a string, nothing, or a list of text parts (some compatible
    servers send one), joined; anything else is an answer of an odd shape (retryable)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        texts = [part.get("text") for part in content if part.get("type") in ("text", "output_text")]
        if all(isinstance(text, str) for text in texts):
            return "".join(str(text) for text in texts)
    raise malformed(endpoint, f"a message whose content is {type(content).__name__}, not text")


def parse_completion(data: object, endpoint: Endpoint) -> ModelResponse:
    """A non-streamed ``chat.completion`` object as a :class:`ModelResponse`."""
    if not isinstance(data, dict):
        raise malformed(endpoint, "a response that is not a JSON object")
    if data.get("error") is not None:
        raise completion_error(endpoint, data["error"])
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed(endpoint, "a response without choices")
    message = choices[0].get("message") or {}
    calls = tuple(
        _tool_call(
            call.get("id") or f"call_{i}",
            (call.get("function") or {}).get("name", ""),
            (call.get("function") or {}).get("arguments") or "",
        )
        for i, call in enumerate(message.get("tool_calls") or ())
        if (call.get("function") or {}).get("name")
    )
    return ModelResponse(
        text=_text(message.get("content"), endpoint),
        tool_calls=calls,
        usage=_usage(data.get("usage")),
        finish_reason=_finish(choices[0].get("finish_reason")),
        model_name=_name(data.get("model")),
    )


class OpenAIChatModel:
    """A :class:`~obsmem.models.base.ChatModel` for any Chat Completions endpoint.

    ``name`` is ``provider:model`` (``openai:gpt-4o-mini``, ``ollama:llama3.1``).
    ``max_tokens_field`` is ``max_completion_tokens`` for OpenAI itself (its reasoning models
    refuse the older ``max_tokens``) and ``max_tokens`` for compatible servers, most of which
    only know that one. ``stream`` chooses server-sent events (the default: a long reflection
    then never sits silent on the connection until a proxy drops it).

    ``max_response_bytes`` (default :data:`~obsmem.models.transport.DEFAULT_MAX_RESPONSE_BYTES`,
    8 MiB; None for no limit) bounds what is read of one answer, streamed or not; a streamed
    answer is also cut when its text passes a request's ``max_output_tokens`` by far
    (:func:`~obsmem.models.transport.output_char_limit`). Either is a permanent
    :class:`~obsmem.errors.ModelRequestError` naming the limit.
    """

    def __init__(
        self,
        model: str,
        endpoint: Endpoint,
        *,
        stream: bool = True,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: httpx.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        send_cache_key: bool | None = None,
    ) -> None:
        self.model = model
        # Only OpenAI itself is known to accept ``prompt_cache_key``; a strict compatible server
        # (Groq) refuses unknown fields, so elsewhere it is opt-in.
        self.send_cache_key = endpoint.provider in CACHE_KEY_PROVIDERS if send_cache_key is None else send_cache_key
        self.name = f"{endpoint.provider}:{model}"
        self.endpoint = endpoint
        self.stream = stream
        self.max_tokens_field = max_tokens_field
        self.timeout_s = timeout_s
        self.max_response_bytes = check_response_limit(max_response_bytes)
        self._caller = HttpCaller(endpoint, client=client, max_response_bytes=max_response_bytes)

    def build_body(self, messages: list[Message], settings: ModelRequest) -> dict[str, Any]:
        """The exact JSON sent for ``messages`` (public so a request can be inspected offline)."""
        body: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(messages)}
        if settings.temperature is not None and accepts_temperature(self.model):
            body["temperature"] = settings.temperature
        if settings.max_output_tokens is not None:
            body[self.max_tokens_field] = settings.max_output_tokens
        if settings.tools:
            body["tools"] = to_openai_tools(settings.tools)
        if settings.cache_key and self.send_cache_key:
            body["prompt_cache_key"] = settings.cache_key
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        body.update(settings.extra)
        return body

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        settings = settings or ModelRequest()
        body = self.build_body(messages, settings)
        timeout_s = settings.timeout_s or self.timeout_s
        with answer_shape(self.endpoint):
            if body.get("stream"):
                return await self._streamed(body, timeout_s, settings.max_output_tokens)
            return parse_completion(
                await self._caller.post_json("chat/completions", body, timeout_s=timeout_s), self.endpoint
            )

    async def _streamed(
        self, body: dict[str, Any], timeout_s: float, max_output_tokens: int | None = None
    ) -> ModelResponse:
        state = StreamState()
        char_limit = output_char_limit(max_output_tokens)
        # aclosing: leaving the loop early (a [DONE], message_stop) still closes the connection.
        async with aclosing(
            self._caller.stream_events("chat/completions", body, timeout_s=timeout_s)
        ) as events:
            async for event in events:
                if event.event == JSON_BODY_EVENT:
                    return parse_completion(_json(event.data, self.endpoint), self.endpoint)
                if event.data.strip() == "[DONE]":
                    break
                try:
                    chunk = json.loads(event.data)
                except (ValueError, RecursionError) as exc:
                    raise malformed(self.endpoint, "a stream event that is not valid JSON") from exc
                if not isinstance(chunk, dict):
                    raise malformed(self.endpoint, "a stream event that is not a JSON object")
                if chunk.get("error") is not None:
                    raise completion_error(self.endpoint, chunk["error"])
                state.add(chunk)
                if char_limit is not None and state.chars > char_limit:
                    assert max_output_tokens is not None
                    raise too_much_output(self.endpoint, max_output_tokens)
        return state.response()
