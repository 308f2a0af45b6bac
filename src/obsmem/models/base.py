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
    """Tokens one call (or several, added with ``+``) consumed, as the provider reported them.

    ``input_tokens`` is every input token, cached or not. ``cached_input_tokens`` is the part
    of it read from the provider's prompt cache (OpenAI ``cached_tokens``, Anthropic
    ``cache_read_input_tokens``), billed at a fraction of the price; ``cache_write_tokens`` the
    part written to it (Anthropic ``cache_creation_input_tokens``), billed at a premium.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def uncached_input_tokens(self) -> int:
        """Input tokens billed at the full price (neither read from nor written to a cache)."""
        return max(0, self.input_tokens - self.cached_input_tokens - self.cache_write_tokens)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs besides the messages.

    Prompt caching: ``cache_key`` groups requests that share a long prefix (one thread's
    observer calls), sent as OpenAI's ``prompt_cache_key`` so they land on the same cache.
    ``cache_breakpoints`` are ``(message index, part index)`` positions that end a stable prefix
    (the system prompt, the previous observations); Anthropic marks them with ``cache_control``
    (at most four per request: the first four are kept). Providers without explicit caching ignore both.
    """

    temperature: float | None = None
    max_output_tokens: int | None = None
    tools: tuple[dict[str, Any], ...] = ()
    timeout_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    cache_key: str | None = None
    cache_breakpoints: tuple[tuple[int, int], ...] = ()


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
