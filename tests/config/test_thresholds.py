"""Table tests for the pure threshold functions (reference §3.2, §3.4, §3.5 step 6, §9.1, §9.2)."""

from __future__ import annotations

import math

import pytest

from obsmem.errors import ConfigError, InvalidInputError
from obsmem.om.activation import projected_message_removal, select_activation_prefix
from obsmem.thresholds import (
    TokenRange,
    auto_activation_ttl,
    check_activation_ttl,
    dynamic_threshold,
    max_threshold,
    min_new_tokens_for_buffer,
    normalize_provider,
    parse_duration,
    resolve_activation_ratio,
    resolve_activation_ttl,
    resolve_block_after,
    resolve_buffer_tokens,
    resolve_retention_floor,
    round_half_up,
    should_trigger_buffer,
)

MINUTE = 60.0
HOUR = 3600.0
RANGE_30_70 = TokenRange(min=30_000, max=70_000)


# ---- §9.1 item 1 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [(30_000, 30_000), (TokenRange(min=8_000, max=70_000), 70_000), (0, 0)],
)
def test_max_threshold(threshold: int | TokenRange, expected: int) -> None:
    assert max_threshold(threshold) == expected


@pytest.mark.parametrize(("low", "high"), [(-1, 10), (10, 9)])
def test_token_range_rejects_inverted_or_negative_bounds(low: int, high: int) -> None:
    with pytest.raises(InvalidInputError):
        TokenRange(min=low, max=high)


# ---- §9.1 item 2 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "observation_tokens", "expected"),
    [
        (30_000, 10_000, 30_000),
        (30_000, 0, 30_000),
        (RANGE_30_70, 0, 70_000),
        (RANGE_30_70, 10_000, 60_000),
        (RANGE_30_70, 50_000, 30_000),  # never below min
        (RANGE_30_70, 100_000, 30_000),
        (RANGE_30_70, 33_333, 36_667),
        (RANGE_30_70, 33_333.5, 36_667),  # 36666.5 rounds half up, like Math.round
    ],
)
def test_dynamic_threshold(threshold: int | TokenRange, observation_tokens: float, expected: int) -> None:
    assert dynamic_threshold(threshold, observation_tokens) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(0.5, 1), (1.5, 2), (2.5, 3), (-0.5, 0), (-1.5, -1), (43_332.9, 43_333)]
)
def test_round_half_up_matches_javascript_math_round(value: float, expected: int) -> None:
    assert round_half_up(value) == expected


# ---- §9.1 item 3 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message_tokens", "expected"),
    [
        (False, 20_000, None),
        (None, 20_000, None),
        (0.25, 20_000, 5_000),
        (0.1, RANGE_30_70, 7_000),  # fraction of the range's max
        (5_000, 20_000, 5_000),
        (1, 20_000, 1),  # only (0, 1) is fractional
        (0.01, 100_000, 1_000),
        (0.2, 30_000, 6_000),  # the default
    ],
)
def test_resolve_buffer_tokens(
    value: float | bool | None, message_tokens: int | TokenRange, expected: int | None
) -> None:
    assert resolve_buffer_tokens(value, message_tokens) == expected


def test_resolve_buffer_tokens_refuses_true() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_buffer_tokens(True, 30_000)
    assert info.value.option == "observation.buffer_tokens"


# ---- §9.1 item 4 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message_tokens", "expected"),
    [
        (None, 20_000, None),
        (1.5, 20_000, 30_000),
        (1.0, 20_000, 20_000),  # 1.0 is a multiplier: equals the threshold
        (1.2, RANGE_30_70, 84_000),
        (50_000, 20_000, 50_000),  # >= 100 is absolute
        (100, 20_000, 100),
        (1.3, 33_333, 43_333),  # rounded
        (1.2, 30_000, 36_000),  # the default
    ],
)
def test_resolve_block_after(
    value: float | None, message_tokens: int | TokenRange, expected: int | None
) -> None:
    assert resolve_block_after(value, message_tokens) == expected


# ---- §9.1 item 5 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("buffer_activation", "expected"),
    [
        (0.7, 9_000),
        (5_000, 5_000),  # >= 1000 is absolute
        (1_000, 1_000),
        (1.0, 0),
        (0.0, 30_000),
        (-0.5, 30_000),  # a negative ratio clamps to 0: everything retained
        (1.5, 0),  # a ratio above 1 clamps to 1
        (0.8, 6_000),  # the safe default
    ],
)
def test_resolve_retention_floor(buffer_activation: float, expected: int) -> None:
    assert resolve_retention_floor(buffer_activation, 30_000) == expected


