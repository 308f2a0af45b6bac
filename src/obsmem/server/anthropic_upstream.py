"""The gateway's Chat Completions over an Anthropic upstream (``--upstream-kind anthropic``).

The context goes out as an Anthropic Messages request (:func:`obsmem.convert.to_anthropic`;
function tools become Anthropic tools), and the answer comes back as a Chat Completion
(:func:`obsmem.convert.from_anthropic`, then :func:`~obsmem.convert.to_openai`). The upstream is
asked without streaming; a streaming client gets the translated answer as one content chunk, a
finish chunk and ``[DONE]``, so the OpenAI client's stream API works, though not incrementally.
"""

from __future__ import annotations

import json
import time
from typing import Any

from obsmem import InvalidInputError, Message, from_anthropic, to_anthropic, to_openai

__all__ = ["ANTHROPIC_VERSION", "anthropic_request", "chat_completion", "completion_stream"]

ANTHROPIC_VERSION = "2023-06-01"
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidInputError("'tools' must be a list", argument="tools")
    out = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidInputError(f"tools[{index}] is not a function tool", argument=f"tools[{index}]")
        out.append({
            "name": function["name"], "description": function.get("description") or "",
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        })  # fmt: skip
    return out


def anthropic_request(body: dict[str, Any], messages: list[Message]) -> dict[str, Any]:
    """A Messages API request for a Chat Completions ``body`` whose history is ``messages``."""
    system, wire = to_anthropic(messages)
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or 1024
    request: dict[str, Any] = {"model": body.get("model"), "max_tokens": limit, "messages": wire}
    if system:
        request["system"] = system
    tools = _tools(body.get("tools"))
    if tools:
        request["tools"] = tools
    for key in ("temperature", "top_p"):
        if isinstance(body.get(key), int | float):
            request[key] = body[key]
    if isinstance(body.get("stop"), str | list):
        request["stop_sequences"] = [body["stop"]] if isinstance(body["stop"], str) else body["stop"]
    return request


def chat_completion(answer: dict[str, Any], model: Any, history: list[Message]) -> tuple[dict[str, Any], list[Message]]:
    """The Chat Completion for an Anthropic response, and the answer as obsmem messages."""
    saved = from_anthropic([answer], history=history)
    wire = [m for m in to_openai(saved) if m.get("role") == "assistant"]
    message = wire[0] if wire else {"role": "assistant", "content": ""}
    raw_usage = answer.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    return {
        "id": f"chatcmpl-{answer.get('id', 'anthropic')}", "object": "chat.completion", "created": int(time.time()),
        "model": answer.get("model") or model,
        "choices": [{"index": 0, "message": message, "finish_reason": _FINISH.get(str(answer.get("stop_reason")), "stop")}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }, saved  # fmt: skip


def completion_stream(completion: dict[str, Any]) -> bytes:
    """``completion`` as Chat Completions stream events (one delta, the finish, ``[DONE]``)."""
    choice = completion["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}  # fmt: skip
    events = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
    ]
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"
