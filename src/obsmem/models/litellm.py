"""``litellm:<model>``: route through LiteLLM, for providers obsmem has no adapter for.

LiteLLM is large (about 380 MB installed) and slow to import (about 5 s), so it is an
optional extra (``obsmem[litellm]``) imported only when a ``litellm:`` model is built, never
by ``import obsmem``. Its cost map is read from the installed package rather than fetched
from the network (``LITELLM_LOCAL_MODEL_COST_MAP``). Requests go through LiteLLM's
OpenAI-shaped ``acompletion`` and come back through the same parser as
:mod:`obsmem.models.openai`; LiteLLM's errors carry ``status_code``, which
:func:`~obsmem.models.retry.is_transient` reads, so rate limits and outages retry as usual.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

from obsmem.errors import ConfigError, ModelRequestError
from obsmem.models.base import ModelRequest, ModelResponse
from obsmem.models.openai import parse_completion, to_openai_messages, to_openai_tools
from obsmem.models.transport import Endpoint
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
    """A :class:`~obsmem.models.base.ChatModel` that sends every request through ``litellm.acompletion``."""

    def __init__(self, model: str) -> None:
        self._litellm = load_litellm()
        self.model = model
        self.name = f"litellm:{model}"
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
        data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
        return parse_completion(data, self._endpoint)