def test_resolve_retention_floor_uses_range_max() -> None:
    assert resolve_retention_floor(0.5, RANGE_30_70) == 35_000


# ---- §9.1 item 6 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("buffer_activation", "expected"),
    [
        (0.7, 0.7),  # below 1000: returned as is
        (5_000, 1 - 5_000 / 30_000),  # about 0.8333
        (50_000, 0.0),
        (30_000, 0.0),
        (-0.5, 0.0),
        (1.5, 1.0),
    ],
)
def test_resolve_activation_ratio(buffer_activation: float, expected: float) -> None:
    assert resolve_activation_ratio(buffer_activation, 30_000) == pytest.approx(expected)


def test_resolve_activation_ratio_absolute_value_is_about_five_sixths() -> None:
    assert round(resolve_activation_ratio(5_000, 30_000), 4) == 0.8333


def test_resolve_activation_ratio_with_zero_threshold_does_not_divide_by_zero() -> None:
    assert resolve_activation_ratio(5_000, 0) == 0.0


# ---- §9.1 item 7 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "activation", "pending", "expected"),
    [
        pytest.param([], 0.7, 25_000, 0, id="no chunks"),
        pytest.param([5_000, 5_000], 0.7, 5_000, 0, id="pending 5000 within floor 9000"),
        pytest.param([5_000, 5_000, 5_000], 0.7, 25_000, 15_000, id="all under target 16000"),
        pytest.param([8_000, 9_000], 0.7, 25_000, 17_000, id="over: overshoot 1000 <= 8550"),
        pytest.param([3_000, 25_000], 0.7, 25_000, 3_000, id="overshoot 12000 > 8550: under"),
        pytest.param([10_000], 0.7, 25_000, 10_000, id="single chunk"),
        pytest.param([5_000, 5_000], 1.0, 10_000, 10_000, id="ratio 1.0 removes everything"),
        pytest.param([4_000, 4_000, 4_000], 5_000, 15_000, 12_000, id="absolute floor 5000"),
    ],
)
def test_projected_message_removal(
    chunks: list[int], activation: float, pending: int, expected: int
) -> None:
    assert projected_message_removal(chunks, activation, 30_000, pending) == expected


def test_projected_removal_is_zero_at_exactly_the_floor() -> None:
    assert projected_message_removal([5_000], 0.7, 30_000, 9_000) == 0


# ---- §3.5 step 6: the swap's prefix choice ----------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "activation", "threshold", "pending", "force_max", "expected"),
    [
        pytest.param([], 0.7, 30_000, 25_000, False, 0, id="no chunks"),
        # (a) force: a large floor (30k) where the over-boundary overshoots by 29000 > 28500 but
        # still leaves 1000 tokens. Forced activation takes it; normal activation falls back.
        pytest.param([10_000, 89_000], 0.7, 100_000, 100_000, True, 2, id="(a) force takes over"),
        pytest.param([10_000, 89_000], 0.7, 100_000, 100_000, False, 1, id="(c) without force"),
        # (a) is skipped when over would leave less than min(1000, floor).
        pytest.param([10_000, 99_500], 0.7, 100_000, 100_000, True, 1, id="(a) skipped: too little left"),
        pytest.param([8_000, 9_000], 0.7, 30_000, 25_000, False, 2, id="(b) over within overshoot"),
        pytest.param([3_000, 25_000], 0.7, 30_000, 25_000, False, 1, id="(c) under"),
        pytest.param([5_000, 5_000, 5_000], 0.7, 30_000, 25_000, False, 3, id="(c) all under"),
        pytest.param([30_000], 0.7, 30_000, 30_000, False, 1, id="(d) only over, overshoot too big"),
        pytest.param([30_000], 0.7, 30_000, 30_000, True, 1, id="(d) force, nothing would remain"),
        pytest.param([5_000, 5_000], 0.7, 30_000, 5_000, False, 1, id="within floor: still one chunk"),
        pytest.param([0, 20_000], 0.7, 30_000, 25_000, False, 2, id="zero-token first chunk"),
        pytest.param([17_000, 0], 0.7, 30_000, 25_000, False, 1, id="smallest prefix on ties"),
        pytest.param([4_000, 4_000, 4_000], 5_000, 30_000, 15_000, False, 3, id="absolute floor"),
        # An absolute floor above the threshold is capped at the threshold, as in the swap.
        pytest.param([10_000, 10_000], 50_000, 30_000, 40_000, False, 1, id="floor capped"),
    ],
)
def test_select_activation_prefix(
    chunks: list[int],
    activation: float,
    threshold: int,
    pending: int,
    force_max: bool,
    expected: int,
) -> None:
    assert select_activation_prefix(chunks, activation, threshold, pending, force_max=force_max) == expected


