"""Threshold arithmetic at its edges (table tests of ``obsmem.thresholds``).

The idle-activation mapping resolved for an OpenAI actor (whose "auto" TTL depends on the model
name), the exact switch points of the ratio/absolute conventions, and the smallest sizes.
"""

from __future__ import annotations

import pytest

from obsmem.errors import ConfigError, InvalidInputError
from obsmem.thresholds import (
    TokenRange,
    parse_duration,
    resolve_activation_ratio,
    resolve_activation_ttl,
    should_trigger_buffer,
)

MINUTE = 60.0
HOUR = 3600.0


@pytest.mark.parametrize(
    ("setting", "provider", "model", "expected"),
    [
        pytest.param({"providers": {"openai": "auto"}}, "openai", "gpt-4o", 5 * MINUTE, id="map auto, gpt-4o"),
        pytest.param({"providers": {"openai": "auto"}}, "openai", "gpt-5.5", HOUR, id="map auto, gpt-5.5"),
        pytest.param({"providers": {"groq": "1h"}}, "openai", "gpt-4o", 5 * MINUTE, id="default auto, openai"),
        pytest.param({"providers": {"groq": "1h"}}, "", "openai:gpt-5.5", HOUR, id="provider in the model id"),
        pytest.param({"default": "auto"}, "openai.responses", "gpt-5.1-codex", 5 * MINUTE, id="flavoured id"),
    ],
)
def test_a_per_provider_mapping_resolves_auto_with_the_actors_model(
    setting: dict[str, object], provider: str, model: str, expected: float
) -> None:
    assert resolve_activation_ttl(setting, provider, model) == expected  # type: ignore[arg-type]


def test_a_duration_names_the_idle_option_by_default() -> None:
    with pytest.raises(ConfigError) as info:
        parse_duration("soon")
    assert info.value.option == "activate_after_idle"


@pytest.mark.parametrize(
    ("low", "high"),
    [(0, 0), (0, 10), (5, 5)],
)
def test_token_ranges_may_start_at_zero_and_be_a_single_value(low: int, high: int) -> None:
    assert (TokenRange(low, high).min, TokenRange(low, high).max) == (low, high)


@pytest.mark.parametrize(("low", "high"), [(-1, 5), (6, 5)])
def test_invalid_token_ranges_are_refused(low: int, high: int) -> None:
    with pytest.raises(InvalidInputError):
        TokenRange(low, high)


@pytest.mark.parametrize(
    ("activation", "threshold", "ratio"),
    [
        (1000, 10_000, 0.9),  # from 1000 up an activation value is a retention target in tokens
        (999, 10_000, 1.0),  # below it is a ratio (clamped)
        (0.8, 10_000, 0.8),
        (1000, 0, 0.0),
        (20_000, 10_000, 0.0),
    ],
)
def test_activation_ratio_switch_point(activation: float, threshold: int, ratio: float) -> None:
    assert resolve_activation_ratio(activation, threshold) == pytest.approx(ratio)


def test_a_one_token_buffer_interval_still_triggers() -> None:
    assert should_trigger_buffer(5, 3, 1, 100)
    assert not should_trigger_buffer(5, 5, 1, 100)
    assert not should_trigger_buffer(5, 3, 0, 100)
