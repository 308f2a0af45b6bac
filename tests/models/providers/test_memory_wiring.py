"""``Memory`` builds real providers from strings, per role and from config, and the core's
retry and failure paths run end to end over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.models.wire_server import MemoryModelPlayer, Reply, WireServer

from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig
from obsmem.errors import MissingCredentialsError, ModelRequestError, ObservationError
from obsmem.memory import Memory
from obsmem.models import AnthropicModel, ModelByInputTokens, OpenAIChatModel
from obsmem.models.testing import ScriptedModel
from obsmem.om.llm.observer import LLMObserver
from obsmem.om.llm.reflector import LLMReflector
from obsmem.types import Message

pytestmark = pytest.mark.anyio


def _roles(memory: Memory) -> tuple[LLMObserver, LLMReflector]:
    observer, reflector = memory.engine.observer, memory.engine.reflector
    assert isinstance(observer, LLMObserver) and isinstance(reflector, LLMReflector)
    return observer, reflector


async def test_model_string_builds_both_roles_with_the_default_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    async with Memory("memory://", model="openai:gpt-4o-mini") as memory:
        observer, reflector = _roles(memory)
        assert isinstance(observer.model, OpenAIChatModel) and observer.model.name == "openai:gpt-4o-mini"
        assert reflector.model.name == "openai:gpt-4o-mini"
        # §1.3/§1.4: temperature 0.3 / 0; the 100k output limit is not forced on a chosen model
        assert (observer.settings.temperature, observer.settings.max_output_tokens) == (0.3, None)
        assert (reflector.settings.temperature, reflector.settings.max_output_tokens) == (0.0, None)
        assert memory.engine.reflector_start_level == 1


async def test_missing_key_fails_when_memory_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingCredentialsError, match="ANTHROPIC_API_KEY"):
        Memory("memory://", reflector="anthropic:claude-haiku-4-5")


async def test_roles_take_different_providers_and_explicit_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    config = MemoryConfig(observation={"max_output_tokens": 4_000}, reflection={"temperature": 0.2})
    async with Memory(
        "memory://", config=config, observer="ollama:llama3.1:8b", reflector="anthropic:claude-sonnet-4-5"
    ) as memory:
        observer, reflector = _roles(memory)
        assert observer.model.name == "ollama:llama3.1:8b"
        assert isinstance(reflector.model, AnthropicModel)
        assert observer.settings.max_output_tokens == 4_000
        assert (reflector.settings.temperature, reflector.settings.max_output_tokens) == (0.2, None)


async def test_configured_models_fall_back_across_roles_and_tiers_skip_the_default_temperature() -> None:
    config = MemoryConfig(
        observation={"model": "lmstudio:qwen"},
        reflection={"model": {200_000: "vllm:big", 8_000: "vllm:small"}},
    )
    async with Memory("memory://", config=config) as memory:
        observer, reflector = _roles(memory)
        assert observer.model.name == "lmstudio:qwen"
        assert isinstance(reflector.model, ModelByInputTokens)
        assert [bound for bound, _ in reflector.model.tiers] == [8_000, 200_000]
        assert reflector.settings.temperature is None
    only_observer = MemoryConfig(observation={"model": "lmstudio:qwen"})
    async with Memory("memory://", config=only_observer) as memory:
        assert _roles(memory)[1].model.name == "lmstudio:qwen"  # §1.5: the reflector inherits it


async def test_compression_start_level_follows_the_model() -> None:
    async with Memory("memory://", model=ScriptedModel([], name="google:gemini-2.5-flash")) as memory:
        assert memory.engine.reflector_start_level == 2
    async with Memory("memory://", model=ScriptedModel([], name="openai:gpt-4o")) as memory:
        assert memory.engine.reflector_start_level == 1
    tiers = {
        1_000: ScriptedModel([], name="openai:gpt-4o-mini"),
        9_000: ScriptedModel([], name="google:gemini-2.5-flash"),
    }
    async with Memory("memory://", reflector=tiers) as memory:
        assert memory.engine.reflector_start_level == 2


async def test_observation_survives_a_rate_limit_and_a_server_error_over_http(
    server: WireServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    player = MemoryModelPlayer()
    failures = [
        Reply(status=429, headers={"retry-after": "30"}, json={"error": {"message": "Rate limit reached"}}),
        Reply(status=500, json={"error": {"message": "server error"}}),
    ]
    server.responder = lambda request: failures.pop(0) if failures else player(request)
    clock = FakeClock()
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}", model="openai:gpt-4o-mini", clock=clock) as memory:
        await memory.save_messages(
            (await memory.create_thread("t1", "r1")).id,
            [
                Message.user("I am planning a trip to Lisbon in May."),
                Message.assistant("Lovely, what budget?"),
            ],
        )
        await memory.observe("t1")
        record = await memory.get_record("t1")
    assert record is not None and "detail number 1" in record.active_observations
    # the server's retry-after wins over the first backoff step; the second is 2 s ± 20 % jitter
    assert clock.sleeps[0] == 30.0 and 1.6 <= clock.sleeps[1] <= 2.4 and len(clock.sleeps) == 2
    assert len(server.requests) == 3
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_a_refused_key_stops_observation_at_once_naming_the_variable(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.responder = lambda request: Reply(
        status=401, json={"error": {"message": "Incorrect API key provided"}}
    )
    clock = FakeClock()
    async with Memory("memory://", model="openai:gpt-4o-mini", clock=clock) as memory:
        await memory.save_messages((await memory.create_thread("t1", "r1")).id, [Message.user("hello there")])
        with pytest.raises(ObservationError, match="OPENAI_API_KEY") as caught:
            await memory.observe("t1")
    assert isinstance(caught.value.__cause__, ModelRequestError)
    assert len(server.requests) == 1 and clock.sleeps == []
