"""The gateway's Chat Completions over an Anthropic upstream (``--upstream-kind anthropic``).

The context goes out as an Anthropic Messages request (:func:`obsmem.convert.to_anthropic`;
function tools become Anthropic tools), and the answer comes back as a Chat Completion
(:func:`obsmem.convert.from_anthropic`, then :func:`~obsmem.convert.to_openai`). A streaming
client gets a streaming upstream request, translated event by event (:class:`AnthropicStream`):
text and tool-call arguments reach the client as the upstream sends them.
"""

from __future__ import annotations

import json
import time
from typing import Any

from obsmem import InvalidInputError, Message, from_anthropic, to_anthropic, to_openai

__all__ = ["ANTHROPIC_VERSION", "AnthropicStream", "anthropic_request", "chat_completion", "sse_chunk"]

ANTHROPIC_VERSION = "2023-06-01"
#: Anthropic's stop reasons as Chat Completions' finish reasons: a refusal (the safety classifiers
#: cut the answer) and a cut at the context window are not a normal stop; any other reads as one.
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
           "model_context_window_exceeded": "length", "refusal": "content_filter"}  # fmt: skip


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


_CHOICES = {"auto": "auto", "required": "any", "none": "none"}


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    """Chat Completions' ``tool_choice`` and ``parallel_tool_calls`` as Anthropic's ``tool_choice``
    (None: neither said): ``auto``, ``required`` → ``any``, ``none``, a named function → ``tool``,
    ``allowed_tools`` by its mode;
    ``parallel_tool_calls: false`` → ``disable_parallel_tool_use``."""
    if choice is None and parallel is None:
        return None
    if choice is None:
        out: dict[str, Any] = {"type": "auto"}
    elif isinstance(choice, str) and choice in _CHOICES:
        out = {"type": _CHOICES[choice]}
    elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict) \
            and isinstance(choice["function"].get("name"), str):  # fmt: skip
        out = {"type": "tool", "name": choice["function"]["name"]}
    elif isinstance(choice, dict) and choice.get("type") == "allowed_tools" and isinstance(choice.get("allowed_tools"), dict) \
            and choice["allowed_tools"].get("mode") in ("auto", "required"):  # fmt: skip
        # OpenAI's allowed_tools: the mode is what Anthropic can say (its list narrows the tools sent)
        out = {"type": _CHOICES[choice["allowed_tools"]["mode"]]}
    else:
        raise InvalidInputError(
            "'tool_choice' must be 'auto', 'required', 'none', {'type': 'function', 'function': {'name': …}} or "
            "{'type': 'allowed_tools', 'allowed_tools': {'mode': 'auto' | 'required', …}}",
            argument="tool_choice",
        )
    if parallel is not None and not isinstance(parallel, bool):
        raise InvalidInputError("'parallel_tool_calls' must be true or false", argument="parallel_tool_calls")
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
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
    choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
    if choice is not None:
        request["tool_choice"] = choice
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
    prompt, completion = _tokens(usage.get("input_tokens")), _tokens(usage.get("output_tokens"))
    return {
        "id": f"chatcmpl-{answer.get('id', 'anthropic')}", "object": "chat.completion", "created": int(time.time()),
        "model": answer.get("model") or model,
        "choices": [{"index": 0, "message": message, "finish_reason": _FINISH.get(str(answer.get("stop_reason")), "stop")}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }, saved  # fmt: skip


class AnthropicStream:
    """Translates an Anthropic Messages stream into Chat Completions chunks, event by event.

    :meth:`event` takes one server-sent event (its name and parsed data) and returns the chunks
    to send on: the role on ``message_start``, each text delta as a content delta, each
    ``tool_use`` block as a tool call (its name first, then its arguments as they arrive), and the
    finish reason on ``message_stop`` (with a usage chunk when the client asked for one). Thinking
    blocks are not forwarded. :meth:`answer` is the whole message as a non-streaming response
    would have carried it, for saving.
    """

    def __init__(self, model: Any, *, include_usage: bool = False) -> None:
        self.model = model
        self.include_usage = include_usage
        self.id = "anthropic"
        self.created = int(time.time())
        self.blocks: dict[int, dict[str, Any]] = {}
        self.tool_index: dict[int, int] = {}
        self.stop_reason: str | None = None
        self.usage = {"input_tokens": 0, "output_tokens": 0}
        self.finished = False

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": f"chatcmpl-{self.id}", "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip

    def event(self, name: str, data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, dict):
            return []
        kind = data.get("type", name)
        if kind == "message_start":
            message = _dict(data.get("message"))
            self.id = str(message.get("id") or self.id)
            self.model = message.get("model") or self.model
            self._usage(message.get("usage"))
            return [self._chunk({"role": "assistant", "content": ""})]
        index = data.get("index")
        if kind == "content_block_start" and isinstance(index, int):
            block = _dict(data.get("content_block"))
            if block.get("type") == "tool_use":
                self.blocks[index] = {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "json": []}
                position = self.tool_index[index] = len(self.tool_index)
                call = {"index": position, "id": block.get("id"), "type": "function",
                        "function": {"name": block.get("name") or "", "arguments": ""}}  # fmt: skip
                return [self._chunk({"tool_calls": [call]})]
            if block.get("type") == "text":
                text = str(block.get("text") or "")
                self.blocks[index] = {"type": "text", "text": [text]}
                return [self._chunk({"content": text})] if text else []
            return []
        if kind == "content_block_delta" and isinstance(index, int) and index in self.blocks:
            delta = _dict(data.get("delta"))
            block = self.blocks[index]
            if delta.get("type") == "text_delta" and block["type"] == "text":
                text = str(delta.get("text") or "")
                block["text"].append(text)
                return [self._chunk({"content": text})] if text else []
            if delta.get("type") == "input_json_delta" and block["type"] == "tool_use":
                partial = str(delta.get("partial_json") or "")
                block["json"].append(partial)
                call = {"index": self.tool_index[index], "function": {"arguments": partial}}
                return [self._chunk({"tool_calls": [call]})] if partial else []
            return []
        if kind == "message_delta":
            delta = _dict(data.get("delta"))
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self._usage(data.get("usage"))
            return []
        if kind == "message_stop" and not self.finished:
            self.finished = True
            chunks = [self._chunk({}, _FINISH.get(str(self.stop_reason), "stop"))]
            if self.include_usage:
                prompt, completion = self.usage["input_tokens"], self.usage["output_tokens"]
                chunks.append({**self._chunk({}), "choices": [],
                               "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                         "total_tokens": prompt + completion}})  # fmt: skip
            return chunks
        return []

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            for key in ("input_tokens", "output_tokens"):
                if isinstance(usage.get(key), int):
                    self.usage[key] = usage[key]

    def answer(self) -> dict[str, Any]:
        """The message so far, shaped like a Messages API response, tool inputs parsed. A tool
        call whose input is not a whole JSON object (cut off, e.g. at ``max_tokens``) is left out:
        never saved as a call its arguments did not finish."""
        content: list[dict[str, Any]] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block["type"] == "text":
                content.append({"type": "text", "text": "".join(block["text"])})
                continue
            try:
                arguments = json.loads("".join(block["json"]) or "{}")
            except (ValueError, RecursionError):  # cut off, or nested too deep to decode
                continue
            if not isinstance(arguments, dict):
                continue
            content.append({"type": "tool_use", "id": block["id"], "name": block["name"], "input": arguments})
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": self.stop_reason, "usage": dict(self.usage)}  # fmt: skip


def _tokens(value: Any) -> int:
    """A token count of the upstream's ``usage``: a whole number >= 0, else 0 (a count that is a
    list, a word or ``1e400`` is not the client's problem, nor a reason to drop the answer)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def sse_chunk(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk)}\n\n".encode()
