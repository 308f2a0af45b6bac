"""The chat-model protocol: the one boundary between obsmem and any LLM.

It is deliberately small (messages in; text, tool calls, usage and finish reason out) so a
provider adapter, a test double and a retry wrapper all fit it. Cross-cutting behaviour
(retries, limits, tracing) wraps a model rather than living inside each vendor's module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from obsmem.types import Message, ToolCallPart

__all__ = [
    "ChatModel",
    "FinishReason",
    "ModelRequest",
    "ModelResponse",
    "Usage",
    "WrapperModel",
]

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "other", "unknown"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one call (or several, added with ``+``) consumed, as the provider reported them."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs besides the messages."""

    temperature: float | None = None
    max_output_tokens: int | None = None
    tools: tuple[dict[str, Any], ...] = ()
    timeout_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model answer: its text, any tool calls, the tokens it cost and why it stopped.

    ``finish_reason`` is normalised across providers (see :data:`FinishReason`); anything but
    ``stop``, ``length`` or ``tool_calls`` is an incomplete answer that retrying may fix.
    """

    text: str
    tool_calls: tuple[ToolCallPart, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: FinishReason = "stop"
    model_name: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a list of messages.

    ``name`` is ``provider:model`` (``openai:gpt-4o-mini``, ``scripted``); obsmem uses it to
    pick defaults such as the reflector's starting compression level.
    """

    name: str

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse: ...


class WrapperModel:
    """Base for models that wrap another (retry, limits): forwards ``name`` and ``request``."""

    def __init__(self, wrapped: ChatModel) -> None:
        self.wrapped = wrapped
        self.name = wrapped.name

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        return await self.wrapped.request(messages, settings)
