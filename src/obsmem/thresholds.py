"""Threshold arithmetic: when to observe, buffer, activate and how much to keep.

Every decision the observational-memory state machine makes about *sizes* lives here, as pure
functions of plain numbers. Keeping them free of I/O, records and clocks means each rule can be
checked against the reference tables on its own, and the engine can be read as "ask thresholds,
then act".

Conventions used throughout:

- Token counts are ``int``. Where the reference multiplies a threshold by a fraction, the result
  is rounded half up (JavaScript ``Math.round``), so ``33333 → 36667`` as in the reference.
- A threshold is either a fixed number of tokens or a :class:`TokenRange` (the shared
  message/observation budget). Functions that need one number take the range's ``max``.
- Durations are **seconds, as float**. A bare number is seconds (the reference uses
  milliseconds; Python's clocks and ``asyncio`` speak seconds). Strings always carry a unit:
  ``"300ms"``, ``"5m"``, ``"1.5h"``, ``"2 hours"``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from obsmem.errors import ConfigError, InvalidInputError
from obsmem.profiles import prompt_cache_ttl, provider_name

__all__ = [
    "ActivationTTLSetting",
    "Threshold",
    "TokenRange",
    "auto_activation_ttl",
    "check_activation_ttl",
    "dynamic_threshold",
    "max_threshold",
    "min_new_tokens_for_buffer",
    "normalize_provider",
    "parse_duration",
    "resolve_activation_ratio",
    "resolve_activation_ttl",
    "resolve_block_after",
    "resolve_buffer_tokens",
    "resolve_retention_floor",
    "round_half_up",
    "should_trigger_buffer",
]


# --------------------------------------------------------------------------------------------
# Thresholds
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenRange:
    """A threshold that moves between ``min`` and ``max`` tokens.

    Used for the shared token budget: the message threshold may grow up to ``max`` while the
    observations are small, and never shrinks below ``min``.
    """

    min: int
    max: int

    def __post_init__(self) -> None:
        if self.min < 0 or self.max < self.min:
            raise InvalidInputError(
                f"TokenRange needs 0 <= min <= max, got min={self.min}, max={self.max}."
            )


Threshold: TypeAlias = int | TokenRange

#: Values the idle-activation options accept: off (``None``/``False``), a duration (seconds or a
#: string with a unit), ``"auto"``, or ``{"default": ..., "providers": {name: ...}}``.
ActivationTTLSetting: TypeAlias = float | int | str | Literal[False] | Mapping[str, Any] | None


def round_half_up(value: float) -> int:
    """Round like JavaScript ``Math.round`` (halves go up), not like Python's banker's ``round``.

    The reference's numbers (``1.3 × 33333 = 43332.9 → 43333``) are produced this way, and
    matching them keeps records comparable with the reference implementation.
    """
    return math.floor(value + 0.5)


def _clamp01(value: float) -> float:
    return max(0.0, min(1.0, value))


def max_threshold(t: Threshold) -> int:
    """The largest value a threshold can take: the number itself, or the range's ``max``."""
    return t.max if isinstance(t, TokenRange) else t


def dynamic_threshold(t: Threshold, observation_tokens: float) -> int:
    """The message threshold in force while ``observation_tokens`` of observations are active.

    A fixed threshold never moves. A range (the shared budget) gives messages whatever the
    observations do not use: ``max − observations``, but never less than ``min``.
    """
    if not isinstance(t, TokenRange):
        return t
    return round_half_up(max(t.max - observation_tokens, t.min))


def resolve_buffer_tokens(value: float | bool | None, message_tokens: Threshold) -> int | None:
    """Tokens between two background buffer cycles, or ``None`` when buffering is off.

    A value strictly between 0 and 1 is a fraction of the (maximum) message threshold; anything
    else is an absolute count, so ``1`` means one token, not "100 %". Range checks belong to the
    config; this function only converts.
    """
    if value is None or value is False:
        return None
    if value is True:
        raise ConfigError(
            "observation.buffer_tokens",
            "True is not a size",
            allowed="False, a fraction in (0, 1) or a token count",
        )
    if 0 < value < 1:
        return round_half_up(max_threshold(message_tokens) * value)
    return round_half_up(value)


def resolve_block_after(value: float | None, message_tokens: Threshold) -> int | None:
    """The token count at which activation may over-remove (``force_max``), or ``None``.

    Values in ``[1, 100)`` multiply the (maximum) threshold, so ``1.0`` equals the threshold;
    values from 100 up are absolute.
    """
    if value is None or isinstance(value, bool):
        return None
    if 1 <= value < 100:
        return round_half_up(max_threshold(message_tokens) * value)
    return round_half_up(value)