def test_select_activation_prefix_rejects_negative_chunk_sizes() -> None:
    with pytest.raises(InvalidInputError):
        select_activation_prefix([5_000, -1], 0.7, 30_000, 25_000)


def test_default_activation_keeps_about_the_retention_floor() -> None:
    """Five 6k chunks at the 30k threshold with the 0.8 default: 24k go, 6k stay."""
    chunks = [6_000] * 5
    count = select_activation_prefix(chunks, 0.8, 30_000, 30_000)
    assert count == 4
    assert projected_message_removal(chunks, 0.8, 30_000, 30_000) == 24_000


# ---- §3.4: the interval trigger ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("pending", "last_boundary", "buffer_tokens", "expected"),
    [
        pytest.param(5_999, 0, 6_000, False, id="below the first interval"),
        pytest.param(6_000, 0, 6_000, True, id="first interval crossed"),
        pytest.param(11_999, 6_000, 6_000, False, id="same interval as last boundary"),
        pytest.param(12_000, 6_000, 6_000, True, id="next interval"),
        pytest.param(18_500, 6_000, 6_000, True, id="two intervals crossed: one trigger"),
        pytest.param(23_399, 18_000, 6_000, False, id="just before the ramp"),
        pytest.param(23_400, 18_000, 6_000, True, id="ramp: interval halves at 30000 - 6600"),
        pytest.param(26_999, 24_000, 6_000, False, id="ramp: same half interval"),
        pytest.param(27_000, 24_000, 6_000, True, id="ramp: next half interval"),
        pytest.param(30_000, 0, 6_000, False, id="at the threshold: observe instead"),
        pytest.param(6_000, 12_000, 6_000, False, id="boundary ahead of pending"),
        pytest.param(6_000, 0, None, False, id="buffering off"),
        pytest.param(6_000, 0, 0, False, id="zero interval"),
    ],
)
def test_should_trigger_buffer(
    pending: int, last_boundary: int, buffer_tokens: int | None, expected: bool
) -> None:
    assert should_trigger_buffer(pending, last_boundary, buffer_tokens, 30_000) is expected


@pytest.mark.parametrize(
    ("buffer_tokens", "expected"), [(6_000, 3_000), (5_001, 2_501), (1, 1), (None, 2_500), (0, 2_500)]
)
def test_min_new_tokens_for_buffer(buffer_tokens: int | None, expected: int) -> None:
    assert min_new_tokens_for_buffer(buffer_tokens) == expected


