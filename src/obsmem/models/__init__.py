"""Chat models: the protocol, the providers, and the test doubles.

``infer_model("openai:gpt-4o-mini")`` builds a provider model from a string (see
:mod:`obsmem.models.registry` for every prefix, its base URL and its key variable);
``ModelByInputTokens`` picks a model per request by input size. Provider modules import
nothing heavier than httpx; ``litellm:`` imports LiteLLM only when such a model is built.

The providers (and httpx) load on first use of one of their names, so ``import obsmem`` and
the offline path pay nothing for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from obsmem.models.base import ChatModel, FinishReason, ModelRequest, ModelResponse, Usage, WrapperModel

if TYPE_CHECKING:
    from obsmem.models.anthropic import AnthropicModel
    from obsmem.models.metered import MeteredModel
    from obsmem.models.openai import OpenAIChatModel
    from obsmem.models.registry import infer_model, known_providers, parse_spec, register_provider
    from obsmem.models.tiers import ModelByInputTokens
    from obsmem.models.transport import Endpoint

_LAZY = {
    "AnthropicModel": "obsmem.models.anthropic",
    "OpenAIChatModel": "obsmem.models.openai",
    "MeteredModel": "obsmem.models.metered",
    "infer_model": "obsmem.models.registry",
    "known_providers": "obsmem.models.registry",
    "parse_spec": "obsmem.models.registry",
    "register_provider": "obsmem.models.registry",
    "ModelByInputTokens": "obsmem.models.tiers",
    "Endpoint": "obsmem.models.transport",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'obsmem.models' has no attribute {name!r}")

__all__ = [
    "AnthropicModel",
    "ChatModel",
    "Endpoint",
    "FinishReason",
    "MeteredModel",
    "ModelByInputTokens",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatModel",
    "Usage",
    "WrapperModel",
    "infer_model",
    "known_providers",
    "parse_spec",
    "register_provider",
]