def resolve_retention_floor(buffer_activation: float, message_tokens: Threshold) -> int:
    """How many tokens of raw messages an activation tries to leave in the actor's window.

    ``buffer_activation`` from 1000 up is that number directly. Below 1000 it is the share of
    the threshold to *remove*, clamped to [0, 1], so the floor is ``threshold × (1 − ratio)``:
    0.8 keeps 20 %, 1.0 keeps nothing.
    """
    if buffer_activation >= 1000:
        return round_half_up(buffer_activation)
    return round_half_up(max_threshold(message_tokens) * (1 - _clamp01(buffer_activation)))


def resolve_activation_ratio(buffer_activation: float, message_tokens: Threshold) -> float:
    """The share of the threshold an activation removes, in [0, 1].

    An absolute retention target (≥ 1000) becomes ``1 − target / threshold``; a ratio is
    clamped. A target at or above the threshold gives 0 (remove nothing beyond the minimum).
    """
    if buffer_activation >= 1000:
        threshold = max_threshold(message_tokens)
        if threshold <= 0:
            return 0.0
        return _clamp01(1 - buffer_activation / threshold)
    return _clamp01(buffer_activation)


# --------------------------------------------------------------------------------------------
# Buffering
# --------------------------------------------------------------------------------------------

#: The reference's fallback interval when none is resolved, used for the minimum-size check.
_FALLBACK_BUFFER_TOKENS = 5000
#: Near the threshold the interval halves, so the last stretch before it is covered by chunks.
_RAMP_FACTOR = 1.1


def should_trigger_buffer(
    pending_tokens: float, last_boundary_tokens: float, buffer_tokens: int | None, threshold: float
) -> bool:
    """Whether a background buffer cycle should start now (the interval trigger).

    A cycle starts once per buffer interval crossed since the last boundary. Once ``pending``
    comes within ``1.1 × buffer_tokens`` of the threshold, the interval halves so that more of
    the window is already buffered when the threshold is reached. At or above the threshold
    the caller observes or activates instead, so no buffer starts.
    """
    if buffer_tokens is None or buffer_tokens <= 0 or pending_tokens >= threshold:
        return False
    interval: float = buffer_tokens
    if pending_tokens >= threshold - _RAMP_FACTOR * buffer_tokens:
        interval = buffer_tokens / 2
    return math.floor(pending_tokens / interval) > math.floor(last_boundary_tokens / interval)


def min_new_tokens_for_buffer(buffer_tokens: int | None) -> int:
    """The fewest new tokens a threshold-triggered buffer cycle needs (half an interval).

    Smaller cycles would spend an Observer call on a sliver of conversation. Rounded up, so
    ``new_tokens < min_new_tokens_for_buffer(b)`` is exactly the reference's ``new < b / 2``
    for whole token counts. Idle buffering skips this check.
    """
    interval = buffer_tokens if buffer_tokens else _FALLBACK_BUFFER_TOKENS
    return math.ceil(interval / 2)


# The activation rule itself (which prefix of buffered chunks becomes active) lives in
# obsmem.om.activation, alone.


# --------------------------------------------------------------------------------------------
# Activation TTL (idle activation)
# --------------------------------------------------------------------------------------------

_MINUTE = 60.0
_HOUR = 3600.0

_UNIT_SECONDS: dict[str, float] = {
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), 0.001),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), _MINUTE),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), _HOUR),
    **dict.fromkeys(("d", "day", "days"), 24 * _HOUR),
}
_DURATION_RE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-z]+)")
_DURATION_ALLOWED = (
    "seconds as a number >= 0, or a string with a unit such as '300ms', '45s', '5m', '1.5h', "
    "'2 hours', '1d'"
)