# ---- §1.6 / §9.2: durations, providers, 'auto' ------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (300, 300.0),
        (1.5, 1.5),
        (0, 0.0),
        ("300ms", 0.3),
        ("45s", 45.0),
        ("10sec", 10.0),
        ("30 seconds", 30.0),
        ("5m", 300.0),
        ("5 min", 300.0),
        ("90 minutes", 5_400.0),
        ("1.5h", 5_400.0),
        ("1hr", 3_600.0),
        ("2 hours", 7_200.0),
        ("2 HOURS", 7_200.0),
        ("1.5H", 5_400.0),
        (".5h", 1_800.0),
        (" 5m ", 300.0),
        ("1d", 86_400.0),
    ],
)
def test_parse_duration(value: str | float, seconds: float) -> None:
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value",
    [-1, -0.5, "-5m", "5", "abc", "5 parsecs", "", "m", "5m5s", True, False, math.nan, math.inf, None, [1]],
)
def test_parse_duration_rejects_invalid_values(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_duration(value, option="observation.activate_after_idle")  # type: ignore[arg-type]
    assert info.value.option == "observation.activate_after_idle"
    assert "5m" in str(info.value)  # the message shows what is accepted


def test_parse_duration_says_a_unit_is_required() -> None:
    with pytest.raises(ConfigError, match="unit is required"):
        parse_duration("300000")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("openai.responses", "openai"),
        ("openai:gpt-4o", "openai"),
        ("anthropic.messages", "anthropic"),
        ("google/gemini-2.5-flash", "google"),
        ("OpenAI", "openai"),
        (" xai ", "xai"),
        ("groq", "groq"),
        ("", ""),
    ],
)
def test_normalize_provider(value: str, expected: str) -> None:
    assert normalize_provider(value) == expected


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openai", "gpt-4o", 5 * MINUTE),
        ("openai", "gpt-4", 5 * MINUTE),
        ("openai", "gpt-4.1-mini", 5 * MINUTE),
        ("openai", "gpt-5", 5 * MINUTE),
        ("openai", "gpt-5-mini", 5 * MINUTE),
        ("openai", "gpt-5.1", 5 * MINUTE),
        ("openai", "gpt-5.1-codex", 5 * MINUTE),
        ("openai", "gpt-5.2", 5 * MINUTE),
        ("openai", "gpt-5.4", 5 * MINUTE),
        ("openai", "gpt-5.4-pro", 5 * MINUTE),
        ("openai", "GPT-5.1", 5 * MINUTE),
        ("openai.responses", "gpt-4o", 5 * MINUTE),
        ("openai", "openai/gpt-5.1-codex", 5 * MINUTE),
        ("openai", "gpt-5.5", HOUR),
        ("openai", "gpt-5.10", HOUR),
        ("openai", "gpt-6", HOUR),
        ("openai", "o3", HOUR),
        ("google", "gemini-2.5-flash", 24 * HOUR),
        ("google.generative-ai", "gemini-2.5-pro", 24 * HOUR),
        ("gemini", "gemini-2.5-flash", 24 * HOUR),
        ("deepseek", "deepseek-chat", HOUR),
        ("groq", "llama-3.3-70b", 2 * HOUR),
        ("Groq", "llama-3.3-70b", 2 * HOUR),
        ("anthropic", "claude-sonnet-4-5", 5 * MINUTE),
        ("anthropic.messages", "claude-opus-4", 5 * MINUTE),
        ("xai", "grok-4", 5 * MINUTE),
        ("grok", "grok-4", 5 * MINUTE),
        ("openrouter", "openai/gpt-5.5", 5 * MINUTE),
        ("mistral", "mistral-large", 5 * MINUTE),
        ("", "unknown-model", 5 * MINUTE),
        ("", "openai:gpt-5.5", HOUR),  # the provider can come with the model id
        ("", "google/gemini-2.5-flash", 24 * HOUR),
    ],
)
def test_auto_activation_ttl(provider: str, model: str, expected: float) -> None:
    assert auto_activation_ttl(provider, model) == expected


@pytest.mark.parametrize(
    ("model", "options", "expected"),
    [
        ("gpt-4o", {"openai": {"promptCacheRetention": "24h"}}, HOUR),
        ("gpt-5.5", {"openai": {"promptCacheRetention": "in_memory"}}, 5 * MINUTE),
        ("gpt-4o", {"openai": {"prompt_cache_retention": "24h"}}, HOUR),
        ("gpt-4o", {"openai": {"promptCacheRetention": "other"}}, 5 * MINUTE),  # model rule
        ("gpt-5.5", {"anthropic": {"promptCacheRetention": "in_memory"}}, HOUR),  # not openai's
        ("gpt-4o", {"openai": "24h"}, 5 * MINUTE),  # malformed options are ignored
        ("gpt-4o", None, 5 * MINUTE),
    ],
)
def test_auto_activation_ttl_openai_cache_retention(
    model: str, options: dict[str, object] | None, expected: float
) -> None:
    assert auto_activation_ttl("openai", model, options) == expected


def test_cache_retention_applies_only_to_openai() -> None:
    options = {"openai": {"promptCacheRetention": "24h"}}
    assert auto_activation_ttl("anthropic", "claude-sonnet-4-5", options) == 5 * MINUTE


