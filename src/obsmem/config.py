"""Every option of observational memory, with the reference defaults, validated once.

Why a validated model instead of loose keyword arguments: a threshold that is off by a factor
(``buffer_tokens=6000`` with ``message_tokens=5000``) does not fail loudly, it quietly makes
memory never buffer or never activate. So every rule the reference enforces at construction is
enforced here, and every failure is a :class:`~obsmem.errors.ConfigError` that names the dotted
option (``observation.buffer_tokens``) and what it accepts. Pydantic's own ``ValidationError``
never escapes: a caller catches ``ConfigError`` (or ``ValueError``) and is done.

The models are frozen, so one config can be shared by the engine and background work without
anyone changing it underneath them; use :meth:`replace` to derive a new one, and
:meth:`MemoryConfig.snapshot` to store the options a record was created with.

Units: token counts are ``int``; durations (``activate_after_idle``) are seconds when given as
numbers, or strings with a unit (see :func:`obsmem.thresholds.parse_duration`).
"""

from __future__ import annotations

import difflib
import math
import re
import zoneinfo
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Self, TypeAlias, TypedDict, Unpack

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    SecretStr,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from obsmem.errors import ConfigError
from obsmem.profiles import ModelPrice
from obsmem.privacy import PII_CATEGORIES, ProviderRules, compile_pattern
from obsmem.thresholds import (
    ActivationTTLSetting,
    Threshold,
    TokenRange,
    check_activation_ttl,
    dynamic_threshold,
    resolve_activation_ratio,
    resolve_activation_ttl,
    resolve_block_after,
    resolve_buffer_tokens,
    resolve_retention_floor,
    round_half_up,
)

__all__ = [
    "KnowledgeConfig",
    "KnowledgeOptions",
    "MemoryConfig",
    "MemoryOptions",
    "ObservationConfig",
    "ObservationOptions",
    "PrivacyConfig",
    "PrivacyOptions",
    "ReflectionConfig",
    "ReflectionOptions",
    "RetrievalConfig",
    "RetrievalOptions",
]

#: What the ``activate_after_idle`` options hold after validation (see ``check_activation_ttl``).
#: Strict members tried left to right, because ``Literal[False]`` also matches ``0`` (``0 == False``).
_TTLField: TypeAlias = Annotated[
    StrictInt | StrictFloat | StrictStr | dict[str, Any] | Literal[False] | None,
    Field(union_mode="left_to_right"),
]


class _Unset:
    """Marks an option the caller did not give, where the default depends on other options."""

    def __repr__(self) -> str:
        return "<default>"


_UNSET: Any = _Unset()

_BLOCK_AFTER_DEFAULT = 1.2
_MIN_SHARED_REFLECTION_THRESHOLD = 1000
_TEMPERATURE_ALLOWED = "a number from 0 to 2"


# --------------------------------------------------------------------------------------------
# Value checks shared by the sections
# --------------------------------------------------------------------------------------------


