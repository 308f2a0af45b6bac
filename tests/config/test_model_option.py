"""``observation.model`` / ``reflection.model``: spec strings and tiers as plain, snapshot-safe config."""

from __future__ import annotations

import json

import pytest

from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.errors import ConfigError


def test_unset_by_default() -> None:
    assert ObservationConfig().model is None and ReflectionConfig().model is None


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", " ollama:llama3.1:8b ", "offline", "x:m@http://h/v1"])
def test_spec_strings_are_kept(spec: str) -> None:
    assert ObservationConfig(model=spec).model == spec.strip()


@pytest.mark.parametrize("bad", ["gpt-4o", "openai:", ":gpt", 42, [], {}])
def test_bad_specs_name_the_option(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        MemoryConfig(reflection={"model": bad})  # type: ignore[arg-type]
    assert caught.value.option.startswith("reflection.model")


def test_tiers_are_sorted_and_validated() -> None:
    config = ObservationConfig(model={100_000: "openai:gpt-4o", 8_000: "openai:gpt-4o-mini"})
    assert config.model == {8_000: "openai:gpt-4o-mini", 100_000: "openai:gpt-4o"}
    with pytest.raises(ConfigError, match=r"observation\.model\[0\]"):
        ObservationConfig(model={0: "openai:gpt-4o"})
    with pytest.raises(ConfigError, match="provider:model"):
        ObservationConfig(model={10: "offline"})


def test_tiers_survive_a_json_snapshot() -> None:
    config = MemoryConfig(
        observation={"model": {8_000: "groq:llama-3.1-8b-instant", 64_000: "openai:gpt-4o"}}
    )
    restored = MemoryConfig.from_snapshot(json.loads(json.dumps(config.snapshot())))
    assert restored.observation.model == {8_000: "groq:llama-3.1-8b-instant", 64_000: "openai:gpt-4o"}
    assert restored == config