@pytest.mark.parametrize(
    ("setting", "provider", "model", "expected"),
    [
        pytest.param(None, "openai", "gpt-4o", None, id="None is off"),
        pytest.param(False, "openai", "gpt-4o", None, id="False is off"),
        pytest.param("5m", "openai", "gpt-4o", 300.0, id="duration string as is"),
        pytest.param(120, "anthropic", "claude", 120.0, id="number of seconds as is"),
        pytest.param(0, "anthropic", "claude", 0.0, id="zero: activate whenever idle"),
        pytest.param("auto", "openai", "gpt-5.5", HOUR, id="auto gpt-5.5"),
        pytest.param("auto", "openai", "gpt-5.1-codex", 5 * MINUTE, id="auto gpt-5.1-codex"),
        pytest.param("AUTO", "groq", "llama", 2 * HOUR, id="auto groq, any case"),
        pytest.param("auto", "anthropic", "claude", 5 * MINUTE, id="auto anthropic"),
        pytest.param("auto", "somebody", "model", 5 * MINUTE, id="auto unknown"),
        pytest.param(
            {"default": "10m", "providers": {"openai": "1h"}}, "openai", "gpt-4o", HOUR,
            id="map: provider wins",
        ),
        pytest.param(
            {"default": "10m", "providers": {"openai": "1h"}}, "openai.responses", "gpt-4o", HOUR,
            id="map: provider normalized",
        ),
        pytest.param(
            {"default": "10m", "providers": {"openai": "1h"}}, "anthropic", "claude", 600.0, id="map: default"
        ),
        pytest.param({"providers": {"groq": False}}, "groq", "llama", None, id="map: provider off"),
        pytest.param(
            {"providers": {"groq": False}}, "anthropic", "claude", 5 * MINUTE, id="map: default is auto"
        ),
        pytest.param(
            {"default": False, "providers": {"google": "auto"}}, "google", "gemini-2.5-flash", 24 * HOUR,
            id="map: provider auto",
        ),
        pytest.param(
            {"default": False, "providers": {"google": "auto"}}, "anthropic", "claude", None,
            id="map: default off",
        ),
        pytest.param(
            {"providers": {"OpenAI.Responses": 60}}, "openai", "gpt-4o", 60.0, id="map: keys normalized"
        ),
        pytest.param(
            {"providers": {"openai": "2h"}}, "", "openai:gpt-4o", 2 * HOUR, id="map: provider from model id"
        ),
    ],
)
def test_resolve_activation_ttl(
    setting: object, provider: str, model: str, expected: float | None
) -> None:
    assert resolve_activation_ttl(setting, provider, model) == expected  # type: ignore[arg-type]


def test_resolve_activation_ttl_passes_provider_options_to_auto() -> None:
    options = {"openai": {"promptCacheRetention": "24h"}}
    assert resolve_activation_ttl("auto", "openai", "gpt-4o", options) == HOUR
    assert resolve_activation_ttl({"providers": {"openai": "auto"}}, "openai", "gpt-4o", options) == HOUR


@pytest.mark.parametrize(
    ("setting", "option"),
    [
        (True, "activate_after_idle"),
        ("soon", "activate_after_idle"),
        (-5, "activate_after_idle"),
        ({"defaults": "5m"}, "activate_after_idle"),
        ({"providers": 5}, "activate_after_idle.providers"),
        ({"providers": {"openai": "x"}}, "activate_after_idle.providers.openai"),
        ({"providers": {"openai": {"default": 1}}}, "activate_after_idle.providers.openai"),
        ({"providers": {"": 1}}, "activate_after_idle.providers"),
        ({"default": "never"}, "activate_after_idle.default"),
        ({"default": {"providers": {}}}, "activate_after_idle.default"),
        ([300], "activate_after_idle"),
    ],
)
def test_invalid_activation_ttl_settings_name_the_option(setting: object, option: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_activation_ttl(setting, "openai", "gpt-4o")  # type: ignore[arg-type]
    assert info.value.option == option


@pytest.mark.parametrize(
    ("setting", "canonical"),
    [
        (None, None),
        (False, None),
        ("Auto", "auto"),
        ("5m", "5m"),
        (90, 90),
        ({}, {"default": "auto", "providers": {}}),
        (
            {"providers": {"OpenAI": "1h", "groq": None}},
            {"default": "auto", "providers": {"openai": "1h", "groq": None}},
        ),
        ({"default": False}, {"default": None, "providers": {}}),
    ],
)
def test_check_activation_ttl_canonical_form(setting: object, canonical: object) -> None:
    assert check_activation_ttl(setting, option="activate_after_idle") == canonical
