"""Role assembly: from a configuration and model choices to the engine's roles.

``Memory`` and the ``Worker`` both build their Observer, Reflector, reflection start level and
extractors here, so a worker process sends exactly the model requests the application would
have sent from the same config: the same model per role (tiers included), the same temperature
and output limit, the same attachments, the same working-memory mode, the same extractor checks.

What a role gets (reference §1.3–§1.5, documented once on ``config._RoleOptions``):

* Its model, by precedence: the shared ``model``, the role's own argument, ``config.<role>.model``,
  the other role's configured model, then ``"offline"`` (the deterministic rules). A model is a
  :class:`~obsmem.models.base.ChatModel`, a ``"provider:model"`` string, or tiers
  ``{max_input_tokens: model}``; an object implementing the role's protocol is used as given.
* Its request settings: the configured temperature, except for a tiered model whose temperature
  was not chosen; ``max_output_tokens`` only when chosen (the 100,000 default is the reference's
  for its own default model; real providers refuse a limit above the model's ceiling).
* The reflector's start level on the compression ladder: from the model (the largest tier's,
  since reflection inputs are large); 1 for the offline and custom reflectors.
* Working memory (``observation.manage_working_memory``): an inline extractor for an LLM observer,
  which writes it in its output, and the deterministic hook for any other observer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from obsmem.clock import Clock
from obsmem.config import MemoryConfig, MemoryOptions, ObservationConfig, ReflectionConfig
from obsmem.errors import ConfigError
from obsmem.models.base import ChatModel
from obsmem.models.tiers import ModelByInputTokens
from obsmem.om.extractors import Extractor, working_memory_extractor
from obsmem.om.llm.observer import LLMObserver
from obsmem.om.llm.reflector import LLMReflector, compression_start_level
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.protocols import ObservationRequest, Observer, Reflector
from obsmem.tokens import TokenCounter
from obsmem.types import FilePart, Message

__all__ = ["ModelSpec", "Roles", "assemble_roles", "memory_config", "request_settings"]

ModelSpec = ChatModel | str | Mapping[int, ChatModel | str] | None
"""A model as ``Memory`` and the worker take it: an object, ``"offline"``, ``"provider:model"``,
or tiers by input size."""


@dataclass(frozen=True, slots=True)
class Roles:
    """What the engine is given besides its store and config."""

    observer: Observer
    reflector: Reflector
    reflector_start_level: int
    extractors: tuple[Extractor, ...]


def memory_config(config: MemoryConfig | MemoryOptions | Mapping[str, Any] | None) -> MemoryConfig:
    """A validated config from a :class:`MemoryConfig`, a plain dict of its options, or None.

    A dict is validated like keyword arguments: a mistake raises ConfigError naming the dotted
    option (``observation.message_tokens``).
    """
    if config is None:
        return MemoryConfig()
    if isinstance(config, MemoryConfig):
        return config
    if isinstance(config, Mapping):
        return MemoryConfig.model_validate(dict(config))
    raise ConfigError(
        "config",
        f"expected a MemoryConfig or a dict of options, got {type(config).__name__}",
        allowed="MemoryConfig(...) or a dict such as {'observation': {'message_tokens': 20000}}",
    )


def assemble_roles(
    config: MemoryConfig,
    *,
    model: ModelSpec = None,
    observer: Observer | ModelSpec = None,
    reflector: Reflector | ModelSpec = None,
    extractors: Sequence[Extractor] = (),
    counter: TokenCounter,
    clock: Clock,
) -> Roles:
    """The observer, reflector, reflection start level and extractors for ``config``.

    ``model`` sets both roles; ``observer`` / ``reflector`` set one each (not together with
    ``model``). Unset roles follow the config (see the module docstring). ``extractors`` are
    the application's own; the working-memory extractor is added when the config asks for it,
    and all of them are checked (valid, unique slugs).
    """
    if model is not None and (observer is not None or reflector is not None):
        raise ConfigError(
            "model",
            "set either model (for both roles) or observer/reflector, not both",
            allowed="model=... or observer=...,reflector=...",
        )
    observer_spec, reflector_spec = _role_specs(config, model, observer, reflector)
    built_observer = _observer(observer_spec, config.observation, counter, clock)
    built_reflector, start_level = _reflector(reflector_spec, config.reflection, counter, clock)
    all_extractors = list(extractors)
    if config.observation.manage_working_memory:
        inline = isinstance(built_observer, LLMObserver)
        all_extractors.append(working_memory_extractor("inline" if inline else "hook"))
    _check_extractors(all_extractors)
    return Roles(built_observer, built_reflector, start_level, tuple(all_extractors))


def request_settings(
    role: ObservationConfig | ReflectionConfig, model: ChatModel
) -> tuple[float | None, int | None]:
    """The temperature and output limit a role's requests carry (None: not sent)."""
    chosen = role.model_fields_set
    temperature: float | None = role.temperature
    if isinstance(model, ModelByInputTokens) and "temperature" not in chosen:
        temperature = None  # tiers may mix models that refuse one; the reference sends none
    limit = role.max_output_tokens if "max_output_tokens" in chosen else None
    return temperature, limit


