"""``provider:model`` strings to chat models: the one place that knows servers, keys and URLs.

A spec is ``provider:model``, optionally ``provider:model@base_url`` to point an
OpenAI-compatible provider at another server. Everything after the first ``:`` is the
model, so Ollama tags work (``ollama:llama3.1:8b``); a trailing ``@http://…`` or
``@https://…`` is the base URL.

=================  ============================  ==========================  =========================
prefix             default base URL              base URL variable           key variable
=================  ============================  ==========================  =========================
openai             https://api.openai.com/v1     OPENAI_BASE_URL             OPENAI_API_KEY (required)
anthropic          https://api.anthropic.com     ANTHROPIC_BASE_URL          ANTHROPIC_API_KEY (req.)
openai-compatible  none: ``@url`` or variable    OPENAI_COMPATIBLE_BASE_URL  OPENAI_COMPATIBLE_API_KEY
openrouter         https://openrouter.ai/api/v1  OPENROUTER_BASE_URL         OPENROUTER_API_KEY (req.)
groq               api.groq.com/openai/v1        GROQ_BASE_URL               GROQ_API_KEY (required)
ollama             http://localhost:11434/v1     OLLAMA_HOST (host:port)     none
vllm               http://localhost:8000/v1      VLLM_BASE_URL               VLLM_API_KEY (optional)
lmstudio           http://localhost:1234/v1      LMSTUDIO_BASE_URL           none
litellm            LiteLLM routes by itself      —                           LiteLLM's own variables
=================  ============================  ==========================  =========================

A required key that is missing fails at construction, before any conversation starts, with
:class:`~obsmem.errors.MissingCredentialsError`, whose one-line message names the variable.
An unknown prefix is a :class:`~obsmem.errors.ConfigError` listing the known ones.
:func:`register_provider` adds a prefix (a plugin, an in-house gateway).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import httpx

from obsmem.errors import ConfigError, MissingCredentialsError
from obsmem.models.anthropic import ANTHROPIC_VERSION, AnthropicModel
from obsmem.models.base import ChatModel
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.transport import Endpoint
from obsmem.profiles import split_spec
from obsmem.redact import redact_secrets

__all__ = [
    "CompatibleServer",
    "ModelFactory",
    "ModelSpec",
    "infer_model",
    "known_providers",
    "parse_spec",
    "register_provider",
]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed ``provider:model[@base_url]`` string."""

    provider: str
    model: str
    base_url: str | None = None


ModelFactory = Callable[[ModelSpec, Mapping[str, str], httpx.AsyncClient | None], ChatModel]
"""Builds a model from a spec, the environment to read keys from, and an optional shared client."""


@dataclass(frozen=True, slots=True)
class CompatibleServer:
    """How to reach one family of Chat Completions servers."""

    provider: str
    default_base_url: str | None
    base_url_env: str | None
    key_env: str | None
    key_required: bool
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"

    def __call__(
        self, spec: ModelSpec, env: Mapping[str, str], client: httpx.AsyncClient | None
    ) -> ChatModel:
        base_url = (
            spec.base_url
            or (env.get(self.base_url_env) if self.base_url_env else None)
            or self.default_base_url
        )
        if not base_url:
            raise ConfigError(
                "model",
                f"'{redact_secrets(f'{self.provider}:{spec.model}')}' has no base URL",
                allowed=f"'{self.provider}:<model>@http://host:port/v1' or the variable {self.base_url_env}",
            )
        if self.provider == "ollama" and not spec.base_url:
            base_url = _ollama_url(base_url)
        key = env.get(self.key_env) if self.key_env else None
        if self.key_required and not key:
            assert self.key_env is not None
            raise MissingCredentialsError(self.provider, self.key_env)
        headers = {"authorization": f"Bearer {key}"} if key else {}
        endpoint = Endpoint(self.provider, base_url, headers, self.key_env)
        return OpenAIChatModel(spec.model, endpoint, max_tokens_field=self.max_tokens_field, client=client)