def parse_duration(value: str | int | float, *, option: str = "activate_after_idle") -> float:
    """A duration in seconds. Numbers are seconds; strings need a unit (case-insensitive).

    Unitless strings are refused rather than guessed: ``"300000"`` reads as milliseconds to
    someone coming from the reference and as seconds to everyone else.
    """
    if isinstance(value, bool):
        raise ConfigError(option, f"{value!r} is not a duration", allowed=_DURATION_ALLOWED)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION_RE.fullmatch(value.strip().lower())
        unit = match.group("unit") if match else None
        if match is None or unit not in _UNIT_SECONDS:
            hint = " (a unit is required)" if _is_number_text(value) else ""
            raise ConfigError(
                option, f"cannot read {value!r} as a duration{hint}", allowed=_DURATION_ALLOWED
            )
        seconds = float(match.group("number")) * _UNIT_SECONDS[unit]
    else:
        raise ConfigError(
            option, f"expected a duration, got {type(value).__name__}", allowed=_DURATION_ALLOWED
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(
            option, f"{value!r} is not a finite, non-negative duration", allowed=_DURATION_ALLOWED
        )
    return seconds


def _is_number_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def normalize_provider(provider_or_model_id: str) -> str:
    """The bare, lower-case provider name: ``"openai.responses"`` and ``"openai:gpt-4o"`` → ``"openai"``.

    The one reading of provider names is :func:`obsmem.profiles.provider_name`.
    """
    return provider_name(provider_or_model_id)


def auto_activation_ttl(
    provider: str, model: str, provider_options: Mapping[str, Any] | None = None
) -> float:
    """The provider-aware idle TTL (seconds) that ``"auto"`` stands for: the provider's
    prompt-cache lifetime, a vendor fact kept in :func:`obsmem.profiles.prompt_cache_ttl`."""
    return prompt_cache_ttl(provider, model, provider_options)


_TTL_ALLOWED = (
    "None or False (off), 'auto', a duration (seconds, or a string like '5m'), or "
    "{'default': <setting>, 'providers': {<provider>: <setting>}}"
)


def check_activation_ttl(setting: object, *, option: str) -> ActivationTTLSetting:
    """Validate an idle-activation setting and return it in canonical form.

    Canonical form: ``None`` for off, ``"auto"`` lower-cased, durations as given, and a
    mapping as ``{"default": ..., "providers": {<normalized provider>: ...}}`` with ``default``
    filled in as ``"auto"`` when absent. Raises :class:`ConfigError` naming ``option``.
    """
    if setting is None or setting is False:
        return None
    if setting is True:
        raise ConfigError(option, "True is ambiguous; use 'auto' or a duration", allowed=_TTL_ALLOWED)
    if isinstance(setting, str) and setting.strip().lower() == "auto":
        return "auto"
    if isinstance(setting, str | int | float):
        parse_duration(setting, option=option)
        return setting
    if isinstance(setting, Mapping):
        unknown = sorted(str(key) for key in setting if key not in ("default", "providers"))
        if unknown:
            raise ConfigError(option, f"unknown key(s) {unknown}", allowed="'default' and 'providers'")
        default = setting.get("default", "auto")
        if isinstance(default, Mapping):
            raise ConfigError(f"{option}.default", "cannot be a mapping", allowed=_TTL_ALLOWED)
        providers_in = setting.get("providers", {})
        if not isinstance(providers_in, Mapping):
            raise ConfigError(
                f"{option}.providers", "expected a mapping of provider name to setting",
                allowed=_TTL_ALLOWED,
            )
        providers: dict[str, ActivationTTLSetting] = {}
        for key, value in providers_in.items():
            if not isinstance(key, str) or not normalize_provider(key):
                raise ConfigError(f"{option}.providers", f"{key!r} is not a provider name")
            if isinstance(value, Mapping):
                raise ConfigError(f"{option}.providers.{key}", "cannot be a mapping", allowed=_TTL_ALLOWED)
            entry_option = f"{option}.providers.{key}"
            providers[normalize_provider(key)] = check_activation_ttl(value, option=entry_option)
        return {"default": check_activation_ttl(default, option=f"{option}.default"), "providers": providers}
    raise ConfigError(option, f"unsupported type {type(setting).__name__}", allowed=_TTL_ALLOWED)


def resolve_activation_ttl(
    setting: ActivationTTLSetting,
    provider: str,
    model: str,
    provider_options: Mapping[str, Any] | None = None,
    *,
    option: str = "activate_after_idle",
) -> float | None:
    """The idle time (seconds) after which buffered work activates, or ``None`` for never.

    ``setting`` is off (``None``/``False``), a duration, ``"auto"`` (see
    :func:`auto_activation_ttl`) or a per-provider mapping. In a mapping the entry for the
    actor's provider wins (matched after :func:`normalize_provider`); otherwise ``default``
    applies, and a missing ``default`` means ``"auto"``.
    """
    canonical = check_activation_ttl(setting, option=option)
    if isinstance(canonical, Mapping):
        providers: Mapping[str, ActivationTTLSetting] = canonical["providers"]
        name = normalize_provider(provider) if provider.strip() else normalize_provider(model)
        chosen: ActivationTTLSetting = providers[name] if name in providers else canonical["default"]
        return resolve_activation_ttl(chosen, provider, model, provider_options, option=option)
    if canonical is None or canonical is False:
        return None
    if canonical == "auto":
        return auto_activation_ttl(provider, model, provider_options)
    return parse_duration(canonical, option=option)