def _role_specs(
    config: MemoryConfig, model: ModelSpec, observer: Observer | ModelSpec, reflector: Reflector | ModelSpec
) -> tuple[Observer | ModelSpec, Reflector | ModelSpec]:
    if model is not None:
        return model, model
    configured_observer = config.observation.model
    configured_reflector = config.reflection.model
    if observer is None:
        observer = configured_observer if configured_observer is not None else configured_reflector
    if reflector is None:
        reflector = configured_reflector if configured_reflector is not None else configured_observer
    return observer, reflector


def _chat_model(spec: ChatModel | str | Mapping[int, ChatModel | str], counter: TokenCounter) -> ChatModel:
    if isinstance(spec, Mapping):
        return ModelByInputTokens(spec, count_messages=counter.count_messages)
    from obsmem.models.registry import infer_model  # providers load only for a spec string

    return infer_model(spec)


def _observer(
    spec: Observer | ModelSpec, role: ObservationConfig, counter: TokenCounter, clock: Clock
) -> Observer:
    if spec is None or spec == "offline":
        return OfflineObserver(count_tokens=counter.count_text)
    if not isinstance(spec, str | Mapping | ChatModel):
        return spec
    chat = _chat_model(spec, counter)
    temperature, limit = request_settings(role, chat)
    return _AttachmentFilteringObserver(
        chat,
        role,
        count_tokens=counter.count_text,
        clock=clock,
        temperature=temperature,
        max_output_tokens=limit,
    )


def _reflector(
    spec: Reflector | ModelSpec, role: ReflectionConfig, counter: TokenCounter, clock: Clock
) -> tuple[Reflector, int]:
    if spec is None or spec == "offline":
        return OfflineReflector(count_tokens=counter.count_text), 1
    if not isinstance(spec, str | Mapping | ChatModel):
        return spec, 1
    chat = _chat_model(spec, counter)
    temperature, limit = request_settings(role, chat)
    reflector = LLMReflector(
        chat, count_tokens=counter.count_text, temperature=temperature, max_output_tokens=limit, clock=clock
    )
    named = chat.tiers[-1][1] if isinstance(chat, ModelByInputTokens) else chat
    return reflector, compression_start_level(named.name)


def _check_extractors(extractors: Sequence[Extractor]) -> None:
    seen: set[str] = set()
    for extractor in extractors:
        extractor.validate()
        if extractor.slug in seen:
            raise ConfigError(
                "observation.extract",
                f"two extractors share the slug '{extractor.slug}'",
                allowed="unique extractor names",
            )
        seen.add(extractor.slug)


class _AttachmentFilteringObserver(LLMObserver):
    """An LLM observer that forwards only the attachments ``observation.observe_attachments``
    allows (``LLMObserver`` itself forwards all or none)."""

    def __init__(
        self,
        model: ChatModel,
        role: ObservationConfig,
        *,
        count_tokens: Callable[[str], int],
        clock: Clock,
        temperature: float | None,
        max_output_tokens: int | None,
    ) -> None:
        super().__init__(
            model,
            count_tokens=count_tokens,
            temperature=temperature,
            max_output_tokens=max_output_tokens,
            clock=clock,
            observe_attachments=role.observe_attachments is not False,
        )
        self._forwards = role.forwards_attachment

    def _allowed(self, part: FilePart) -> bool:
        # An image sent under a generic type (a .png as application/octet-stream) is an image.
        return self._forwards(part.media_type) or (part.is_image and self._forwards("image/*"))

    def build_messages(self, request: ObservationRequest) -> list[Message] | None:
        messages = super().build_messages(request)
        if messages is None:
            return None
        *head, user = messages
        parts = tuple(part for part in user.parts if not isinstance(part, FilePart) or self._allowed(part))
        return [*head, user.model_copy(update={"parts": parts})]