def _describe(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def _number(value: object, option: str, allowed: str) -> int | float:
    """A finite int or float; ``bool`` is refused even though Python counts it as an int."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(option, f"expected a number, got {_describe(value)}", allowed=allowed)
    if not math.isfinite(value):
        raise ConfigError(option, f"{value!r} is not finite", allowed=allowed)
    return value


def _whole_number(value: object, option: str, allowed: str) -> int:
    number = _number(value, option, allowed)
    if isinstance(number, float):
        if not number.is_integer():
            raise ConfigError(option, f"{value!r} is not a whole number", allowed=allowed)
        return int(number)
    return number


def _positive_tokens(value: object, option: str) -> int:
    allowed = "a whole number of tokens > 0"
    tokens = _whole_number(value, option, allowed)
    if tokens <= 0:
        raise ConfigError(option, f"{tokens} is not > 0", allowed=allowed)
    return tokens


def _temperature(value: object, option: str) -> float:
    number = float(_number(value, option, _TEMPERATURE_ALLOWED))
    if not 0 <= number <= 2:
        raise ConfigError(option, f"{number} is out of range", allowed=_TEMPERATURE_ALLOWED)
    return number


#: The longest a failing role backs off (see ``failure_backoff``): 15 minutes.
MAX_FAILURE_BACKOFF_S = 900.0
_FAILURE_BACKOFF_ALLOWED = (
    "False (call the model at every due step), or the seconds of the first wait, "
    f"> 0 and <= {MAX_FAILURE_BACKOFF_S:g}"
)


def _failure_backoff(value: object, option: str) -> float | Literal[False]:
    if value is False:
        return False
    seconds = float(_number(value, option, _FAILURE_BACKOFF_ALLOWED))
    if not 0 < seconds <= MAX_FAILURE_BACKOFF_S:
        raise ConfigError(option, f"{seconds:g} is out of range", allowed=_FAILURE_BACKOFF_ALLOWED)
    return seconds


_MODEL_ALLOWED = (
    "'offline', a 'provider:model' string (e.g. 'openai:gpt-4o-mini'), or tiers by input size "
    "{max_input_tokens: 'provider:model'}"
)


def _model_spec(value: object, option: str) -> str | dict[int, str] | None:
    """A role's model as plain data: a spec string or tiers (reference §1.5 ``ModelByInputTokens``).

    Only the shape is checked here; whether the provider exists and its key is set is decided
    when ``Memory`` builds the model, so a config can be written (and snapshotted) anywhere.
    Tier keys may arrive as strings from a JSON snapshot and are turned back into integers.
    """
    if value is None:
        return None
    if isinstance(value, str):
        spec = value.strip()
        if spec != "offline" and (":" not in spec or spec.startswith(":") or spec.endswith(":")):
            raise ConfigError(option, f"{value!r} is not a model spec", allowed=_MODEL_ALLOWED)
        return spec
    if isinstance(value, Mapping) and value:
        tiers: dict[int, str] = {}
        for key, spec in value.items():
            bound = int(key) if isinstance(key, str) and key.strip().isdigit() else key
            tokens = _positive_tokens(bound, f"{option}[{key!r}]")
            checked = _model_spec(spec, f"{option}[{key!r}]") if isinstance(spec, str) else None
            if not isinstance(checked, str) or checked == "offline":
                raise ConfigError(
                    f"{option}[{key!r}]", f"{spec!r} is not a 'provider:model' string",
                    allowed="'provider:model'",
                )
            tiers[tokens] = checked
        return dict(sorted(tiers.items()))
    raise ConfigError(option, f"expected a model spec, got {_describe(value)}", allowed=_MODEL_ALLOWED)


def _ttl_field(value: object, option: str) -> Any:
    """Validate an idle-activation setting, keeping ``None`` and ``False`` exactly as given.

    They differ in ``observation``: ``None`` inherits the top-level setting, ``False`` is off.
    """
    if value is None or value is False:
        return value
    return check_activation_ttl(value, option=option)


def _block_after(value: object, option: str, *, depends_on: str, enabled: bool) -> int | float | None:
    """Shared shape rule for both ``block_after`` options (cross-field rules live elsewhere)."""
    allowed = "None, a multiplier in [1, 100) of the threshold, or an absolute token count >= 100"
    if value is _UNSET:
        return _BLOCK_AFTER_DEFAULT if enabled else None
    if value is None:
        return None
    if not enabled:
        raise ConfigError(
            option,
            f"{value!r} was given but {depends_on} is off, and block_after only applies to "
            "async buffering",
            allowed=f"leave it unset or None, or enable {depends_on}",
        )
    number = _number(value, option, allowed)
    if number < 1:
        raise ConfigError(option, f"{number!r} is below 1", allowed=allowed)
    return number


# --------------------------------------------------------------------------------------------
# Turning pydantic's errors into ConfigError
# --------------------------------------------------------------------------------------------


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _option_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted option under ``model``, relative to it (``observation.message_tokens``)."""
    paths: list[str] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        paths.append(path)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths.extend(_option_paths(annotation, f"{path}."))
    return paths


def _suggest(model: type[BaseModel], unknown: str) -> str | None:
    """The valid option the caller most likely meant (camelCase names from the reference work)."""
    wanted = _camel_to_snake(unknown)
    paths = _option_paths(model)
    if wanted in paths:
        return wanted
    by_leaf = [path for path in paths if path.rsplit(".", 1)[-1] == wanted]
    if by_leaf:
        return by_leaf[0]
    close = difflib.get_close_matches(wanted, paths, n=1, cutoff=0.6)
    if close:
        return close[0]
    leaves = {path.rsplit(".", 1)[-1]: path for path in paths}
    close = difflib.get_close_matches(wanted, list(leaves), n=1, cutoff=0.6)
    return leaves[close[0]] if close else None


#: What a plain type error accepts, keyed by the first word of pydantic's error type.
_ALLOWED_BY_ERROR_TYPE = {"bool": "True or False", "string": "a string"}


def _convert_error(model: type[_Options], error: Mapping[str, Any]) -> ConfigError:
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, ConfigError):
        return original

    parts = [model.SECTION] if model.SECTION else []
    current: type[BaseModel] | None = model
    loc = [item for item in error["loc"] if isinstance(item, str)]
    consumed = 0
    for item in loc:
        if current is None or item not in current.model_fields:
            break
        parts.append(item)
        consumed += 1
        annotation = current.model_fields[item].annotation
        current = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None

    if error["type"] == "extra_forbidden" and current is not None and consumed < len(loc):
        unknown = loc[consumed]
        option = ".".join([*parts, unknown])
        suggestion = _suggest(current, unknown)
        problem = "unknown option"
        if suggestion:
            problem += f"; did you mean '{'.'.join([*parts, suggestion])}'?"
        return ConfigError(option, problem, allowed=", ".join(current.model_fields))

    option = ".".join(parts) or model.__name__
    if isinstance(original, Exception):
        return ConfigError(option, str(original))
    if error["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return ConfigError(
            option,
            f"expected a mapping of options, got {_describe(error.get('input'))}",
            allowed=f"a dict of options, or an instance of {current.__name__ if current else 'the section'}",
        )
    message = str(error.get("msg", "invalid value"))
    allowed = _ALLOWED_BY_ERROR_TYPE.get(str(error["type"]).split("_", 1)[0])
    return ConfigError(
        option, f"{message[:1].lower()}{message[1:]}, got {_describe(error.get('input'))}", allowed=allowed
    )


def _config_error(model: type[_Options], exc: ValidationError) -> ConfigError:
    """The first problem as a ConfigError; any further problems ride along as notes."""
    converted = [_convert_error(model, error) for error in exc.errors()]
    first = converted[0]
    for other in converted[1:]:
        first.add_note(f"also: {other}")
    return first


class _Options(BaseModel):
    """Frozen, closed option models whose every failure is a ConfigError."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The dotted prefix of this model's options ("observation"); empty for the top level.
    SECTION: ClassVar[str] = ""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _config_error(type(self), exc) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _config_error(cls, exc) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise _config_error(cls, exc) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise ConfigError(
            self._option(name),
            "configs are immutable and cannot be assigned to",
            allowed=f"config.replace({name}=...) returns a changed copy",
        )

    @classmethod
    def _option(cls, name: str | None) -> str:
        return f"{cls.SECTION}.{name}" if cls.SECTION else str(name)

    def replace(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` applied.

        Only the options this config was explicitly given are carried over, so options whose
        default depends on others (``block_after``) are recomputed. A mapping given for a
        section (``observation={...}``) is merged into that section rather than replacing it.
        """
        data: dict[str, Any] = {name: getattr(self, name) for name in self.model_fields_set}
        for name, value in changes.items():
            current = getattr(self, name, None)
            if isinstance(current, _Options) and isinstance(value, Mapping):
                data[name] = current.replace(**value)
            else:
                data[name] = value
        return type(self)(**data)

    def _chosen(self) -> dict[str, Any]:
        """The options whose value is not their default; a section, when any of its are chosen,
        as a section of only those (a section dict could mean more: ``retrieval={...}`` enables)."""
        chosen: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if isinstance(value, _Options):
                inner = value._chosen()
                if inner:
                    chosen[name] = type(value)(**inner)
                continue
            default = field.get_default(call_default_factory=True)
            if type(value) is not type(default) or value != default:
                chosen[name] = value
        return chosen


