"""MemoryConfig and its sections: defaults, validation, inheritance, snapshots (reference §1.2–§1.4)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from obsmem.config import (
    MemoryConfig,
    MemoryOptions,
    ObservationConfig,
    ObservationOptions,
    ReflectionConfig,
    ReflectionOptions,
)
from obsmem.errors import ConfigError, ObsmemError
from obsmem.thresholds import TokenRange

NO_BUFFERING = {"buffer_tokens": False}


def _get(config: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        config = getattr(config, name)
    return config


def _config_error(**kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        MemoryConfig(**kwargs)
    return info.value


# ---- defaults -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "default"),
    [
        ("scope", "thread"),
        ("share_token_budget", False),
        ("temporal_markers", False),
        ("activate_after_idle", None),
        ("activate_on_provider_change", False),
        ("share_threads_in_resource", False),
        ("timezone", None),
        ("observation.message_tokens", 30_000),
        ("observation.buffer_tokens", 0.2),
        ("observation.buffer_activation", 0.8),
        ("observation.block_after", 1.2),
        ("observation.buffer_on_idle", False),
        ("observation.activate_after_idle", None),
        ("observation.activate_on_provider_change", None),
        ("observation.previous_observer_tokens", 2_000),
        ("observation.max_tokens_per_batch", 10_000),
        ("observation.temperature", 0.3),
        ("observation.max_output_tokens", 100_000),
        ("observation.instruction", None),
        ("observation.continuation_hints", True),
        ("observation.thread_title", False),
        ("observation.manage_working_memory", False),
        ("observation.observe_attachments", ("image/*", "application/pdf")),
        ("reflection.observation_tokens", 40_000),
        ("reflection.buffer_activation", 0.5),
        ("reflection.block_after", 1.2),
        ("reflection.temperature", 0.0),
        ("reflection.max_output_tokens", 100_000),
        ("reflection.instruction", None),
        ("reflection.continuation_hints", True),
        ("reflection.activate_after_idle", None),
        ("reflection.activate_on_provider_change", False),
    ],
)
def test_defaults(option: str, default: object) -> None:
    assert _get(MemoryConfig(), option) == default


@pytest.mark.parametrize(
    ("helper", "value"),
    [
        ("observation.buffering_enabled", True),
        ("observation.resolved_buffer_tokens", 6_000),
        ("observation.resolved_block_after", 36_000),
        ("observation.retention_floor", 6_000),
        ("observation.activation_ratio", 0.8),
        ("reflection.buffer_start_tokens", 20_000),
        ("reflection.resolved_block_after", 48_000),
        ("reflection_buffering_enabled", True),
        ("reflection_block_after", 48_000),
        ("message_threshold", 30_000),
        ("observation_activate_after_idle", None),
        ("observation_activate_on_provider_change", False),
    ],
)
def test_resolved_defaults(helper: str, value: object) -> None:
    assert _get(MemoryConfig(), helper) == value


@pytest.mark.parametrize(
    ("helper", "value"),
    [
        ("observation.buffering_enabled", False),
        ("observation.block_after", None),  # the 1.2 default only applies with buffering
        ("observation.resolved_buffer_tokens", None),
        ("observation.resolved_block_after", None),
        # Unlike the reference (which drops bufferActivation here), the floor still applies:
        # a synchronous observation leaves a raw tail too.
        ("observation.retention_floor", 6_000),
        ("observation.activation_ratio", 0.8),
        ("reflection_buffering_enabled", False),  # buffer_tokens=False disables all async work
        ("reflection_block_after", None),
    ],
)
def test_resolved_values_with_buffering_off(helper: str, value: object) -> None:
    assert _get(MemoryConfig(observation=NO_BUFFERING), helper) == value


def test_sections_can_be_built_standalone_and_passed_in() -> None:
    observation = ObservationConfig(message_tokens=20_000)
    config = MemoryConfig(observation=observation, reflection=ReflectionConfig(observation_tokens=10_000))
    assert config.observation is observation
    assert config.observation.resolved_buffer_tokens == 4_000
    assert config.reflection.buffer_start_tokens == 5_000


def test_defaulted_block_after_is_not_marked_as_explicit() -> None:
    assert "block_after" not in ObservationConfig().model_fields_set
    assert "block_after" in ObservationConfig(block_after=2).model_fields_set


# ---- accepted values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("observation", "helper", "value"),
    [
        ({"buffer_tokens": 1}, "resolved_buffer_tokens", 1),  # 1 is one token, not 100 %
        ({"buffer_tokens": 29_999}, "resolved_buffer_tokens", 29_999),
        ({"buffer_tokens": 0.5}, "resolved_buffer_tokens", 15_000),
        ({"buffer_tokens": 5_000.0}, "resolved_buffer_tokens", 5_000),
        ({"buffer_activation": 1.0}, "retention_floor", 0),
        ({"buffer_activation": 1}, "retention_floor", 0),
        ({"buffer_activation": 1_000}, "retention_floor", 1_000),
        ({"buffer_activation": 29_999}, "retention_floor", 29_999),
        ({"buffer_activation": 5_000}, "activation_ratio", pytest.approx(1 - 5_000 / 30_000)),
        ({"block_after": 1.0}, "resolved_block_after", 30_000),
        ({"block_after": 99.9}, "resolved_block_after", 2_997_000),
        ({"block_after": 30_000}, "resolved_block_after", 30_000),
        ({"block_after": None}, "resolved_block_after", None),  # explicit None: never force
        ({"message_tokens": 100, "block_after": 100}, "resolved_block_after", 100),
        ({"message_tokens": 30_000.0}, "message_tokens", 30_000),
        ({"previous_observer_tokens": 0}, "previous_observer_tokens", 0),
        ({"previous_observer_tokens": False}, "previous_observer_tokens", False),
        ({"observe_attachments": True}, "observe_attachments", True),
        ({"observe_attachments": False}, "observe_attachments", False),
        ({"observe_attachments": "AUTO"}, "observe_attachments", "auto"),
        (
            {"observe_attachments": ["IMAGE/PNG", "*", "text/*"]},
            "observe_attachments",
            ("image/png", "*", "text/*"),
        ),
        ({"observe_attachments": []}, "observe_attachments", ()),
        ({"temperature": 0}, "temperature", 0.0),
        ({"temperature": 2}, "temperature", 2.0),
        ({"instruction": "Note dates."}, "instruction", "Note dates."),
        ({"instruction": "   "}, "instruction", None),
        ({"buffer_on_idle": True}, "buffer_on_idle", True),
        ({"activate_after_idle": "5m"}, "activate_after_idle", "5m"),
        ({"activate_after_idle": 300}, "activate_after_idle", 300),
        ({"activate_after_idle": "Auto"}, "activate_after_idle", "auto"),
        ({"activate_after_idle": False}, "activate_after_idle", False),
        (
            {"activate_after_idle": {"providers": {"OpenAI": "1h"}}},
            "activate_after_idle",
            {"default": "auto", "providers": {"openai": "1h"}},
        ),
    ],
)
def test_accepted_observation_values(observation: dict[str, Any], helper: str, value: object) -> None:
    assert _get(MemoryConfig(observation=observation).observation, helper) == value


@pytest.mark.parametrize(
    ("reflection", "helper", "value"),
    [
        ({"buffer_activation": 1}, "buffer_start_tokens", 40_000),
        ({"buffer_activation": 0.25}, "buffer_start_tokens", 10_000),
        ({"buffer_activation": None}, "buffer_start_tokens", None),
        ({"buffer_activation": None}, "block_after", None),
        ({"buffer_activation": None, "block_after": None}, "resolved_block_after", None),
        ({"block_after": 1.0}, "resolved_block_after", 40_000),
        ({"block_after": 50_000}, "resolved_block_after", 50_000),
        ({"observation_tokens": 1_000}, "resolved_block_after", 1_200),
        ({"activate_after_idle": "1h"}, "activate_after_idle", "1h"),
        ({"activate_on_provider_change": True}, "activate_on_provider_change", True),
    ],
)
def test_accepted_reflection_values(reflection: dict[str, Any], helper: str, value: object) -> None:
    assert _get(MemoryConfig(reflection=reflection).reflection, helper) == value


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/New_York"])
def test_timezone_accepts_iana_names(zone: str) -> None:
    assert MemoryConfig(timezone=zone).timezone == zone


def test_share_token_budget_with_buffering_off() -> None:
    config = MemoryConfig(share_token_budget=True, observation=NO_BUFFERING)
    assert config.message_threshold == TokenRange(min=30_000, max=70_000)


# ---- validation: every rule names its option ------------------------------------------------

INVALID: list[Any] = [
    # observation.message_tokens
    ({"observation": {"message_tokens": 0}}, "observation.message_tokens"),
    ({"observation": {"message_tokens": -1}}, "observation.message_tokens"),
    ({"observation": {"message_tokens": 1.5}}, "observation.message_tokens"),
    ({"observation": {"message_tokens": "30000"}}, "observation.message_tokens"),
    ({"observation": {"message_tokens": True}}, "observation.message_tokens"),
    ({"observation": {"message_tokens": float("inf")}}, "observation.message_tokens"),
    # observation.buffer_tokens: must resolve to > 0 and < message_tokens
    ({"observation": {"buffer_tokens": 0}}, "observation.buffer_tokens"),
    ({"observation": {"buffer_tokens": -1}}, "observation.buffer_tokens"),
    ({"observation": {"buffer_tokens": 30_000}}, "observation.buffer_tokens"),
    ({"observation": {"buffer_tokens": 40_000}}, "observation.buffer_tokens"),
    ({"observation": {"buffer_tokens": 0.00001}}, "observation.buffer_tokens"),  # resolves to 0
    ({"observation": {"buffer_tokens": None}}, "observation.buffer_tokens"),
    ({"observation": {"buffer_tokens": True}}, "observation.buffer_tokens"),
    ({"observation": {"buffer_tokens": "0.2"}}, "observation.buffer_tokens"),
    ({"observation": {"buffer_tokens": float("nan")}}, "observation.buffer_tokens"),
    ({"observation": {"message_tokens": 1}}, "observation.buffer_tokens"),  # 0.2 of 1 is 0 tokens
    # observation.buffer_activation: (0, 1] ratio or >= 1000 absolute below message_tokens
    ({"observation": {"buffer_activation": 0}}, "observation.buffer_activation"),
    ({"observation": {"buffer_activation": -0.5}}, "observation.buffer_activation"),
    ({"observation": {"buffer_activation": 1.5}}, "observation.buffer_activation"),
    ({"observation": {"buffer_activation": 999}}, "observation.buffer_activation"),
    ({"observation": {"buffer_activation": 30_000}}, "observation.buffer_activation"),
    ({"observation": {"buffer_activation": 50_000}}, "observation.buffer_activation"),
    ({"observation": {"buffer_activation": "0.8"}}, "observation.buffer_activation"),
    ({"observation": {"buffer_activation": None}}, "observation.buffer_activation"),
    # observation.block_after: [1, 100) multiplier or >= 100 absolute, resolving >= message_tokens
    ({"observation": {"block_after": 0.5}}, "observation.block_after"),
    ({"observation": {"block_after": 0.99}}, "observation.block_after"),
    ({"observation": {"block_after": 0}}, "observation.block_after"),
    ({"observation": {"block_after": 100}}, "observation.block_after"),
    ({"observation": {"block_after": 29_999}}, "observation.block_after"),
    ({"observation": {"block_after": "1.2"}}, "observation.block_after"),
    ({"observation": {"block_after": 1.2, "buffer_tokens": False}}, "observation.block_after"),
    ({"observation": {"buffer_tokens": False, "block_after": 2}}, "observation.block_after"),
    # observation.* others
    ({"observation": {"buffer_on_idle": True, "buffer_tokens": False}}, "observation.buffer_on_idle"),
    ({"observation": {"buffer_on_idle": "yes"}}, "observation.buffer_on_idle"),
    ({"observation": {"activate_after_idle": "soon"}}, "observation.activate_after_idle"),
    ({"observation": {"activate_after_idle": -5}}, "observation.activate_after_idle"),
    ({"observation": {"activate_after_idle": True}}, "observation.activate_after_idle"),
    ({"observation": {"activate_after_idle": {"providers": {"openai": "x"}}}},
     "observation.activate_after_idle.providers.openai"),
    ({"observation": {"activate_on_provider_change": "yes"}}, "observation.activate_on_provider_change"),
    ({"observation": {"previous_observer_tokens": -1}}, "observation.previous_observer_tokens"),
    ({"observation": {"previous_observer_tokens": float("inf")}}, "observation.previous_observer_tokens"),
    ({"observation": {"previous_observer_tokens": 1.5}}, "observation.previous_observer_tokens"),
    ({"observation": {"previous_observer_tokens": True}}, "observation.previous_observer_tokens"),
    ({"observation": {"previous_observer_tokens": None}}, "observation.previous_observer_tokens"),
    ({"observation": {"max_tokens_per_batch": 0}}, "observation.max_tokens_per_batch"),
    ({"observation": {"temperature": -0.1}}, "observation.temperature"),
    ({"observation": {"temperature": 2.1}}, "observation.temperature"),
    ({"observation": {"temperature": "hot"}}, "observation.temperature"),
    ({"observation": {"max_output_tokens": 0}}, "observation.max_output_tokens"),
    ({"observation": {"instruction": 5}}, "observation.instruction"),
    ({"observation": {"continuation_hints": "yes"}}, "observation.continuation_hints"),
    ({"observation": {"thread_title": 1}}, "observation.thread_title"),
    ({"observation": {"manage_working_memory": None}}, "observation.manage_working_memory"),
    ({"observation": {"observe_attachments": "image/*"}}, "observation.observe_attachments"),
    ({"observation": {"observe_attachments": ["image"]}}, "observation.observe_attachments"),
    ({"observation": {"observe_attachments": [5]}}, "observation.observe_attachments"),
    ({"observation": {"observe_attachments": 5}}, "observation.observe_attachments"),
    ({"observation": {"observe_attachments": "none"}}, "observation.observe_attachments"),
    # reflection.*
    ({"reflection": {"observation_tokens": 0}}, "reflection.observation_tokens"),
    ({"reflection": {"observation_tokens": "40000"}}, "reflection.observation_tokens"),
    ({"reflection": {"buffer_activation": 0}}, "reflection.buffer_activation"),
    ({"reflection": {"buffer_activation": -1}}, "reflection.buffer_activation"),
    ({"reflection": {"buffer_activation": 1.5}}, "reflection.buffer_activation"),
    ({"reflection": {"buffer_activation": 1_000}}, "reflection.buffer_activation"),  # no absolute form
    ({"reflection": {"buffer_activation": False}}, "reflection.buffer_activation"),
    ({"reflection": {"block_after": 0.5}}, "reflection.block_after"),
    ({"reflection": {"block_after": 1_000}}, "reflection.block_after"),  # below the 40k threshold
    ({"reflection": {"buffer_activation": None, "block_after": 2}}, "reflection.block_after"),
    ({"reflection": {"temperature": 3}}, "reflection.temperature"),
    ({"reflection": {"max_output_tokens": -5}}, "reflection.max_output_tokens"),
    ({"reflection": {"instruction": ["x"]}}, "reflection.instruction"),
    ({"reflection": {"continuation_hints": 0}}, "reflection.continuation_hints"),
    ({"reflection": {"activate_after_idle": "x"}}, "reflection.activate_after_idle"),
    ({"reflection": {"activate_on_provider_change": None}}, "reflection.activate_on_provider_change"),
    # top level
    ({"scope": "global"}, "scope"),
    ({"share_token_budget": "yes"}, "share_token_budget"),
    ({"share_token_budget": True}, "share_token_budget"),  # buffering is on by default
    ({"temporal_markers": "no"}, "temporal_markers"),
    ({"activate_after_idle": "later"}, "activate_after_idle"),
    ({"activate_after_idle": {"default": "never"}}, "activate_after_idle.default"),
    ({"activate_on_provider_change": None}, "activate_on_provider_change"),
    ({"share_threads_in_resource": 1}, "share_threads_in_resource"),
    ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
    ({"timezone": "../etc/passwd"}, "timezone"),
    ({"timezone": 5}, "timezone"),
    ({"observation": 5}, "observation"),
    ({"reflection": "fast"}, "reflection"),
]


@pytest.mark.parametrize(("kwargs", "option"), INVALID)
def test_invalid_values_raise_config_error_naming_the_option(kwargs: dict[str, Any], option: str) -> None:
    error = _config_error(**kwargs)
    assert error.option == option
    assert f"'{option}'" in str(error)
    assert not isinstance(error, ValidationError)
    assert isinstance(error, ObsmemError)
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "allowed_fragment"),
    [
        ({"observation": {"buffer_tokens": 40_000}}, "message_tokens"),
        ({"observation": {"buffer_activation": 999}}, "(0, 1]"),
        ({"observation": {"block_after": 0.5}}, "[1, 100)"),
        ({"observation": {"previous_observer_tokens": -1}}, ">= 0"),
        ({"observation": {"temperature": 5}}, "0 to 2"),
        ({"reflection": {"buffer_activation": 2}}, "(0, 1]"),
        ({"observation": {"thread_title": "yes"}}, "True or False"),
        ({"activate_after_idle": "later"}, "'5m'"),
    ],
)
def test_errors_say_what_is_allowed(kwargs: dict[str, Any], allowed_fragment: str) -> None:
    error = _config_error(**kwargs)
    assert error.allowed is not None
    assert allowed_fragment in error.allowed


def test_share_token_budget_error_offers_both_fixes() -> None:
    message = str(_config_error(share_token_budget=True))
    assert "observation.buffer_tokens=False" in message
    assert "share_token_budget=False" in message


def test_block_after_explicitly_set_without_buffering_explains_why() -> None:
    error = _config_error(observation={"buffer_tokens": False, "block_after": 1.5})
    assert "observation.buffer_tokens" in str(error)
    assert "async buffering" in str(error)


def test_several_problems_are_reported_together() -> None:
    error = _config_error(observation={"message_tokens": -1, "temperature": 9})
    assert error.option == "observation.message_tokens"
    assert any("observation.temperature" in note for note in error.__notes__)


@pytest.mark.parametrize(
    ("build", "option"),
    [
        (lambda: ObservationConfig(message_tokens=0), "observation.message_tokens"),
        (lambda: ObservationConfig(unknown=1), "observation.unknown"),
        (lambda: ReflectionConfig(buffer_activation=2), "reflection.buffer_activation"),
        (lambda: MemoryConfig.model_validate({"scope": "x"}), "scope"),
        (lambda: MemoryConfig.model_validate({"observation": {"block_after": 0}}), "observation.block_after"),
        (lambda: MemoryConfig.model_validate_json('{"timezone": "Nowhere/Land"}'), "timezone"),
        (lambda: ObservationConfig.model_validate({"temperature": -1}), "observation.temperature"),
        (
            lambda: MemoryConfig.from_snapshot({"observation": {"buffer_tokens": 0}}),
            "observation.buffer_tokens",
        ),
    ],
)
def test_every_construction_path_raises_config_error(build: Any, option: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert info.value.option == option


# ---- unknown options ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "option", "suggestion"),
    [
        ({"scop": "thread"}, "scop", "scope"),
        ({"messageTokens": 5}, "messageTokens", "observation.message_tokens"),
        ({"message_tokens": 5}, "message_tokens", "observation.message_tokens"),
        ({"shareTokenBudget": True}, "shareTokenBudget", "share_token_budget"),
        ({"observation": {"mesage_tokens": 1}}, "observation.mesage_tokens", "observation.message_tokens"),
        ({"observation": {"bufferTokens": 5}}, "observation.bufferTokens", "observation.buffer_tokens"),
        (
            {"reflection": {"observationTokens": 5}},
            "reflection.observationTokens",
            "reflection.observation_tokens",
        ),
        ({"reflection": {"blockAfter": 2}}, "reflection.blockAfter", "reflection.block_after"),
    ],
)
def test_unknown_options_suggest_the_closest_name(
    kwargs: dict[str, Any], option: str, suggestion: str
) -> None:
    error = _config_error(**kwargs)
    assert error.option == option
    assert "unknown option" in str(error)
    assert f"did you mean '{suggestion}'?" in str(error)


def test_unknown_option_without_a_close_match_lists_the_valid_ones() -> None:
    error = _config_error(zzzzzz=1)
    assert "did you mean" not in str(error)
    assert error.allowed is not None and "scope" in error.allowed


# ---- inheritance ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("top", "own", "expected"),
    [
        (None, None, None),
        ("5m", None, "5m"),  # inherited
        ("5m", False, None),  # False turns the inherited setting off
        ("5m", "1h", "1h"),  # own setting wins
        (None, "auto", "auto"),
        (False, None, None),
        ({"providers": {"groq": "1h"}}, None, {"default": "auto", "providers": {"groq": "1h"}}),
    ],
)
def test_observation_inherits_activate_after_idle(top: object, own: object, expected: object) -> None:
    config = MemoryConfig(activate_after_idle=top, observation={"activate_after_idle": own})
    assert config.observation_activate_after_idle == expected


@pytest.mark.parametrize(
    ("top", "own", "expected"),
    [(False, None, False), (True, None, True), (True, False, False), (False, True, True)],
)
def test_observation_inherits_activate_on_provider_change(
    top: bool, own: bool | None, expected: bool
) -> None:
    config = MemoryConfig(activate_on_provider_change=top, observation={"activate_on_provider_change": own})
    assert config.observation_activate_on_provider_change is expected


def test_reflection_never_inherits_top_level_activation_settings() -> None:
    config = MemoryConfig(activate_after_idle="5m", activate_on_provider_change=True)
    assert config.reflection.activate_after_idle is None
    assert config.reflection.activate_on_provider_change is False
    assert config.reflection_activation_ttl("openai", "gpt-4o") is None
    assert config.observation_activation_ttl("openai", "gpt-4o") == 300.0


@pytest.mark.parametrize(
    ("top", "own", "provider", "model", "expected"),
    [
        (None, None, "openai", "gpt-4o", None),
        ("auto", None, "openai", "gpt-5.5", 3_600.0),
        ("auto", None, "groq", "llama", 7_200.0),
        ("auto", False, "groq", "llama", None),
        ("auto", "90s", "groq", "llama", 90.0),
        (None, {"default": "10m", "providers": {"openai": "2h"}}, "openai.responses", "gpt-4o", 7_200.0),
        (None, {"default": "10m", "providers": {"openai": "2h"}}, "anthropic", "claude", 600.0),
    ],
)
def test_observation_activation_ttl_resolves_for_the_actor(
    top: object, own: object, provider: str, model: str, expected: float | None
) -> None:
    config = MemoryConfig(activate_after_idle=top, observation={"activate_after_idle": own})
    assert config.observation_activation_ttl(provider, model) == expected


def test_reflection_activation_ttl_uses_its_own_setting() -> None:
    config = MemoryConfig(reflection={"activate_after_idle": "auto"})
    assert config.reflection_activation_ttl("google", "gemini-2.5-flash") == 86_400.0
    assert MemoryConfig(reflection={"activate_after_idle": False}).reflection_activation_ttl("x", "y") is None


def test_activation_ttl_passes_provider_options() -> None:
    config = MemoryConfig(activate_after_idle="auto")
    options = {"openai": {"promptCacheRetention": "24h"}}
    assert config.observation_activation_ttl("openai", "gpt-4o", options) == 3_600.0


# ---- thresholds -----------------------------------------------------------------------------


@pytest.mark.parametrize("observation_tokens", [0, 10_000, 50_000])
def test_effective_message_threshold_is_fixed_without_a_shared_budget(observation_tokens: int) -> None:
    assert MemoryConfig().effective_message_threshold(observation_tokens) == 30_000


@pytest.mark.parametrize(
    ("observation_tokens", "expected"),
    [(0, 70_000), (10_000, 60_000), (50_000, 30_000), (100_000, 30_000), (33_333, 36_667)],
)
def test_effective_message_threshold_with_a_shared_budget(observation_tokens: int, expected: int) -> None:
    config = MemoryConfig(share_token_budget=True, observation=NO_BUFFERING)
    assert config.effective_message_threshold(observation_tokens) == expected


@pytest.mark.parametrize(
    ("shared", "message_threshold", "expected"),
    [
        (False, None, 40_000),
        (False, 60_000, 40_000),  # a fixed reflection threshold ignores the message threshold
        (True, None, 40_000),  # 70k total − 30k base message threshold
        (True, 60_000, 10_000),
        (True, 69_500, 1_000),  # never below 1000
        (True, 70_000, 1_000),
    ],
)
def test_effective_reflection_threshold(shared: bool, message_threshold: int | None, expected: int) -> None:
    config = MemoryConfig(share_token_budget=shared, observation=NO_BUFFERING)
    assert config.effective_reflection_threshold(message_threshold) == expected


# ---- immutability, replace, snapshot --------------------------------------------------------


def test_configs_are_frozen() -> None:
    config = MemoryConfig()
    with pytest.raises(ConfigError) as info:
        config.scope = "resource"
    assert info.value.option == "scope"
    with pytest.raises(ConfigError) as info:
        config.observation.message_tokens = 5
    assert info.value.option == "observation.message_tokens"


def test_replace_revalidates_and_recomputes_dependent_defaults() -> None:
    config = MemoryConfig()
    changed = config.replace(observation={"buffer_tokens": False})
    assert changed.observation.block_after is None  # not carried over: it was a default
    assert changed.observation.message_tokens == 30_000
    assert config.observation.buffer_tokens == 0.2  # the original is untouched
    with pytest.raises(ConfigError) as info:
        config.replace(observation={"buffer_tokens": 50_000})
    assert info.value.option == "observation.buffer_tokens"


def test_replace_keeps_explicit_options_and_merges_sections() -> None:
    config = MemoryConfig(scope="resource", observation={"message_tokens": 20_000, "block_after": 2})
    changed = config.replace(observation={"temperature": 0.1}, temporal_markers=True)
    assert changed.scope == "resource"
    assert changed.temporal_markers is True
    assert changed.observation.message_tokens == 20_000
    assert changed.observation.block_after == 2
    assert changed.observation.temperature == 0.1


def test_replace_accepts_a_whole_section() -> None:
    config = MemoryConfig().replace(reflection=ReflectionConfig(observation_tokens=5_000))
    assert config.reflection.observation_tokens == 5_000


SNAPSHOT_CASES: list[dict[str, Any]] = [
    {},
    {"observation": NO_BUFFERING},
    {"share_token_budget": True, "observation": NO_BUFFERING},
    {
        "scope": "resource",
        "temporal_markers": True,
        "activate_after_idle": {"default": "10m", "providers": {"OpenAI": "auto", "groq": False}},
        "activate_on_provider_change": True,
        "share_threads_in_resource": True,
        "timezone": "Europe/Paris",
        "observation": {
            "message_tokens": 20_000,
            "buffer_tokens": 4_000,
            "buffer_activation": 5_000,
            "block_after": None,
            "buffer_on_idle": True,
            "activate_after_idle": False,
            "activate_on_provider_change": False,
            "previous_observer_tokens": False,
            "observe_attachments": ["image/png"],
            "instruction": "Track dates.",
            "thread_title": True,
            "manage_working_memory": True,
        },
        "reflection": {
            "observation_tokens": 10_000,
            "buffer_activation": None,
            "activate_after_idle": "2 hours",
        },
    },
]


@pytest.mark.parametrize("kwargs", SNAPSHOT_CASES)
def test_snapshot_round_trip(kwargs: dict[str, Any]) -> None:
    config = MemoryConfig(**kwargs)
    snapshot = config.snapshot()
    restored = MemoryConfig.from_snapshot(json.loads(json.dumps(snapshot)))
    assert restored == config
    assert restored.snapshot() == snapshot


def test_snapshot_is_plain_json_data() -> None:
    snapshot = MemoryConfig().snapshot()
    assert snapshot["observation"]["observe_attachments"] == ["image/*", "application/pdf"]
    assert snapshot["observation"]["block_after"] == 1.2
    assert json.loads(json.dumps(snapshot)) == snapshot


def test_snapshot_records_every_option() -> None:
    snapshot = MemoryConfig().snapshot()
    assert set(snapshot) == set(MemoryConfig.model_fields)
    assert set(snapshot["observation"]) == set(ObservationConfig.model_fields)
    assert set(snapshot["reflection"]) == set(ReflectionConfig.model_fields)


@pytest.mark.parametrize(
    ("observation", "option", "expected"),
    [
        ({"previous_observer_tokens": 0}, "previous_observer_tokens", 0),
        ({"activate_after_idle": 0}, "activate_after_idle", 0),
        ({"activate_after_idle": 0.0}, "activate_after_idle", 0.0),
    ],
)
def test_zero_is_not_confused_with_false(observation: dict[str, Any], option: str, expected: object) -> None:
    """``0 == False`` in Python; the options must still keep them apart."""
    value = getattr(ObservationConfig(**observation), option)
    assert value == expected
    assert value is not False
    restored = MemoryConfig.model_validate_json(json.dumps({"observation": observation}))
    assert getattr(restored.observation, option) is not False


@pytest.mark.parametrize(
    ("options", "model"),
    [
        (MemoryOptions, MemoryConfig),
        (ObservationOptions, ObservationConfig),
        (ReflectionOptions, ReflectionConfig),
    ],
)
def test_keyword_typed_dicts_list_every_option(options: type, model: type[MemoryConfig]) -> None:
    assert set(options.__annotations__) == set(model.model_fields)
