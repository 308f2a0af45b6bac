"""``infer_model``: provider prefixes, keys and base URLs from the environment, and the errors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from tests.models.wire_server import Reply, WireServer

from obsmem.errors import ConfigError, MissingCredentialsError, ModelRequestError
from obsmem.models import (
    AnthropicModel,
    ModelByInputTokens,
    OpenAIChatModel,
    infer_model,
    known_providers,
    parse_spec,
)
from obsmem.models.registry import ModelSpec
from obsmem.models.retry import is_transient
from obsmem.models.testing import ScriptedModel
from obsmem.types import Message

COMPLETION = {"model": "m", "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {}}


def test_a_chat_model_passes_through() -> None:
    scripted = ScriptedModel(["x"])
    assert infer_model(scripted) is scripted


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("openai:gpt-4o-mini", ModelSpec("openai", "gpt-4o-mini")),
        ("ollama:llama3.1:8b", ModelSpec("ollama", "llama3.1:8b")),
        ("openai-compatible:qwen@http://h:1/v1", ModelSpec("openai-compatible", "qwen", "http://h:1/v1")),
        ("openrouter:google/gemini-2.5-flash", ModelSpec("openrouter", "google/gemini-2.5-flash")),
        ("vllm:org/model@name@https://gpu/v1", ModelSpec("vllm", "org/model@name", "https://gpu/v1")),
    ],
)
def test_parse_spec(spec: str, parsed: ModelSpec) -> None:
    assert parse_spec(spec) == parsed


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", ":gpt-4o"])
def test_malformed_spec_says_the_format(spec: str) -> None:
    with pytest.raises(ConfigError, match="provider:model"):
        infer_model(spec, env={})


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        infer_model("opena:gpt-4o", env={})
    message = str(caught.value)
    assert "unknown provider 'opena'" in message
    for prefix in (
        "openai",
        "anthropic",
        "ollama",
        "groq",
        "openrouter",
        "vllm",
        "lmstudio",
        "openai-compatible",
    ):
        assert prefix in message
    assert set(known_providers()) >= {"openai", "anthropic", "litellm"}


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("groq:llama-3.3-70b-versatile", "GROQ_API_KEY"),
        ("openrouter:openai/gpt-4o-mini", "OPENROUTER_API_KEY"),
    ],
)
def test_missing_key_fails_at_construction_naming_the_variable(spec: str, variable: str) -> None:
    with pytest.raises(MissingCredentialsError) as caught:
        infer_model(spec, env={})
    assert caught.value.env_var == variable
    assert f"set the environment variable {variable}" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_openai_compatible_needs_a_base_url() -> None:
    with pytest.raises(ConfigError, match="OPENAI_COMPATIBLE_BASE_URL"):
        infer_model("openai-compatible:qwen", env={})


def test_defaults_and_environment_overrides() -> None:
    openai = infer_model("openai:gpt-4o-mini", env={"OPENAI_API_KEY": "k"})
    assert isinstance(openai, OpenAIChatModel)
    assert openai.name == "openai:gpt-4o-mini"
    assert openai.endpoint.base_url == "https://api.openai.com/v1"
    assert openai.max_tokens_field == "max_completion_tokens"
    moved = infer_model(
        "openai:gpt-4o-mini", env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://proxy/v1"}
    )
    assert isinstance(moved, OpenAIChatModel) and moved.endpoint.base_url == "http://proxy/v1"
    ollama = infer_model("ollama:llama3.1", env={"OLLAMA_HOST": "gpu-box:11434"})
    assert isinstance(ollama, OpenAIChatModel) and ollama.endpoint.base_url == "http://gpu-box:11434/v1"
    assert "authorization" not in ollama.endpoint.headers
    assert isinstance(infer_model("lmstudio:qwen", env={}), OpenAIChatModel)
    anthropic = infer_model("anthropic:claude-haiku-4-5", env={"ANTHROPIC_API_KEY": "k"})
    assert (
        isinstance(anthropic, AnthropicModel) and anthropic.endpoint.base_url == "https://api.anthropic.com"
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("spec", "env", "auth"),
    [
        ("openai:gpt-4o-mini", {"OPENAI_API_KEY": "sk-1"}, "Bearer sk-1"),
        ("groq:llama-3.3-70b", {"GROQ_API_KEY": "gsk-1"}, "Bearer gsk-1"),
        ("openrouter:openai/gpt-4o-mini", {"OPENROUTER_API_KEY": "or-1"}, "Bearer or-1"),
        ("vllm:qwen", {}, None),
        ("ollama:llama3.1:8b", {}, None),
        ("lmstudio:qwen", {}, None),
        ("openai-compatible:qwen", {"OPENAI_COMPATIBLE_API_KEY": "c-1"}, "Bearer c-1"),
    ],
)
async def test_every_compatible_shortcut_reaches_the_server_at_its_base_url(
    server: WireServer, spec: str, env: dict[str, str], auth: str | None
) -> None:
    server.script(Reply(json=COMPLETION))
    chat = infer_model(f"{spec}@{server.url}/v1", env=env)
    assert isinstance(chat, OpenAIChatModel)
    chat.stream = False
    assert (await chat.request([Message.user("hello")])).text == "hi"
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == spec.split(":", 1)[1]
    assert sent.headers.get("authorization") == auth


def test_litellm_is_not_imported_by_obsmem() -> None:
    code = "import sys, obsmem.models, obsmem.memory; print('litellm' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_litellm_without_the_package_says_which_extra_to_install() -> None:
    if importlib.util.find_spec("litellm") is None:
        with pytest.raises(ConfigError, match=r"obsmem\[litellm\]"):
            infer_model("litellm:gpt-4o-mini", env={})
    else:  # the extra is installed: the model builds, still without a network call
        assert infer_model("litellm:gpt-4o-mini", env={}).name == "litellm:gpt-4o-mini"


# --- model tiers by input size (reference §1.5) --------------------------------------------


@pytest.mark.anyio
async def test_tiers_pick_the_first_bound_that_fits() -> None:
    small, large = ScriptedModel(["small"] * 3, name="x:small"), ScriptedModel(["large"] * 3, name="x:large")
    tiered = ModelByInputTokens(
        {10_000: large, 50: small}, count_messages=lambda ms: sum(len(m.text) for m in ms)
    )
    assert (await tiered.request([Message.user("a" * 50)])).text == "small"
    assert (await tiered.request([Message.user("a" * 51)])).text == "large"
    assert (await tiered.request([Message.user("a" * 10_000)])).text == "large"
    with pytest.raises(ModelRequestError, match="largest ModelByInputTokens tier") as caught:
        await tiered.request([Message.user("a" * 10_001)])
    assert not is_transient(caught.value)


def test_tiers_validate_bounds_and_resolve_specs_early(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError):
        ModelByInputTokens({})
    with pytest.raises(ConfigError, match="positive"):
        ModelByInputTokens({0: ScriptedModel(["x"])})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingCredentialsError, match="OPENAI_API_KEY"):
        ModelByInputTokens({1000: "openai:gpt-4o-mini"})
