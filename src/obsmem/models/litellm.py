"""``litellm:<model>``: route through LiteLLM, for providers obsmem has no adapter for.

LiteLLM is large (about 380 MB installed) and slow to import (about 5 s), so it is an
optional extra (``obsmem[litellm]``) imported only when a ``litellm:`` model is built, never
by ``import obsmem``. Its cost map is read from the installed package rather than fetched
from the network (``LITELLM_LOCAL_MODEL_COST_MAP``). Requests go through LiteLLM's
OpenAI-shaped ``acompletion`` and come back through the same parser as
:mod:`obsmem.models.openai`; LiteLLM's errors carry ``status_code``, which
:func:`~obsmem.models.retry.is_transient` reads, so rate limits and outages retry as usual.

Answers are bounded like every provider's: ``max_response_bytes`` (default
:data:`~obsmem.models.transport.DEFAULT_MAX_RESPONSE_BYTES`, 8 MiB; None for no limit) caps the
answer's text and tool-call arguments in UTF-8 bytes, and a request's ``max_output_tokens`` is
also checked by the client (:func:`~obsmem.models.transport.output_char_limit`), for providers
that ignore it. Either is a permanent :class:`~obsmem.errors.ResponseTooLargeError` naming the
limit. LiteLLM reads a whole non-streamed answer before handing it over, so only a streamed one
(``stream=True``, or ``stream`` in a request's ``extra``) is cut while it is read: the stream is
closed at the first chunk past a limit.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from obsmem._http import DEFAULT_MAX_RESPONSE_BYTES, too_large
from obsmem.errors import ConfigError, ModelRequestError
from obsmem.models.base import ModelRequest, ModelResponse
from obsmem.models.openai import StreamState, parse_completion, to_openai_messages, to_openai_tools
from obsmem.models.transport import Endpoint, check_response_limit, output_char_limit, too_much_output
from obsmem.types import Message

__all__ = ["LiteLLMModel", "load_litellm"]


def load_litellm() -> ModuleType:
    """Import litellm, or explain which extra to install."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        return importlib.import_module("litellm")
    except ImportError as exc:
        raise ConfigError(
            "model",
            "a 'litellm:' model needs the litellm package, which is not installed",
            allowed="pip install 'obsmem[litellm]', or a built-in provider such as 'openai:<model>'",
        ) from exc


class LiteLLMModel:
    """A :class:`~obsmem.models.base.ChatModel` that sends every request through ``litellm.acompletion``.

    ``stream`` asks LiteLLM for a streamed answer, which is read chunk by chunk and cut at a
    limit; ``max_response_bytes`` bounds one answer (see the module's notes).
    """

    def __init__(
        self,
        model: str,
        *,
        stream: bool = False,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.max_response_bytes = check_response_limit(max_response_bytes)
        self._litellm = load_litellm()
        self.model = model
        self.name = f"litellm:{model}"
        self.stream = stream
        self._endpoint = Endpoint("litellm", "litellm://", {}, None)

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        settings = settings or ModelRequest()
        kwargs: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(messages)}
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.max_output_tokens is not None:
            kwargs["max_tokens"] = settings.max_output_tokens
        if settings.tools:
            kwargs["tools"] = to_openai_tools(settings.tools)
        if settings.timeout_s is not None:
            kwargs["timeout"] = settings.timeout_s
        if self.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        kwargs.update(settings.extra)
        try:
            response = await self._litellm.acompletion(**kwargs)
        except Exception as exc:
            if getattr(exc, "status_code", None) in (401, 403):
                raise ModelRequestError(
                    f"litellm: the provider refused the API key for '{self.model}' ({exc}); "
                    "set the key variable LiteLLM documents for that provider.",
                    status_code=getattr(exc, "status_code", None),
                ) from exc
            raise
        bound = _Bound(self.max_response_bytes, settings.max_output_tokens, self._endpoint)
        if kwargs.get("stream"):
            return await self._streamed(response, bound)
        data = _as_dict(response)
        bound.add(_completion_texts(data))
        return parse_completion(data, self._endpoint)

    async def _streamed(self, stream: Any, bound: _Bound) -> ModelResponse:
        """Read LiteLLM's chunk stream, stopping (and closing it) at the first chunk past a limit."""
        state = StreamState()
        try:
            async for chunk in stream:
                data = _as_dict(chunk)
                state.add(data)
                bound.add(_delta_texts(data))
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        return state.response()


def _as_dict(value: Any) -> dict[str, Any]:
    data = value.model_dump() if hasattr(value, "model_dump") else dict(value)
    return data if isinstance(data, dict) else {}


class _Bound:
    """The running size of one answer against ``max_response_bytes`` and ``max_output_tokens``."""

    def __init__(self, max_bytes: int | None, max_output_tokens: int | None, endpoint: Endpoint) -> None:
        self.max_bytes = max_bytes
        self.max_output_tokens = max_output_tokens
        self.char_limit = output_char_limit(max_output_tokens)
        self.endpoint = endpoint
        self.bytes = 0
        self.chars = 0

    def add(self, texts: Iterable[str]) -> None:
        for text in texts:
            self.chars += len(text)
            self.bytes += len(text.encode("utf-8", "surrogatepass"))
        if self.max_bytes is not None and self.bytes > self.max_bytes:
            raise too_large("litellm", self.max_bytes)
        if self.char_limit is not None and self.chars > self.char_limit:
            assert self.max_output_tokens is not None
            raise too_much_output(self.endpoint, self.max_output_tokens)


def _texts(holder: Mapping[str, Any]) -> list[str]:
    """The text and tool-call arguments of one message or delta."""
    texts = [holder["content"]] if isinstance(holder.get("content"), str) else []
    for call in holder.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str):
            texts.append(arguments)
    return texts


def _choices(data: Mapping[str, Any], key: str) -> list[str]:
    texts: list[str] = []
    for choice in data.get("choices") or ():
        holder = choice.get(key) if isinstance(choice, Mapping) else None
        if isinstance(holder, Mapping):
            texts.extend(_texts(holder))
    return texts


def _completion_texts(data: Mapping[str, Any]) -> list[str]:
    return _choices(data, "message")


def _delta_texts(data: Mapping[str, Any]) -> list[str]:
    return _choices(data, "delta")
