"""A local OpenAI-compatible server that answers like an agent model, for the framework tests.

:class:`AgentModel` is a responder for :class:`tests.models.wire_server.WireServer` (set
``server.responder = AgentModel()``). Over real HTTP it answers the two OpenAI APIs every
framework speaks, streaming (server-sent events) or not, as the request asks:

* Chat Completions (``POST /v1/chat/completions``),
* Responses (``POST /v1/responses``).

It behaves like a small, deterministic agent model:

* when the newest message is a **tool result**, it answers text quoting that result
  (``"The tool said: <result>"``), unless an ``on_results`` rule matches it (then it calls
  that rule's tool again: a long loop within one run);
* when the newest user text matches a :class:`ToolRule` whose tool the request offers, it calls
  that tool (one call, with a fresh id ``call_<n>``);
* otherwise it answers text that echoes the user's words (``"You said: <text>"``).

Before answering it validates the request (:func:`assert_valid_chat_sequence`,
:func:`assert_valid_responses_input`); an invalid request gets an HTTP 400 like a real provider
would give, and is kept in :attr:`AgentModel.invalid` so a test can assert there were none.
WireServer records every request (``server.requests``); :func:`request_text` flattens one body
to its text, to look for observations in what the framework sent.

The memory side runs obsmem's own offline observer: :func:`small_memory_config` gives
thresholds small enough that a few dozen short turns produce observations.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig
from tests.models.wire_server import Recorded, Reply, sse

__all__ = [
    "AgentModel",
    "InvalidSequence",
    "ToolRule",
    "assert_valid_chat_sequence",
    "assert_valid_responses_input",
    "last_user_text",
    "request_text",
    "small_memory_config",
    "weather_rule",
]

MODEL_NAME = "agent-test-model"


class InvalidSequence(AssertionError):
    """A request whose messages a provider would refuse (orphan tool call or result, bad role)."""


@dataclass(frozen=True)
class ToolRule:
    """Call ``tool`` when the newest user text matches ``pattern``; ``args`` builds the arguments.

    With ``on_results`` the rule reads the newest tool result instead: a tool whose result
    matches is called again, so one run chains many calls (a long agent loop).
    """

    pattern: str
    tool: str
    args: Callable[[re.Match[str]], dict[str, Any]]
    on_results: bool = False


def weather_rule(tool: str = "get_weather") -> ToolRule:
    """``... weather in <City> ...`` calls ``tool(city=<City>)``."""
    return ToolRule(r"weather in ([A-Z][a-z]+)", tool, lambda m: {"city": m.group(1)})


# -- validation -------------------------------------------------------------------------------------

_CHAT_ROLES = {"system", "developer", "user", "assistant", "tool"}


def _content_text(content: Any) -> str:
    """The text of a message's content: a string or a list of typed parts (any API's)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict):
                value = part.get("text")
                if isinstance(value, str):
                    texts.append(value)
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts)
    return str(content)


def assert_valid_chat_sequence(body: Any) -> None:
    """Raise :class:`InvalidSequence` unless ``body["messages"]`` is a sequence Chat Completions takes.

    Legal roles only; every assistant tool call (with an id) is answered by a ``tool`` message
    with the same ``tool_call_id``, in the messages right after it (only tool messages between);
    no tool message without its call; no call left unanswered at the end; at least one message
    that is not a system/developer message.
    """
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise InvalidSequence(f"no messages in the request: {body!r:.200}")
    pending: list[str] = []
    answered: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in _CHAT_ROLES:
            raise InvalidSequence(f"messages[{index}]: illegal role {role!r}")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise InvalidSequence(f"messages[{index}]: tool result {call_id!r} without a pending call")
            pending.remove(call_id)
            answered.add(call_id)
            continue
        if pending:
            raise InvalidSequence(f"messages[{index}] ({role}) comes before the results of calls {pending}")
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                call_id = call.get("id")
                if not call_id or call_id in answered or call_id in pending:
                    raise InvalidSequence(f"messages[{index}]: tool call id {call_id!r} missing or reused")
                if call.get("type", "function") != "function" or not call.get("function", {}).get("name"):
                    raise InvalidSequence(f"messages[{index}]: malformed tool call {call!r}")
                pending.append(call_id)
    if pending:
        raise InvalidSequence(f"tool calls {pending} have no result")
    if all(m["role"] in {"system", "developer"} for m in messages):
        raise InvalidSequence("only system messages: nothing for the model to answer")


def _response_items(body: Any) -> list[dict[str, Any]]:
    raw = body.get("input") if isinstance(body, dict) else None
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise InvalidSequence(f"no input in the request: {body!r:.200}")
    items = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidSequence(f"input[{index}] is not an item: {item!r:.100}")
        kind = item.get("type") or ("message" if "role" in item else None)
        items.append({**item, "type": kind})
    return items


