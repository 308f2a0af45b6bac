"""Test doubles for :class:`~obsmem.models.base.ChatModel`: public API for testing your own agents.

Two shapes cover what tests need:

- :class:`ScriptedModel` answers from a list, in order: text, a full
  :class:`~obsmem.models.base.ModelResponse`, an exception to raise (to exercise retries and
  failure policies) or a function of the messages. Use it when you know the conversation.
- :class:`FunctionModel` calls your function for every request. Use it when the answer
  depends on what was sent, or to capture exactly what a provider would have received.

Both record every call in ``requests`` (messages and settings, in order) and never touch the
network. Both report a non-zero :class:`~obsmem.models.base.Usage` estimated at four
characters per token, so code that accounts for tokens sees plausible numbers without
depending on a tokenizer. A response you build yourself keeps its usage when it has one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeAlias

from obsmem.errors import ModelOutputError
from obsmem.models.base import ModelRequest, ModelResponse, Usage
from obsmem.types import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["FunctionModel", "ScriptedModel", "ScriptedResponse"]

ScriptedResponse: TypeAlias = (
    str | ModelResponse | BaseException | Callable[[list[Message]], str | ModelResponse]
)
"""One entry of a :class:`ScriptedModel` script."""

_Recorded: TypeAlias = tuple[list[Message], ModelRequest | None]


def _message_chars(message: Message) -> int:
    """Characters a provider would bill for: text, reasoning, tool arguments and results."""
    total = 0
    for part in message.parts:
        if isinstance(part, TextPart | ReasoningPart):
            total += len(part.text)
        elif isinstance(part, ToolCallPart):
            args = part.args
            total += len(part.tool_name) + len(args if isinstance(args, str) else json.dumps(args))
        elif isinstance(part, ToolResultPart):
            total += len(part.tool_name) + len(str(part.result))
    return total


def _estimate_usage(messages: list[Message], text: str) -> Usage:
    return Usage(
        input_tokens=math.ceil(sum(_message_chars(m) for m in messages) / 4),
        output_tokens=math.ceil(len(text) / 4),
    )


def _to_response(
    value: object, *, messages: list[Message], model_name: str, usage: Usage | None, source: str
) -> ModelResponse:
    """Normalise what a script or function produced into a :class:`ModelResponse`.

    A string becomes a complete (``stop``) response. A ModelResponse is kept as built, except
    that an all-zero usage and a missing ``model_name`` are filled in, the way a real provider
    always reports both.
    """
    if isinstance(value, str):
        response = ModelResponse(text=value, finish_reason="stop")
    elif isinstance(value, ModelResponse):
        response = value
    else:
        raise TypeError(f"{source} must produce a str or a ModelResponse, not {type(value).__name__}")
    if response.usage == Usage():
        response = dataclasses.replace(response, usage=usage or _estimate_usage(messages, response.text))
    if response.model_name is None:
        response = dataclasses.replace(response, model_name=model_name)
    return response


class ScriptedModel:
    """A chat model that plays back a script, one entry per call.

    Each entry is used once, in order:

    - ``str``: answered as text with finish reason ``stop``;
    - :class:`ModelResponse`: returned (tool calls, a chosen finish reason, usage);
    - an exception instance: raised, e.g. ``ModelUnavailableError("rate limited",
      status_code=429)`` to test retries;
    - a callable: called with the messages; its str or ModelResponse is the answer.

    When the script runs out the call raises :class:`~obsmem.errors.ModelOutputError`, so a
    test that makes more calls than it planned fails loudly instead of hanging or looping;
    ``repeat_last=True`` keeps answering with the last entry instead. The script is consumed
    lazily, so an endless iterator (``itertools.cycle``) works too.

    ``usage_per_call`` replaces the four-characters-per-token estimate for entries that do
    not carry their own usage. Every call, including one that raises, is recorded in
    :attr:`requests` before it is answered, so ``calls`` counts attempts.

    Each call yields to the event loop once, as a network call would, so tests of
    concurrency and cancellation behave as they would against a real provider.
    """

    __test__ = False  # public API often imported into test modules; pytest must never collect it

    def __init__(
        self,
        responses: Iterable[ScriptedResponse],
        *,
        name: str = "test:scripted",
        repeat_last: bool = False,
        usage_per_call: Usage | None = None,
    ) -> None:
        if isinstance(responses, str | ModelResponse):
            # A bare string is an iterable of characters: almost certainly a missing [...].
            raise TypeError("ScriptedModel takes a list of responses, e.g. ScriptedModel([text])")
        self.name = name
        self.repeat_last = repeat_last
        self.usage_per_call = usage_per_call
        self.requests: list[_Recorded] = []
        self._script = iter(responses)
        self._last: ScriptedResponse | None = None

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        self.requests.append((list(messages), settings))  # a copy: later edits by anyone can't rewrite it
        messages = list(messages)
        await asyncio.sleep(0)
        entry = self._next_entry()
        if isinstance(entry, BaseException):
            raise entry
        value = entry if isinstance(entry, str | ModelResponse) else entry(messages)
        return _to_response(
            value,
            messages=messages,
            model_name=self.name,
            usage=self.usage_per_call,
            source=f"ScriptedModel entry for call {self.calls}",
        )

    def _next_entry(self) -> ScriptedResponse:
        entry = next(self._script, None)
        if entry is not None:
            self._last = entry
            return entry
        if self.repeat_last and self._last is not None:
            return self._last
        raise ModelOutputError(
            f"ScriptedModel has no response left for call {self.calls}; "
            "give it more responses or repeat_last=True"
        )


class FunctionModel:
    """A chat model whose every answer comes from ``fn(messages, settings)``.

    ``fn`` may be sync or async and returns a str (a complete ``stop`` response) or a
    :class:`ModelResponse`; an exception it raises propagates as the model's error. Every
    call is recorded in :attr:`requests` first, so a test can assert on exactly what was
    sent even when ``fn`` raises.
    """

    __test__ = False  # public API often imported into test modules; pytest must never collect it

    def __init__(
        self,
        fn: Callable[
            [list[Message], ModelRequest | None], str | ModelResponse | Awaitable[str | ModelResponse]
        ],
        *,
        name: str = "test:function",
    ) -> None:
        self.name = name
        self.fn = fn
        self.requests: list[_Recorded] = []

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        self.requests.append((list(messages), settings))  # a copy: later edits by anyone can't rewrite it
        messages = list(messages)
        value = self.fn(messages, settings)
        if inspect.isawaitable(value):
            value = await value
        else:
            await asyncio.sleep(0)
        return _to_response(
            value, messages=messages, model_name=self.name, usage=None, source="FunctionModel function"
        )