def _ollama_url(host: str) -> str:
    """``OLLAMA_HOST`` is ``host:port`` (Ollama's own convention); the API lives under ``/v1``."""
    url = host if "://" in host else f"http://{host}"
    return url if url.rstrip("/").endswith("/v1") else url.rstrip("/") + "/v1"


def _anthropic(spec: ModelSpec, env: Mapping[str, str], client: httpx.AsyncClient | None) -> ChatModel:
    key = env.get("ANTHROPIC_API_KEY")
    if not key:
        raise MissingCredentialsError("anthropic", "ANTHROPIC_API_KEY")
    base_url = spec.base_url or env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
    return AnthropicModel(
        spec.model, Endpoint("anthropic", base_url, headers, "ANTHROPIC_API_KEY"), client=client
    )


def _litellm(spec: ModelSpec, env: Mapping[str, str], client: httpx.AsyncClient | None) -> ChatModel:
    from obsmem.models.litellm import LiteLLMModel  # imports litellm itself: only when asked for

    return LiteLLMModel(spec.model)


_PROVIDERS: dict[str, ModelFactory] = {
    "openai": CompatibleServer(
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        True,
        "max_completion_tokens",
    ),
    "anthropic": _anthropic,
    "openai-compatible": CompatibleServer(
        "openai-compatible", None, "OPENAI_COMPATIBLE_BASE_URL", "OPENAI_COMPATIBLE_API_KEY", False
    ),
    "openrouter": CompatibleServer(
        "openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_BASE_URL", "OPENROUTER_API_KEY", True
    ),
    "groq": CompatibleServer("groq", "https://api.groq.com/openai/v1", "GROQ_BASE_URL", "GROQ_API_KEY", True),
    "ollama": CompatibleServer("ollama", "http://localhost:11434/v1", "OLLAMA_HOST", None, False),
    "vllm": CompatibleServer("vllm", "http://localhost:8000/v1", "VLLM_BASE_URL", "VLLM_API_KEY", False),
    "lmstudio": CompatibleServer("lmstudio", "http://localhost:1234/v1", "LMSTUDIO_BASE_URL", None, False),
    "litellm": _litellm,
}


def known_providers() -> tuple[str, ...]:
    """The provider prefixes a spec may name (built in and registered), sorted."""
    return tuple(sorted(_PROVIDERS))


def register_provider(prefix: str, factory: ModelFactory) -> None:
    """Make ``prefix:model`` strings build models with ``factory`` (replacing any earlier one)."""
    if not prefix or ":" in prefix or "@" in prefix:
        raise ConfigError(
            "provider", f"'{prefix}' cannot be a provider prefix", allowed="a name without ':' or '@'"
        )
    _PROVIDERS[prefix] = factory


def parse_spec(spec: str) -> ModelSpec:
    """Split ``provider:model[@base_url]``; a malformed string is a ConfigError saying the format.

    The split is :func:`obsmem.profiles.split_spec`, the registry's reading of a model id.
    """
    parts = split_spec(spec)
    if parts is None:
        raise ConfigError(
            "model",
            f"'{redact_secrets(spec)}' is not a model spec",
            allowed=f"'provider:model' with provider one of {', '.join(known_providers())}, or 'offline'",
        )
    return ModelSpec(*parts)


def infer_model(
    spec: str | ChatModel,
    *,
    env: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
) -> ChatModel:
    """The chat model a spec names; a :class:`ChatModel` passes through unchanged.

    ``env`` is where keys and base URLs are read (default: ``os.environ``); ``client`` is an
    ``httpx.AsyncClient`` to share across requests (default: one per request).
    """
    if not isinstance(spec, str):
        return spec
    parsed = parse_spec(spec)
    factory = _PROVIDERS.get(parsed.provider)
    if factory is None:
        raise ConfigError(
            "model", f"unknown provider '{parsed.provider}' in '{redact_secrets(spec)}'",
            allowed=", ".join(known_providers()),
        )
    return factory(parsed, os.environ if env is None else env, client)