def assert_valid_responses_input(body: Any) -> None:
    """Raise :class:`InvalidSequence` unless ``body["input"]`` is an input the Responses API takes.

    Messages have legal roles; every ``function_call`` has a ``call_id`` used once and is
    answered by exactly one later ``function_call_output`` with that ``call_id``, with no message
    between the call and its output; no output without its call, and none left unanswered.
    """
    pending: list[str] = []
    seen: set[str] = set()
    for index, item in enumerate(_response_items(body)):
        kind = item["type"]
        if kind == "message":
            if item.get("role") not in {"system", "developer", "user", "assistant"}:
                raise InvalidSequence(f"input[{index}]: illegal role {item.get('role')!r}")
            if pending:
                raise InvalidSequence(f"input[{index}] (a message) comes before the outputs of calls {pending}")
        elif kind == "function_call":
            call_id = item.get("call_id")
            if not call_id or call_id in seen or not item.get("name"):
                raise InvalidSequence(f"input[{index}]: function call id {call_id!r} missing or reused")
            seen.add(call_id)
            pending.append(call_id)
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in pending:
                raise InvalidSequence(f"input[{index}]: output {call_id!r} without a pending call")
            pending.remove(call_id)
        elif kind == "reasoning":
            continue
        else:
            raise InvalidSequence(f"input[{index}]: unexpected item type {kind!r}")
    if pending:
        raise InvalidSequence(f"function calls {pending} have no output")


def request_text(body: Any) -> str:
    """Every piece of text of a Chat Completions or Responses request body, joined."""
    if not isinstance(body, dict):
        return str(body)
    texts: list[str] = []
    if isinstance(body.get("instructions"), str):
        texts.append(body["instructions"])
    for message in body.get("messages") or []:
        texts.append(_content_text(message.get("content")))
    raw = body.get("input")
    if isinstance(raw, str):
        texts.append(raw)
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict):
            texts.append(_content_text(item.get("content")))
            if isinstance(item.get("output"), str):
                texts.append(item["output"])
    return "\n".join(t for t in texts if t)


def last_user_text(body: Any) -> str:
    """The text of the newest user message of a Chat Completions or Responses request."""
    if isinstance(body.get("messages"), list):
        users = [m for m in body["messages"] if m.get("role") == "user"]
    else:
        users = [i for i in _response_items(body) if i["type"] == "message" and i.get("role") == "user"]
    return _content_text(users[-1].get("content")) if users else ""


# -- the model --------------------------------------------------------------------------------------


@dataclass
class _Turn:
    """What the model saw last: a user's text or a tool's result."""

    kind: str  # "user" | "tool"
    text: str
    offered_tools: set[str]


def _chat_last(body: dict[str, Any]) -> _Turn:
    messages = body["messages"]
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    last = messages[-1]
    if last["role"] == "tool":
        return _Turn("tool", _content_text(last.get("content")), tools)
    users = [m for m in messages if m["role"] == "user"]
    return _Turn("user", _content_text(users[-1]["content"]) if users else "", tools)


def _responses_last(body: dict[str, Any]) -> _Turn:
    items = _response_items(body)
    tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    last = items[-1]
    if last["type"] == "function_call_output":
        output = last.get("output")
        return _Turn("tool", output if isinstance(output, str) else _content_text(output), tools)
    users = [i for i in items if i["type"] == "message" and i.get("role") == "user"]
    return _Turn("user", _content_text(users[-1].get("content")) if users else "", tools)