class _RoleOptions(_Options):
    """Validators of the options the Observer and the Reflector share (how their model is
    called, idle activation). Each section declares the fields itself, so its own order (and
    defaults) decide which problem is reported first.

    How the model is called (reference §1.3–§1.5): ``model`` is a ``provider:model`` spec, or
    tiers ``{max_input_tokens: spec}`` chosen per request by input size; ``Memory(model=...)``
    overrides it, and a role without one uses the other role's (then the offline default).
    ``temperature`` is sent unless the model refuses one (reasoning models) or the model is
    tiered and the temperature was not set explicitly. ``max_output_tokens`` is sent only when
    set explicitly: the reference applies its 100,000 default only to its default model, and
    most providers reject a limit above the model's own ceiling.

    When the model keeps failing (an error after its retries, or degenerate output): after a
    second failure in a row the threshold paths (turns, buffers, workers) leave it alone for
    ``failure_backoff`` seconds, a wait that doubles with each further failure up to 15 minutes
    (``MAX_FAILURE_BACKOFF_S``); one failure costs no wait, and the first success clears it.
    The backoff is stored on the observation record, so every process sharing the store sees
    it; manual ``observe()`` / ``reflect()`` calls ignore it. ``False`` calls the model at every
    due step.
    """

    @field_validator("max_output_tokens", mode="before", check_fields=False)
    @classmethod
    def _check_output_tokens(cls, value: object, info: ValidationInfo) -> int:
        return _positive_tokens(value, cls._option(info.field_name))

    @field_validator("temperature", mode="before", check_fields=False)
    @classmethod
    def _check_temperature(cls, value: object, info: ValidationInfo) -> float:
        return _temperature(value, cls._option(info.field_name))

    @field_validator("activate_after_idle", mode="before", check_fields=False)
    @classmethod
    def _check_activate_after_idle(cls, value: object) -> Any:
        return _ttl_field(value, cls._option("activate_after_idle"))

    @field_validator("model", mode="before", check_fields=False)
    @classmethod
    def _check_model(cls, value: object) -> str | dict[int, str] | None:
        return _model_spec(value, cls._option("model"))

    @field_validator("failure_backoff", mode="before", check_fields=False)
    @classmethod
    def _check_failure_backoff(cls, value: object) -> float | Literal[False]:
        return _failure_backoff(value, cls._option("failure_backoff"))

    @field_validator("instruction", mode="before", check_fields=False)
    @classmethod
    def _check_instruction(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value


# --------------------------------------------------------------------------------------------
# observation.*
# --------------------------------------------------------------------------------------------


class ObservationConfig(_RoleOptions):
    """Options of the Observer: when raw messages become observations.

    ``message_tokens`` is the threshold on unobserved message tokens. With buffering on
    (``buffer_tokens`` not ``False``) the Observer runs in the background every
    ``buffer_tokens`` and the results are *activated* at the threshold, keeping about
    ``retention_floor`` tokens of raw messages; otherwise the Observer runs synchronously at
    the threshold.

    How its model is called: see :class:`_RoleOptions`.
    """

    SECTION: ClassVar[str] = "observation"

    message_tokens: int = 30_000
    buffer_tokens: StrictInt | StrictFloat | Literal[False] = Field(default=0.2, union_mode="left_to_right")
    buffer_activation: int | float = 0.8
    block_after: int | float | None = Field(default=_UNSET, validate_default=True)
    buffer_on_idle: StrictBool = False
    activate_after_idle: _TTLField = None
    activate_on_provider_change: StrictBool | None = None
    previous_observer_tokens: StrictInt | Literal[False] = Field(default=2000, union_mode="left_to_right")
    max_tokens_per_batch: int = 10_000
    model: str | dict[int, str] | None = None
    temperature: float = 0.3
    max_output_tokens: int = 100_000
    instruction: StrictStr | None = None
    continuation_hints: StrictBool = True
    thread_title: StrictBool = False
    manage_working_memory: StrictBool = False
    observe_attachments: bool | Literal["auto"] | tuple[str, ...] = ("image/*", "application/pdf")
    failure_backoff: StrictFloat | Literal[False] = Field(default=30.0, union_mode="left_to_right")

    @field_validator("message_tokens", "max_tokens_per_batch", mode="before")
    @classmethod
    def _check_positive_tokens(cls, value: object, info: ValidationInfo) -> int:
        return _positive_tokens(value, cls._option(info.field_name))


    @field_validator("buffer_tokens", mode="before")
    @classmethod
    def _check_buffer_tokens(cls, value: object) -> object:
        option = cls._option("buffer_tokens")
        allowed = "False (no async buffering), a fraction in (0, 1) of message_tokens, or a token count"
        if value is False:
            return False
        if value is None or value is True:
            raise ConfigError(
                option, f"{value!r} is not accepted; use False to turn buffering off", allowed=allowed
            )
        number = _number(value, option, allowed)
        if number >= 1:  # from 1 up it is a count of tokens, so it must be whole (1.5 is no size)
            return _whole_number(number, option, allowed)
        return number

    @field_validator("buffer_activation", mode="before")
    @classmethod
    def _check_buffer_activation(cls, value: object) -> int | float:
        option = cls._option("buffer_activation")
        allowed = "a ratio in (0, 1] of the threshold to remove, or >= 1000 tokens to keep"
        number = _number(value, option, allowed)
        if number <= 0:
            raise ConfigError(option, f"{number!r} is not > 0", allowed=allowed)
        if 1 < number < 1000:
            raise ConfigError(option, f"{number!r} is neither a ratio nor a token count", allowed=allowed)
        return number

    @field_validator("block_after", mode="before")
    @classmethod
    def _check_block_after(cls, value: object, info: ValidationInfo) -> int | float | None:
        enabled = info.data.get("buffer_tokens", 0.2) is not False
        return _block_after(
            value, cls._option("block_after"), depends_on="observation.buffer_tokens", enabled=enabled
        )


    @field_validator("previous_observer_tokens", mode="before")
    @classmethod
    def _check_previous_observer_tokens(cls, value: object) -> Literal[False] | int:
        option = cls._option("previous_observer_tokens")
        allowed = "False (no truncation) or a finite whole number >= 0 (0 omits them)"
        if value is False:
            return False
        tokens = _whole_number(value, option, allowed)
        if tokens < 0:
            raise ConfigError(option, f"{tokens} is negative", allowed=allowed)
        return tokens


    @field_validator("observe_attachments", mode="before")
    @classmethod
    def _check_observe_attachments(cls, value: object) -> bool | str | tuple[str, ...]:
        option = cls._option("observe_attachments")
        allowed = "True (all), False (none), 'auto', or a list of MIME patterns like 'image/*'"
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            if value.strip().lower() == "auto":
                return "auto"
            raise ConfigError(option, f"{value!r} must be inside a list", allowed=allowed)
        if not isinstance(value, list | tuple):
            raise ConfigError(option, f"expected a list, got {_describe(value)}", allowed=allowed)
        patterns: list[str] = []
        for item in value:
            pattern = item.strip().lower() if isinstance(item, str) else None
            if pattern is None or not re.fullmatch(r"\*|[a-z0-9!#$&^_.+-]+/(\*|[a-z0-9!#$&^_.+-]+)", pattern):
                raise ConfigError(option, f"{item!r} is not a MIME pattern", allowed=allowed)
            patterns.append(pattern)
        return tuple(patterns)

    @model_validator(mode="after")
    def _check_sizes(self) -> Self:
        threshold = self.message_tokens
        if self.buffer_tokens is not False:
            resolved = resolve_buffer_tokens(self.buffer_tokens, threshold)
            if resolved is None or not 0 < resolved < threshold:
                raise ConfigError(
                    self._option("buffer_tokens"),
                    f"{self.buffer_tokens!r} resolves to {resolved} tokens, which must be > 0 and "
                    f"< observation.message_tokens ({threshold})",
                    allowed="False, a fraction in (0, 1) of message_tokens, or 1 <= tokens < message_tokens",
                )
        if self.buffer_activation >= 1000 and self.buffer_activation >= threshold:
            raise ConfigError(
                self._option("buffer_activation"),
                f"an absolute retention of {self.buffer_activation!r} tokens must be < "
                f"observation.message_tokens ({threshold})",
                allowed="a ratio in (0, 1], or 1000 <= tokens < message_tokens",
            )
        if self.block_after is not None:
            resolved_block = resolve_block_after(self.block_after, threshold)
            if resolved_block is None or resolved_block < threshold:
                raise ConfigError(
                    self._option("block_after"),
                    f"{self.block_after!r} resolves to {resolved_block} tokens, below "
                    f"observation.message_tokens ({threshold})",
                    allowed="a multiplier in [1, 100) or an absolute count >= message_tokens",
                )
        if self.buffer_on_idle and self.buffer_tokens is False:
            raise ConfigError(
                self._option("buffer_on_idle"),
                "idle buffering needs async buffering, but observation.buffer_tokens is False",
                allowed="False, or enable observation.buffer_tokens",
            )
        return self

    @property
    def buffering_enabled(self) -> bool:
        """Whether observations are buffered in the background (and reflections may be)."""
        return self.buffer_tokens is not False

    @property
    def resolved_buffer_tokens(self) -> int | None:
        """The buffer interval in tokens, or ``None`` with buffering off."""
        return resolve_buffer_tokens(self.buffer_tokens, self.message_tokens)

    @property
    def resolved_block_after(self) -> int | None:
        """The token count past which activation may over-remove, or ``None``."""
        if not self.buffering_enabled:
            return None
        return resolve_block_after(self.block_after, self.message_tokens)

    @property
    def retention_floor(self) -> int:
        """Raw message tokens an activation or a threshold observation tries to leave unobserved.

        Applies with buffering off too, so the actor always keeps a recent tail verbatim. (The
        reference drops ``bufferActivation`` when buffering is off, and its synchronous cleanup
        then keeps no observed message.)
        """
        return resolve_retention_floor(self.buffer_activation, self.message_tokens)

    @property
    def activation_ratio(self) -> float:
        """Share of the threshold an activation removes, in [0, 1]."""
        return resolve_activation_ratio(self.buffer_activation, self.message_tokens)

    def forwards_attachment(self, media_type: str) -> bool:
        """Whether an LLM observer sends its model an attachment of ``media_type`` (after the
        transcript, which always shows its placeholder), by ``observe_attachments``.

        Patterns match case-insensitively: ``*`` anything, ``image/*`` any image, else the exact
        type. ``"auto"`` forwards everything: obsmem keeps no registry of which models read
        which files, and the reference forwards whatever its registry does not know.
        """
        setting = self.observe_attachments
        if isinstance(setting, bool):
            return setting
        if setting == "auto":
            return True
        wanted = media_type.strip().lower()
        family = wanted.split("/", 1)[0]
        return any(pattern in ("*", wanted, f"{family}/*") for pattern in setting)


# --------------------------------------------------------------------------------------------
# reflection.*
# --------------------------------------------------------------------------------------------


class ReflectionConfig(_RoleOptions):
    """Options of the Reflector: when active observations are condensed into a new generation.

    Reflection runs when active observation tokens reach ``observation_tokens``. With async
    reflection on (``buffer_activation`` set and observation buffering on) a background
    reflection starts at ``buffer_start_tokens`` and is swapped in at the threshold; past
    ``block_after`` a synchronous reflection runs if none could be swapped in.

    How its model is called: see :class:`_RoleOptions`.
    """

    SECTION: ClassVar[str] = "reflection"

    observation_tokens: int = 40_000
    buffer_activation: float | None = 0.5
    block_after: int | float | None = Field(default=_UNSET, validate_default=True)
    model: str | dict[int, str] | None = None
    temperature: float = 0.0
    max_output_tokens: int = 100_000
    instruction: StrictStr | None = None
    continuation_hints: StrictBool = True
    activate_after_idle: _TTLField = None
    activate_on_provider_change: StrictBool = False
    failure_backoff: StrictFloat | Literal[False] = Field(default=30.0, union_mode="left_to_right")

    @field_validator("observation_tokens", mode="before")
    @classmethod
    def _check_positive_tokens(cls, value: object, info: ValidationInfo) -> int:
        return _positive_tokens(value, cls._option(info.field_name))


    @field_validator("buffer_activation", mode="before")
    @classmethod
    def _check_buffer_activation(cls, value: object) -> float | None:
        option = cls._option("buffer_activation")
        allowed = "None (no async reflection) or a ratio in (0, 1]"
        if value is None:
            return None
        number = float(_number(value, option, allowed))
        if not 0 < number <= 1:
            raise ConfigError(option, f"{number!r} is out of range", allowed=allowed)
        return number

    @field_validator("block_after", mode="before")
    @classmethod
    def _check_block_after(cls, value: object, info: ValidationInfo) -> int | float | None:
        enabled = info.data.get("buffer_activation", 0.5) is not None
        return _block_after(
            value, cls._option("block_after"), depends_on="reflection.buffer_activation", enabled=enabled
        )


    @model_validator(mode="after")
    def _check_block_after_threshold(self) -> Self:
        resolved = self.resolved_block_after
        if resolved is not None and resolved < self.observation_tokens:
            raise ConfigError(
                self._option("block_after"),
                f"{self.block_after!r} resolves to {resolved} tokens, below "
                f"reflection.observation_tokens ({self.observation_tokens})",
                allowed="a multiplier in [1, 100) or an absolute count >= observation_tokens",
            )
        return self

    @property
    def buffer_start_tokens(self) -> int | None:
        """Observation tokens at which a background reflection starts, or ``None`` without one."""
        if self.buffer_activation is None:
            return None
        return round_half_up(self.observation_tokens * self.buffer_activation)

    @property
    def resolved_block_after(self) -> int | None:
        """Observation tokens past which a synchronous reflection runs, or ``None``."""
        return resolve_block_after(self.block_after, self.observation_tokens)


# --------------------------------------------------------------------------------------------
# retrieval.*
# --------------------------------------------------------------------------------------------


class RetrievalConfig(_Options):
    """Retrieval mode (reference §5.5): observations grouped with the messages they cover,
    and a ``recall`` tool that takes the actor from a group back to those exact messages.

    Off by default. ``MemoryConfig(retrieval=True)`` turns it on with these defaults; a dict
    (``retrieval={"scope": "resource"}``) turns it on too unless it says ``enabled: False``.

    ``scope`` bounds what recall may return: ``"thread"`` only the current thread's messages,
    ``"resource"`` any thread of the same resource (user). The default is ``"thread"`` (the
    reference defaults to resource), matching ``share_threads_in_resource=False``: one
    conversation never reads another unless the application says so. ``vector`` also embeds
    each group for ``mode="search"``; it needs ``Memory(embedder=..., vector_index=...)``.
    ``index_timeout_s`` (10 s) bounds indexing one committed change of the observations (an
    embeddings server that never answers cannot hold memory work; the groups it missed are left
    out of the index, logged). ``instructions`` are appended to the recall instructions the actor sees.
    """

    SECTION: ClassVar[str] = "retrieval"

    enabled: StrictBool = False
    scope: Literal["thread", "resource"] = "thread"
    vector: StrictBool = False
    index_timeout_s: float = Field(default=10.0, gt=0)
    instructions: StrictStr | None = None

    @field_validator("instructions", mode="before")
    @classmethod
    def _check_instructions(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value



class KnowledgeConfig(_Options):
    """The knowledge agents (capture, remind, curate, learn) and pins; used with
    ``Memory(knowledge=Knowledge...)`` only, and each on by default there (offline rules).

    ``trust``: what captured records start as (``"candidate"`` waits for review; remind shows
    verified records unless ``remind_candidates``; a turn waits at most ``remind_timeout_s``
    for pins and the reminder, then goes on without them). ``record_level`` / ``node_level``: where
    capture writes, each clamped to ``ceiling`` (the broadest scope a captured record may ever
    reach). ``remind_limit`` / ``remind_tokens`` bound the reminder; ``pins_tokens`` bounds the
    pinned block (what does not fit is named in it). Curation runs after every reflection and
    when ``curate_after_records`` records are uncurated or the oldest has waited
    ``curate_max_age_s`` (None: no age trigger); ``obsmem worker`` checks every
    ``curate_interval_s`` seconds while idle. ``model`` (a ``"provider:model"`` spec; None: the
    offline rules) runs the LLM agents, each tool loop bounded by ``max_steps`` model calls
    (curation by ``curate_max_steps``: its worklist can hold hundreds of records).
    """

    SECTION: ClassVar[str] = "knowledge"

    capture: StrictBool = True
    remind: StrictBool = True
    curate: StrictBool = True
    learn: StrictBool = True
    pins: StrictBool = True
    trust: Literal["candidate", "verified"] = "candidate"
    record_level: Literal["thread", "resource", "org"] = "thread"
    node_level: Literal["thread", "resource", "org"] = "resource"
    ceiling: Literal["thread", "resource", "org"] = "resource"
    capture_pinning: StrictBool = False
    remind_limit: int = Field(default=3, ge=1, le=20)
    remind_tokens: int = Field(default=300, ge=50)
    remind_candidates: StrictBool = False
    remind_timeout_s: float = Field(default=2.0, gt=0)
    pins_tokens: int = Field(default=400, ge=0)
    max_pins: int = Field(default=20, ge=1)
    curate_after_records: int = Field(default=20, ge=0)
    curate_max_age_s: float | None = Field(default=3600.0, gt=0)
    curate_interval_s: float = Field(default=60.0, gt=0)
    model: StrictStr | None = None
    max_steps: int = Field(default=5, ge=1, le=25)
    curate_max_steps: int = Field(default=50, ge=1, le=500)


class ModelPriceConfig(BaseModel):
    """One model's price for the cost ledger: USD per 1M tokens (``MemoryConfig.prices``).

    ``cached_input`` (a prompt-cache read) and ``cache_write`` default to ``input``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def price(self) -> ModelPrice:
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        return ModelPrice(self.input, cached, write, self.output)


class BudgetConfig(_Options):
    """A spending limit per resource for memory's model calls (off unless ``MemoryConfig(budget=...)``).

    ``max_cost_usd`` (estimated from the price table, :mod:`obsmem.profiles`, and
    ``MemoryConfig.prices``; calls of unpriced models count 0 USD) and/or ``max_tokens`` (input +
    output tokens of every recorded call) per resource per ``period``: ``"day"`` (the UTC day),
    ``"month"`` (the UTC calendar month) or ``"total"``. When a resource's sum reaches a limit,
    its observations and reflections use the offline observer/reflector until the period ends
    (event ``budget-exceeded``, once per resource and period); memory keeps working.

    The sum is read from the cost ledger at most once per ``check_interval_s`` seconds per
    resource (cached in between, and raised by the calls this process records meanwhile), so
    another process's calls are seen within that interval, and a burst may overshoot a limit
    by the calls already under way.
    """

    SECTION: ClassVar[str] = "budget"

    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    period: Literal["day", "month", "total"] = "day"
    check_interval_s: float = Field(default=30.0, ge=0)

    @model_validator(mode="after")
    def _check_limit(self) -> Self:
        if self.max_cost_usd is None and self.max_tokens is None:
            raise ConfigError("budget", "a budget needs max_cost_usd or max_tokens",
                              allowed="budget={'max_cost_usd': 5.0} or {'max_tokens': 2_000_000}")
        return self


class PrivacyOptions(TypedDict, total=False):
    """The keyword arguments of :class:`PrivacyConfig` (what each accepts before validation)."""

    redact_secrets: bool
    redact_pii: bool | Sequence[str]
    patterns: Sequence[tuple[str, str]] | Mapping[str, str]
    key: str | SecretStr | None
    providers: Mapping[str, Sequence[str]] | None
    strict: bool


class PrivacyConfig(_Options):
    """The privacy boundary before the memory models (off unless ``MemoryConfig(privacy=...)``).

    With it, every request obsmem's LLM observer and reflector send has its text redacted first
    (see :mod:`obsmem.privacy`): ``redact_secrets`` replaces API keys, tokens, private keys and
    passwords; ``redact_pii`` the PII categories named (``True``: all of
    :data:`obsmem.privacy.PII_CATEGORIES`); ``patterns`` adds ``(name, regex)`` pairs of your own.
    Each value becomes ``[REDACTED:<category>:<hmac>]``, keyed by ``key`` (not stored in snapshots;
    None: ``$OBSMEM_PRIVACY_KEY``, else a random key per process, so set it where the application
    and its workers must produce the same placeholders).

    ``providers`` is a per-scope allow-list ``{"resource:acme-*": ["offline"], "*": ["openai"]}``
    (keys ``thread:<glob>``, ``resource:<glob>`` or ``*``; every matching rule must allow the
    provider; a scope no rule matches allows no hosted provider). A request for a scope whose
    model is not allowed goes to the offline observer/reflector instead, or, with ``strict``,
    fails with :class:`~obsmem.errors.PrivacyError`. The offline rules run in process and see
    unredacted text.
    """

    SECTION: ClassVar[str] = "privacy"

    redact_secrets: StrictBool = True
    redact_pii: tuple[str, ...] = ()
    patterns: tuple[tuple[str, str], ...] = ()
    key: SecretStr | None = Field(default=None, exclude=True)
    providers: dict[str, tuple[str, ...]] | None = None
    strict: StrictBool = False

    def __init__(self, /, **options: Unpack[PrivacyOptions]) -> None:
        super().__init__(**options)

    @field_validator("redact_pii", mode="before")
    @classmethod
    def _check_redact_pii(cls, value: object) -> object:
        allowed = f"True, False, or a list of {', '.join(PII_CATEGORIES)}"
        if value is True:
            return PII_CATEGORIES
        if value is False or value is None:
            return ()
        if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
            raise ConfigError("privacy.redact_pii", f"expected a list of categories, got {_describe(value)}",
                              allowed=allowed)
        chosen: list[str] = []
        for category in value:
            if not isinstance(category, str) or category not in PII_CATEGORIES:
                raise ConfigError("privacy.redact_pii", f"unknown PII category {category!r}", allowed=allowed)
            if category not in chosen:
                chosen.append(category)
        return tuple(category for category in PII_CATEGORIES if category in chosen)

    @field_validator("patterns", mode="before")
    @classmethod
    def _check_patterns(cls, value: object) -> object:
        pairs: list[tuple[object, object]]
        if isinstance(value, Mapping):
            pairs = list(value.items())
        elif isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise ConfigError("privacy.patterns", f"expected (name, regex) pairs, got {_describe(value)}",
                              allowed="a list of (name, regex) pairs, or a dict {name: regex}")
        else:
            pairs = []
            for pair in value:
                if isinstance(pair, str | bytes) or not isinstance(pair, Sequence) or len(pair) != 2:
                    raise ConfigError("privacy.patterns", f"expected a (name, regex) pair, got {_describe(pair)}",
                                      allowed="a list of (name, regex) pairs, or a dict {name: regex}")
                pairs.append((pair[0], pair[1]))
        names: set[object] = set()
        for name, regex in pairs:
            compile_pattern(name, regex)
            if name in names:
                raise ConfigError("privacy.patterns", f"two patterns are named {name!r}", allowed="unique names")
            names.add(name)
        return tuple(pairs)

    @field_validator("key", mode="before")
    @classmethod
    def _check_key(cls, value: object) -> object:
        secret = value.get_secret_value() if isinstance(value, SecretStr) else value
        if value is not None and (not isinstance(secret, str) or not secret):
            raise ConfigError("privacy.key", "the redaction key must be a non-empty string",
                              allowed="a secret string (or None: $OBSMEM_PRIVACY_KEY, else random per process)")
        return value

    @field_validator("providers", mode="before")
    @classmethod
    def _check_providers(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ConfigError("privacy.providers", f"expected a mapping, got {_describe(value)}",
                              allowed="{'resource:<glob>' | 'thread:<glob>' | '*': ['openai', ...]}")
        return dict(ProviderRules.parse(value).rules)

    @property
    def provider_rules(self) -> ProviderRules | None:
        """The allow-list, or None when every provider may see every scope."""
        return None if self.providers is None else ProviderRules(tuple(self.providers.items()))

    def _chosen(self) -> dict[str, Any]:
        # The section is on by being there: a snapshot keeps it even when every option is default.
        return {"redact_secrets": self.redact_secrets, **super()._chosen()}


def _retrieval_field(value: object) -> object:
    """``True``/``False`` switch retrieval on/off; a mapping without ``enabled`` switches it on."""
    if isinstance(value, bool):
        return RetrievalConfig(enabled=value)
    if isinstance(value, Mapping) and "enabled" not in value:
        return {"enabled": True, **value}
    return value


# --------------------------------------------------------------------------------------------
# The whole configuration
# --------------------------------------------------------------------------------------------


# --- generated keyword forms: do not edit; run `python tests/config/options_codegen.py` ---


class ObservationOptions(TypedDict, total=False):
    """The keyword form of :class:`ObservationConfig`, so a dict section is type-checked too."""

    message_tokens: int
    buffer_tokens: int | float | Literal[False]
    buffer_activation: int | float
    block_after: int | float | None
    buffer_on_idle: bool
    activate_after_idle: ActivationTTLSetting
    activate_on_provider_change: bool | None
    previous_observer_tokens: int | Literal[False]
    max_tokens_per_batch: int
    model: str | Mapping[int, str] | None
    temperature: float
    max_output_tokens: int
    instruction: str | None
    continuation_hints: bool
    thread_title: bool
    manage_working_memory: bool
    observe_attachments: bool | Literal["auto"] | Sequence[str]
    failure_backoff: float | Literal[False]


class ReflectionOptions(TypedDict, total=False):
    """The keyword form of :class:`ReflectionConfig`, so a dict section is type-checked too."""

    observation_tokens: int
    buffer_activation: float | None
    block_after: int | float | None
    model: str | Mapping[int, str] | None
    temperature: float
    max_output_tokens: int
    instruction: str | None
    continuation_hints: bool
    activate_after_idle: ActivationTTLSetting
    activate_on_provider_change: bool
    failure_backoff: float | Literal[False]


class RetrievalOptions(TypedDict, total=False):
    """The keyword form of :class:`RetrievalConfig`, so a dict section is type-checked too."""

    enabled: bool
    scope: Literal["thread", "resource"]
    vector: bool
    index_timeout_s: float
    instructions: str | None


class KnowledgeOptions(TypedDict, total=False):
    """The keyword form of :class:`KnowledgeConfig`, so a dict section is type-checked too."""

    capture: bool
    remind: bool
    curate: bool
    learn: bool
    pins: bool
    trust: Literal["candidate", "verified"]
    record_level: Literal["thread", "resource", "org"]
    node_level: Literal["thread", "resource", "org"]
    ceiling: Literal["thread", "resource", "org"]
    capture_pinning: bool
    remind_limit: int
    remind_tokens: int
    remind_candidates: bool
    remind_timeout_s: float
    pins_tokens: int
    max_pins: int
    curate_after_records: int
    curate_max_age_s: float | None
    curate_interval_s: float
    model: str | None
    max_steps: int
    curate_max_steps: int


class MemoryOptions(TypedDict, total=False):
    """The keyword arguments of :class:`MemoryConfig`."""

    scope: Literal["thread", "resource"]
    share_token_budget: bool
    temporal_markers: bool
    activate_after_idle: ActivationTTLSetting
    activate_on_provider_change: bool
    share_threads_in_resource: bool
    timezone: str | None
    observation: ObservationConfig | ObservationOptions
    reflection: ReflectionConfig | ReflectionOptions
    retrieval: bool | RetrievalConfig | RetrievalOptions
    knowledge: KnowledgeConfig | KnowledgeOptions
    privacy: PrivacyConfig | None
    prices: Mapping[str, ModelPriceConfig]
    budget: BudgetConfig | None


# --- end of the generated keyword forms ---


class MemoryConfig(_Options):
    """All options of observational memory.

    Build it with keyword arguments; sections accept dicts::

        MemoryConfig(scope="resource", observation={"message_tokens": 20_000})

    Idle activation (``activate_after_idle``) and ``activate_on_provider_change`` set here are
    inherited by ``observation`` unless it sets its own (``False`` there turns inheritance
    off); ``reflection`` never inherits them.

    The cost ledger (``Memory.usage``, ``obsmem usage``): ``prices`` adds or overrides model
    prices, ``{"openai:gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached_input": 0.075}}``
    (USD per 1M tokens; a key is a model id, its bare name, or a prefix of the bare name, see
    :func:`obsmem.profiles.model_price`); the built-in table is an estimate as of
    :data:`obsmem.profiles.PRICES_AS_OF`. ``budget`` (a :class:`BudgetConfig`; None: no limit)
    degrades a resource's memory work to the offline roles once it spent its budget.
    """

    scope: Literal["thread", "resource"] = "thread"
    share_token_budget: StrictBool = False
    temporal_markers: StrictBool = False
    activate_after_idle: _TTLField = None
    activate_on_provider_change: StrictBool = False
    share_threads_in_resource: StrictBool = False
    timezone: StrictStr | None = None
    observation: ObservationConfig = Field(default_factory=ObservationConfig)
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    knowledge: KnowledgeConfig = Field(default_factory=KnowledgeConfig)
    privacy: PrivacyConfig | None = None
    prices: dict[str, ModelPriceConfig] = Field(default_factory=dict)
    budget: BudgetConfig | None = None

    def __init__(self, /, **options: Unpack[MemoryOptions]) -> None:
        # Declared so that type checkers accept a dict for a section (``observation={...}``).
        super().__init__(**options)

    @field_validator("activate_after_idle", mode="before")
    @classmethod
    def _check_activate_after_idle(cls, value: object) -> Any:
        return _ttl_field(value, "activate_after_idle")

    @field_validator("retrieval", mode="before")
    @classmethod
    def _check_retrieval(cls, value: object) -> object:
        return _retrieval_field(value)

    @field_validator("timezone", mode="before")
    @classmethod
    def _check_timezone(cls, value: object) -> object:
        if value is None or not isinstance(value, str):
            return value
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(
                "timezone",
                f"{value!r} is not a known IANA time zone",
                allowed="None (the system's zone) or a name such as 'Europe/Paris' or 'UTC'",
            ) from exc
        return value

    @model_validator(mode="after")
    def _check_share_token_budget(self) -> Self:
        if self.share_token_budget and self.observation.buffering_enabled:
            raise ConfigError(
                "share_token_budget",
                "a shared token budget cannot be combined with async buffering, which is on "
                "(observation.buffer_tokens is not False). Either set "
                "observation.buffer_tokens=False to keep the shared budget, or set "
                "share_token_budget=False to keep buffering",
                allowed="False, or True together with observation.buffer_tokens=False",
            )
        return self

    def price_overrides(self) -> dict[str, ModelPrice]:
        """``prices`` as :class:`~obsmem.profiles.ModelPrice` values, for the cost estimates."""
        return {model: price.price() for model, price in self.prices.items()}

    # ---- thresholds ------------------------------------------------------------------------

    @property
    def message_threshold(self) -> Threshold:
        """The configured message threshold: a number, or a range under a shared budget."""
        base = self.observation.message_tokens
        if self.share_token_budget:
            return TokenRange(min=base, max=base + self.reflection.observation_tokens)
        return base

    def effective_message_threshold(self, observation_tokens: int) -> int:
        """The message threshold in force while ``observation_tokens`` are active.

        Fixed without a shared budget; with one, messages may use whatever the observations
        leave of ``message_tokens + observation_tokens``, but never less than ``message_tokens``.
        """
        return dynamic_threshold(self.message_threshold, observation_tokens)

    def effective_reflection_threshold(self, message_threshold: int | None = None) -> int:
        """The observation-token threshold to report for reflection.

        Without a shared budget this is ``reflection.observation_tokens``. With one it is what
        the message threshold leaves of the total, but at least 1000:
        ``max(total − message_threshold, 1000)``. Pass the current (dynamic) message threshold
        to get the reference's status figure; without it the base ``message_tokens`` is used.
        """
        if not self.share_token_budget:
            return self.reflection.observation_tokens
        total = self.observation.message_tokens + self.reflection.observation_tokens
        used = self.observation.message_tokens if message_threshold is None else message_threshold
        return max(total - used, _MIN_SHARED_REFLECTION_THRESHOLD)

    @property
    def reflection_buffering_enabled(self) -> bool:
        """Background reflection needs observation buffering and a reflection buffer ratio."""
        return self.observation.buffering_enabled and self.reflection.buffer_activation is not None

    @property
    def reflection_block_after(self) -> int | None:
        """``reflection.resolved_block_after`` when async reflection is on, else ``None``."""
        return self.reflection.resolved_block_after if self.reflection_buffering_enabled else None

    # ---- idle and provider-change activation ----------------------------------------------

    @property
    def observation_activate_after_idle(self) -> ActivationTTLSetting:
        """The idle setting for observations after inheritance; ``None`` means off."""
        own = self.observation.activate_after_idle
        if own is None:
            return self.activate_after_idle if self.activate_after_idle is not False else None
        return None if own is False else own

    @property
    def observation_activate_on_provider_change(self) -> bool:
        """Whether a provider change activates buffered observations, after inheritance."""
        own = self.observation.activate_on_provider_change
        return self.activate_on_provider_change if own is None else own

    def observation_activation_ttl(
        self, provider: str, model: str, provider_options: Mapping[str, Any] | None = None
    ) -> float | None:
        """Seconds of idleness after which buffered observations activate, for this actor."""
        return resolve_activation_ttl(
            self.observation_activate_after_idle, provider, model, provider_options
        )

    def reflection_activation_ttl(
        self, provider: str, model: str, provider_options: Mapping[str, Any] | None = None
    ) -> float | None:
        """Seconds of idleness after which a buffered reflection activates (never inherited)."""
        setting = self.reflection.activate_after_idle
        return resolve_activation_ttl(
            None if setting is False else setting,
            provider,
            model,
            provider_options,
            option="reflection.activate_after_idle",
        )

    # ---- persistence -----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """All options as JSON-compatible data; ``MemoryConfig.from_snapshot`` reads it back."""
        return self.model_dump(mode="json")

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild a config from :meth:`snapshot` output (validated like any other input).

        A snapshot holds every option's value, so which ones the caller chose is lost; a value
        equal to its default is read back as the default. Options whose effect depends on being
        chosen (a role's ``max_output_tokens``, a tiered role's ``temperature``) then behave in a
        worker reading the snapshot as they did for the application that wrote it.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(
                "snapshot", f"a snapshot is a mapping of options, got {_describe(data)}",
                allowed=f"the output of {cls.__name__}.snapshot()",
            )
        validated = cls.model_validate(dict(data))
        return cls(**validated._chosen())
