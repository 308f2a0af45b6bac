"""Chat models: the protocol, the providers, and the test doubles.

``infer_model("openai:gpt-4o-mini")`` builds a provider model from a string (see
:mod:`obsmem.models.registry` for every prefix, its base URL and its key variable);
``ModelByInputTokens`` picks a model per request by input size. Provider modules import
nothing heavier than httpx; ``litellm:`` imports LiteLLM only when such a model is built.
"""

from obsmem.models.anthropic import AnthropicModel
from obsmem.models.base import ChatModel, FinishReason, ModelRequest, ModelResponse, Usage, WrapperModel
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.registry import infer_model, known_providers, parse_spec, register_provider
from obsmem.models.tiers import ModelByInputTokens
from obsmem.models.transport import Endpoint

__all__ = [
    "AnthropicModel",
    "ChatModel",
    "Endpoint",
    "FinishReason",
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