@dataclass
class AgentModel:
    """The responder: see the module docstring. Thread-safe (WireServer serves concurrently)."""

    rules: Sequence[ToolRule] = field(default_factory=lambda: [weather_rule()])
    invalid: list[tuple[str, str]] = field(default_factory=list)
    answered: int = 0
    tool_calls: int = 0
    issued_calls: list[str] = field(default_factory=list)  # the ids of every tool call it made
    _ids: Iterable[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{next(iter(self._ids))}"

    def decide(self, turn: _Turn) -> tuple[str, dict[str, Any]] | str:
        """A tool call ``(name, args)`` or the text to answer."""
        for rule in self.rules:
            if rule.on_results != (turn.kind == "tool"):
                continue
            match = re.search(rule.pattern, turn.text)
            if match and rule.tool in turn.offered_tools:
                return rule.tool, rule.args(match)
        if turn.kind == "tool":
            return f"The tool said: {turn.text}"
        words = " ".join(turn.text.split())
        return f"You said: {words}"

    def __call__(self, request: Recorded) -> Reply:
        body = request.body
        path = request.path.split("?")[0]
        try:
            if path.endswith("/chat/completions"):
                assert_valid_chat_sequence(body)
                reply = self._chat(body)
            elif path.endswith("/responses"):
                assert_valid_responses_input(body)
                reply = self._responses(body)
            else:
                return Reply(status=404, json={"error": {"message": f"no route {path}"}})
        except InvalidSequence as exc:
            with self._lock:
                self.invalid.append((path, str(exc)))
            return Reply(status=400, json={"error": {"message": f"invalid request: {exc}", "type": "invalid_request"}})
        with self._lock:
            self.answered += 1
        return reply

    # -- Chat Completions -------------------------------------------------------------------------
    def _chat(self, body: dict[str, Any]) -> Reply:
        decision = self.decide(_chat_last(body))
        completion_id = self._next_id("chatcmpl")
        created = int(time.time())
        model = body.get("model") or MODEL_NAME
        usage = {"prompt_tokens": len(request_text(body)) // 4 + 1, "completion_tokens": 5, "total_tokens": 0}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if isinstance(decision, str):
            message: dict[str, Any] = {"role": "assistant", "content": decision}
            finish = "stop"
        else:
            with self._lock:
                self.tool_calls += 1
            call_id = self._next_id("call")
            with self._lock:
                self.issued_calls.append(call_id)
            call = {
                "id": call_id, "type": "function",
                "function": {"name": decision[0], "arguments": json.dumps(decision[1])},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        if not body.get("stream"):
            return Reply(json={
                "id": completion_id, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": usage,
            })

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
            return sse({
                "id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            })

        events = [chunk({"role": "assistant", "content": ""})]
        if isinstance(decision, str):
            words = decision.split(" ")
            events += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
        else:
            call = message["tool_calls"][0]
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            events.append(chunk({"tool_calls": [{
                "index": 0, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": arguments[:half]},
            }]}))
            events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]}))
        events.append(chunk({}, finish))
        events.append(sse({
            "id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [], "usage": usage,
        }))
        events.append(sse("[DONE]"))
        return Reply(events=events)

    # -- Responses --------------------------------------------------------------------------------
    def _responses(self, body: dict[str, Any]) -> Reply:
        decision = self.decide(_responses_last(body))
        response_id = self._next_id("resp")
        model = body.get("model") or MODEL_NAME
        if isinstance(decision, str):
            item: dict[str, Any] = {
                "type": "message", "id": self._next_id("msg"), "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": decision, "annotations": [], "logprobs": []}],
            }
        else:
            with self._lock:
                self.tool_calls += 1
            call_id = self._next_id("call")
            with self._lock:
                self.issued_calls.append(call_id)
            item = {
                "type": "function_call", "id": self._next_id("fc"), "call_id": call_id,
                "name": decision[0], "arguments": json.dumps(decision[1]), "status": "completed",
            }
        input_tokens = len(request_text(body)) // 4 + 1
        response = {
            "id": response_id, "object": "response", "created_at": time.time(), "model": model,
            "status": "completed", "output": [item], "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
            "temperature": 1.0, "top_p": 1.0, "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": {
                "input_tokens": input_tokens, "output_tokens": 5, "total_tokens": input_tokens + 5,
                "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        if not body.get("stream"):
            return Reply(json=response)
        sequence = itertools.count()

        def event(kind: str, **data: Any) -> str:
            return sse({"type": kind, "sequence_number": next(sequence), **data}, event=kind)

        in_progress = {**response, "status": "in_progress", "output": [], "usage": None}
        events = [
            event("response.created", response=in_progress),
            event("response.in_progress", response=in_progress),
        ]
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(event("response.output_item.added", output_index=0,
                                item={**item, "status": "in_progress", "content": []}))
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            events.append(event("response.content_part.added", item_id=item["id"], output_index=0,
                                content_index=0, part=empty))
            words = text.split(" ")
            for i, word in enumerate(words):
                events.append(event("response.output_text.delta", item_id=item["id"], output_index=0,
                                    content_index=0, delta=word if i == 0 else " " + word, logprobs=[]))
            events.append(event("response.output_text.done", item_id=item["id"], output_index=0,
                                content_index=0, text=text, logprobs=[]))
            events.append(event("response.content_part.done", item_id=item["id"], output_index=0,
                                content_index=0, part=item["content"][0]))
        else:
            events.append(event("response.output_item.added", output_index=0,
                                item={**item, "status": "in_progress", "arguments": ""}))
            events.append(event("response.function_call_arguments.delta", item_id=item["id"], output_index=0,
                                delta=item["arguments"]))
            events.append(event("response.function_call_arguments.done", item_id=item["id"], output_index=0,
                                arguments=item["arguments"], name=item["name"]))
        events.append(event("response.output_item.done", output_index=0, item=item))
        events.append(event("response.completed", response=response))
        return Reply(events=events)


def small_memory_config(
    *, message_tokens: int = 400, reflection_tokens: int = 4000, buffered: bool = False, retrieval: bool = False
) -> MemoryConfig:
    """Thresholds small enough that a few dozen short turns are observed by the offline observer.

    ``buffered``: observe ahead in the background (obsmem's buffering), as in production; else
    every observation runs at a turn boundary. ``retrieval``: turn on the recall tool.
    """
    return MemoryConfig(
        retrieval=retrieval,
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=0.25 if buffered else False),
        reflection=ReflectionConfig(observation_tokens=reflection_tokens),
    )
