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
* The privacy boundary (``config.privacy``, off by default): each LLM role's model is wrapped in a
  :class:`~obsmem.models.redacting.RedactingModel` (tiers included: the wrapper sits around them),
  so no request reaches a model unredacted; and each request is checked against the provider
  allow-list for its scope (the thread and resource ids of its messages, or those the request
  carries): a forbidden one goes to the offline role instead (event ``privacy-fallback``) or,
  with ``privacy.strict``, raises :class:`~obsmem.errors.PrivacyError`. Each model request that
  had anything redacted is reported as an event ``redaction`` with ``data = {"role", "model",
  "counts": {category: n}}``. The offline roles run in process and see the text unredacted; an
  Observer / Reflector object given by the application is used as given.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import os
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from obsmem import telemetry
from obsmem.calls import ModelCall, call_scope, current_scope
from obsmem.clock import Clock
from obsmem.config import MemoryConfig, MemoryOptions, ObservationConfig, PrivacyConfig, ReflectionConfig
from obsmem.implements import implements
from obsmem.errors import ConfigError, PrivacyError, ThreadNotFoundError
from obsmem.models.base import ChatModel, ModelRequest, ModelResponse
from obsmem.models.metered import metered
from obsmem.models.redacting import OFFLOAD_CHARS as REDACT_OFFLOAD_CHARS
from obsmem.models.redacting import RedactingModel
from obsmem.models.retry import RetryPolicy, assert_complete, with_retry
from obsmem.models.tiers import ModelByInputTokens
from obsmem.om.extractors import Extractor, working_memory_extractor
from obsmem.om.markers import find_markers
from obsmem.om.llm.observer import LLMObserver
from obsmem.om.llm.reflector import LLMReflector, compression_start_level
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.outcomes import EngineEvent
from obsmem.om.sections import join_sections, split_sections
from obsmem.om.protocols import (
    ObservationRequest,
    ObservationResult,
    Observer,
    ReflectionRequest,
    ReflectionResult,
    Reflector,
)
from obsmem.privacy import ProviderRules, Redactor, provider_of
from obsmem.tokens import TokenCounter
from obsmem.storage.contract import Store
from obsmem.storage.ledger import LedgerBudget

if TYPE_CHECKING:  # the knowledge package (and numpy) loads only when knowledge is used
    from obsmem.knowledge.agents import AgentRun, AgentSettings, KnowledgeAgents
    from obsmem.knowledge.store.scopes import Scope as KnowledgeScope
from obsmem.types import FilePart, Message, Thread, describe_value

__all__ = [
    "KnowledgeHook",
    "forget_kept_in_process",
    "ModelSpec",
    "Roles",
    "WorkingMemoryScope",
    "assemble_roles",
    "check_collaborators",
    "knowledge_hosted_for",
    "knowledge_model",
    "knowledge_settings",
    "memory_config",
    "observation_deltas",
    "request_settings",
]

logger = logging.getLogger("obsmem")

WorkingMemoryScope = Literal["thread", "resource"]

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
    #: With ``config.privacy``: text bound for the knowledge store, redacted (same placeholders as
    #: the roles' requests), and a model wrapped in the same boundary for another role.
    redact: Callable[[str], str] | None = None
    guard: Callable[[ChatModel, str], ChatModel] | None = None
    #: With ``config.privacy``: whether a model may see a (thread, resource)'s text (the allow-list).
    allows: Callable[[ChatModel, str | None, str | None], bool] | None = None
    #: With ``config.privacy``: an embedder behind the same boundary (:func:`guard_embedder`).
    guard_embedder: Callable[[Any], Any] | None = None
    #: Where the models built here report their calls (the cost ledger), and the budget that
    #: sends a resource's observations and reflections to the offline roles once it is spent.
    sinks: tuple[Callable[[ModelCall], None], ...] = ()
    budget: LedgerBudget | None = None


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
        unnamed = [key for key in config if not isinstance(key, str)]
        if unnamed:
            raise ConfigError(
                "config", f"option names are strings, got {describe_value(unnamed[0])}",
                allowed="a dict such as {'observation': {'message_tokens': 20000}}",
            )
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
    retry: RetryPolicy | None = None,
    on_event: Callable[[EngineEvent], None] | None = None,
    sinks: tuple[Callable[[ModelCall], None], ...] = (),
    budget: LedgerBudget | None = None,
) -> Roles:
    """The observer, reflector, reflection start level and extractors for ``config``.

    ``model`` sets both roles; ``observer`` / ``reflector`` set one each (not together with
    ``model``). Unset roles follow the config (see the module docstring). ``extractors`` are
    the application's own; the working-memory extractor is added when the config asks for it,
    and all of them are checked (valid, unique slugs). ``retry`` is how the LLM roles built
    here retry transient model errors (None: :class:`RetryPolicy`'s defaults); roles given as
    Observer / Reflector objects keep their own. ``on_event`` hears the privacy boundary's
    ``redaction`` and ``privacy-fallback`` events (pass the engine's listener).

    Every model built here is metered (:mod:`obsmem.models.metered`): each call is reported to
    ``sinks`` (the cost ledger) and to the process-wide listeners, with the role and the
    request's thread and resource as its scope. With ``budget``, a request for a resource that
    has spent its budget goes to the offline role instead (event ``budget-exceeded``, once per
    resource and period).
    """
    if model is not None and (observer is not None or reflector is not None):
        raise ConfigError(
            "model",
            "set either model (for both roles) or observer/reflector, not both",
            allowed="model=... or observer=...,reflector=...",
        )
    (observer_spec, observer_from), (reflector_spec, reflector_from) = _role_specs(
        config, model, observer, reflector
    )
    boundary = _Boundary(config.privacy, counter, on_event) if config.privacy is not None else None
    routes = _Routes(boundary, budget, on_event, sinks)
    built_observer = _observer(observer_spec, observer_from, config.observation, counter, clock, retry, routes)
    built_reflector, start_level = _reflector(
        reflector_spec, reflector_from, config.reflection, counter, clock, retry, routes
    )
    if isinstance(extractors, str | bytes | Mapping) or not isinstance(extractors, Iterable):
        raise ConfigError("extractors", f"expected a list of Extractor, got {describe_value(extractors)}",
                          allowed="a list of obsmem.Extractor")
    all_extractors = list(extractors)
    for extractor in all_extractors:
        if not isinstance(extractor, Extractor):
            raise ConfigError("extractors", f"expected Extractor objects, got {describe_value(extractor)}",
                              allowed="a list of obsmem.Extractor")
    if config.observation.manage_working_memory:
        inline = isinstance(built_observer, LLMObserver | _RoutedObserver)
        all_extractors.append(working_memory_extractor("inline" if inline else "hook"))
    _check_extractors(all_extractors)
    if boundary is None:
        return Roles(built_observer, built_reflector, start_level, tuple(all_extractors), sinks=sinks, budget=budget)
    return Roles(
        built_observer, built_reflector, start_level, tuple(all_extractors),
        redact=boundary.redact_for_knowledge, guard=boundary.wrap, sinks=sinks, budget=budget,
        guard_embedder=lambda embedder: guard_embedder(embedder, boundary),
        allows=lambda chat, thread_id, resource_id: boundary.forbidden(chat, [(thread_id, resource_id)]) is None,
    )


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


def _role_allowed(protocol: str) -> str:
    return (
        "'offline', a 'provider:model' string, a ChatModel, tiers {max_input_tokens: model}, or an "
        f"object implementing the {protocol} protocol"
    )


def _role_specs(
    config: MemoryConfig, model: ModelSpec, observer: Observer | ModelSpec, reflector: Reflector | ModelSpec
) -> tuple[tuple[Observer | ModelSpec, str], tuple[Reflector | ModelSpec, str]]:
    """Each role's spec, with the argument (or option) it came from, to name it in errors."""
    if model is not None:
        return (model, "model"), (model, "model")
    configured_observer = config.observation.model
    configured_reflector = config.reflection.model
    observer_from = reflector_from = ""
    if observer is None:
        observer_from = "observation.model" if configured_observer is not None else "reflection.model"
        observer = configured_observer if configured_observer is not None else configured_reflector
    if reflector is None:
        reflector_from = "reflection.model" if configured_reflector is not None else "observation.model"
        reflector = configured_reflector if configured_reflector is not None else configured_observer
    return (observer, observer_from or "observer"), (reflector, reflector_from or "reflector")


def _chat_model(
    spec: ChatModel | str | Mapping[Any, Any], argument: str, protocol: str, counter: TokenCounter
) -> ChatModel:
    """The model a spec names; a mistake is a ConfigError naming ``argument``."""
    allowed = _role_allowed(protocol)
    if isinstance(spec, Mapping):
        for bound, tier in spec.items():
            if not (isinstance(tier, str) or implements(tier, ChatModel)):
                raise ConfigError(
                    f"{argument}[{bound!r}]", f"expected a model, got {describe_value(tier)}", allowed=allowed
                )
    if not isinstance(spec, str | Mapping):
        return spec
    try:
        if isinstance(spec, Mapping):
            return ModelByInputTokens(spec, count_messages=counter.count_messages)
        from obsmem.models.registry import infer_model  # providers load only for a spec string

        return infer_model(spec)
    except ConfigError as exc:
        if exc.option == argument:
            raise
        raise ConfigError(argument, exc.problem, allowed=exc.allowed) from exc


def _observer(
    spec: Observer | ModelSpec, argument: str, role: ObservationConfig, counter: TokenCounter, clock: Clock,
    retry: RetryPolicy | None, routes: _Routes,
) -> Observer:
    if spec is None or (isinstance(spec, str) and spec == "offline"):
        return OfflineObserver(count_tokens=counter.count_text)
    if not (isinstance(spec, str | Mapping) or implements(spec, ChatModel)):
        if implements(spec, Observer):
            return cast(Observer, spec)
        raise ConfigError(
            argument, f"expected a model or an Observer, got {describe_value(spec)}",
            allowed=_role_allowed("Observer"),
        )
    chat = _chat_model(cast("ChatModel | str | Mapping[Any, Any]", spec), argument, "Observer", counter)
    temperature, limit = request_settings(role, chat)
    boundary = routes.boundary
    observer = _AttachmentFilteringObserver(
        boundary.wrap(chat, "observation") if boundary is not None else chat,
        role,
        count_tokens=counter.count_text,
        clock=clock,
        temperature=temperature,
        max_output_tokens=limit,
        retry=retry,
        calls=routes.meter(chat, "observer", "observation"),
    )
    if not routes.routed:
        return observer
    return _RoutedObserver(observer, OfflineObserver(count_tokens=counter.count_text), chat, routes)


def _reflector(
    spec: Reflector | ModelSpec, argument: str, role: ReflectionConfig, counter: TokenCounter, clock: Clock,
    retry: RetryPolicy | None, routes: _Routes,
) -> tuple[Reflector, int]:
    if spec is None or (isinstance(spec, str) and spec == "offline"):
        return OfflineReflector(count_tokens=counter.count_text), 1
    if not (isinstance(spec, str | Mapping) or implements(spec, ChatModel)):
        if implements(spec, Reflector):
            return cast(Reflector, spec), 1
        raise ConfigError(
            argument, f"expected a model or a Reflector, got {describe_value(spec)}",
            allowed=_role_allowed("Reflector"),
        )
    chat = _chat_model(cast("ChatModel | str | Mapping[Any, Any]", spec), argument, "Reflector", counter)
    temperature, limit = request_settings(role, chat)
    boundary = routes.boundary
    reflector: Reflector = _ScopedReflector(
        boundary.wrap(chat, "reflection") if boundary is not None else chat,
        count_tokens=counter.count_text, temperature=temperature, max_output_tokens=limit, clock=clock,
        retry_policy=retry, calls=routes.meter(chat, "reflector", "reflection"),
    )
    if routes.routed:
        reflector = _RoutedReflector(reflector, OfflineReflector(count_tokens=counter.count_text), chat, routes)
    named = chat.tiers[-1][1] if isinstance(chat, ModelByInputTokens) else chat
    return reflector, compression_start_level(named.name)


def check_collaborators(
    *,
    counter: object,
    clock: object,
    on_event: object,
    working_memory_scope: object,
    embedder: object,
    vector_index: object,
) -> None:
    """Refuse, when built, a collaborator that would only fail later (Memory and workers alike).

    Each mistake is a ConfigError naming the argument.
    """
    if counter is not None and not isinstance(counter, TokenCounter):
        raise ConfigError(
            "counter", f"expected a TokenCounter, got {describe_value(counter)}",
            allowed="TokenCounter(...) or None",
        )
    if clock is not None and not all(callable(getattr(clock, name, None)) for name in ("now", "monotonic", "sleep")):
        raise ConfigError(
            "clock", f"expected a clock (an object with now(), monotonic() and sleep()), got {describe_value(clock)}",
            allowed="SystemClock(), FakeClock(...) or None",
        )
    if on_event is not None and not callable(on_event):
        raise ConfigError(
            "on_event", f"expected a function, got {describe_value(on_event)}", allowed="a callable or None"
        )
    scopes = get_args(WorkingMemoryScope)
    if not any(type(working_memory_scope) is str and working_memory_scope == scope for scope in scopes):
        raise ConfigError(
            "working_memory_scope", f"got {describe_value(working_memory_scope)}",
            allowed=" or ".join(map(repr, scopes)),
        )
    if embedder is not None:
        from obsmem.embeddings import Embedder  # numpy loads only when an embedder is given

        if not implements(embedder, Embedder):
            raise ConfigError("embedder", f"expected an Embedder, got {describe_value(embedder)}",
                              allowed="an obsmem.embeddings embedder or None")
    if vector_index is not None:
        from obsmem.vectors import VectorIndex

        if not implements(vector_index, VectorIndex):
            raise ConfigError("vector_index", f"expected a VectorIndex, got {describe_value(vector_index)}",
                              allowed="an obsmem.vectors index or None")


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
        retry: RetryPolicy | None = None,
        calls: ChatModel | None = None,
    ) -> None:
        super().__init__(
            model,
            count_tokens=count_tokens,
            temperature=temperature,
            max_output_tokens=max_output_tokens,
            retry_policy=retry,
            clock=clock,
            observe_attachments=role.observe_attachments is not False,
        )
        self._forwards = role.forwards_attachment
        # What requests go to: ``model`` metered (and behind the same boundary); ``model`` stays
        # the configured one, for whoever inspects the observer.
        self._calls = calls if calls is not None else model

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        thread_id, resource_id = request_scope(request)
        with call_scope(role="observer", thread_id=thread_id, resource_id=resource_id):
            return await super().observe(request)

    async def _call(self, messages: list[Message], settings: ModelRequest) -> ModelResponse:
        async def attempt() -> ModelResponse:
            return assert_complete(await self._calls.request(messages, settings))

        return await with_retry(attempt, policy=self.retry_policy, clock=self.clock)

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


class _ScopedReflector(LLMReflector):
    """The LLM reflector, its requests sent through the metered model, its calls scoped."""

    def __init__(self, model: ChatModel, *, calls: ChatModel | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self._calls = calls if calls is not None else model

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        thread_id, resource_id = request_scope(request)
        with call_scope(role="reflector", thread_id=thread_id, resource_id=resource_id):
            return await super().reflect(request)

    async def _call(self, messages: list[Message], settings: ModelRequest) -> ModelResponse:
        async def attempt() -> ModelResponse:
            return assert_complete(await self._calls.request(messages, settings))

        return await with_retry(attempt, policy=self.retry_policy, clock=self.clock)


def request_scope(request: ObservationRequest | ReflectionRequest) -> tuple[str | None, str | None]:
    """The thread and resource a request is for, as its model calls are recorded: the ids it
    carries, else those of its messages (the thread only when they all belong to one)."""
    scopes = _scopes(request) or []
    thread_id = getattr(request, "thread_id", None)
    if thread_id is None:
        threads = {t for t, _ in scopes if t}
        thread_id = next(iter(threads)) if len(threads) == 1 else None
    resource_id = getattr(request, "resource_id", None) or next((r for _, r in scopes if r), None)
    return thread_id, resource_id


class _Routes:
    """What the LLM roles are wrapped in: metering (always), the privacy boundary and the budget."""

    def __init__(
        self, boundary: _Boundary | None, budget: LedgerBudget | None,
        on_event: Callable[[EngineEvent], None] | None, sinks: tuple[Callable[[ModelCall], None], ...],
    ) -> None:
        self.boundary = boundary
        self.budget = budget
        self.on_event = on_event
        self.sinks = sinks

    @property
    def routed(self) -> bool:
        return self.boundary is not None or self.budget is not None

    def meter(self, chat: ChatModel, role: str, boundary_role: str) -> ChatModel:
        calls = metered(chat, role=role, sinks=self.sinks)
        return self.boundary.wrap(calls, boundary_role) if self.boundary is not None else calls


# --------------------------------------------------------------------------------------------
# The privacy boundary
# --------------------------------------------------------------------------------------------

#: The role and thread of the request in progress, for the redaction event its model request
#: raises (one task per request; concurrent requests for other threads have their own).
_REQUEST: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("obsmem_privacy_request", default=None)

#: Where a redaction key comes from when ``privacy.key`` is not set.
KEY_VARIABLE = "OBSMEM_PRIVACY_KEY"

Scope = tuple[str | None, str | None]


class _Boundary:
    """One Memory's (or worker's) redactor, allow-list and event listener."""

    def __init__(
        self, privacy: PrivacyConfig, counter: TokenCounter, on_event: Callable[[EngineEvent], None] | None
    ) -> None:
        if privacy.key is not None:
            key = privacy.key.get_secret_value().encode()
        else:
            key = os.environ.get(KEY_VARIABLE, "").encode() or os.urandom(32)
        self.redactor = Redactor(
            key, secrets=privacy.redact_secrets, pii=privacy.redact_pii, patterns=privacy.patterns
        )
        self.rules: ProviderRules | None = privacy.provider_rules
        self.strict = privacy.strict
        self.on_event = on_event

    def wrap(self, chat: ChatModel, role: str) -> ChatModel:
        def redacted(counts: dict[str, int]) -> None:
            current = _REQUEST.get()
            self.emit("redaction", current[1] if current else "", role=role, model=chat.name, counts=counts)

        return RedactingModel(chat, self.redactor, on_redacted=redacted)

    def redact_for_knowledge(self, text: str) -> str:
        """``text`` redacted before the knowledge agents read or store it (event ``redaction``
        with role ``knowledge`` when anything was replaced)."""
        redacted = self.redactor.redact(text)
        if redacted.counts:
            self.emit("redaction", "", role="knowledge", model="knowledge-store", counts=dict(redacted.counts))
        return redacted.text

    def emit(self, kind: str, thread_id: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(EngineEvent(kind=cast(Any, kind), thread_id=thread_id, data=data))

    def forbidden(self, chat: ChatModel, scopes: list[Scope] | None) -> str | None:
        """The first provider of ``chat`` (each tier's) that may not see ``scopes``; None: all may."""
        if self.rules is None:
            return None
        models = [model for _, model in chat.tiers] if isinstance(chat, ModelByInputTokens) else [chat]
        for model in models:
            provider = provider_of(model.name)
            if not self.rules.allows(provider, scopes):
                return provider
        return None


#: Embedders that run in this process: their texts never leave it (the boundary lets them be).
_LOCAL_EMBEDDER_MODULES = frozenset({"obsmem.embeddings.lexical", "obsmem.embeddings.minilm"})


def embedder_provider(embedder: object) -> str:
    """The provider an embedder sends its texts to, as the allow-list names providers: its own
    ``provider`` attribute when it has one (an application's embedder that runs in process says
    ``provider = "offline"``), ``openai`` for :class:`~obsmem.embeddings.OpenAIEmbedder`,
    ``offline`` for obsmem's in-process embedders, else ``unknown`` (taken as hosted)."""
    while type(embedder).__module__ == "obsmem.embeddings.metered":  # the ledger's wrapper: what it wraps
        embedder = embedder.wrapped  # type: ignore[attr-defined]
    provider = getattr(embedder, "provider", None)
    if isinstance(provider, str) and provider.strip():
        return provider.strip().lower()
    module = type(embedder).__module__
    if module in _LOCAL_EMBEDDER_MODULES:
        return "offline"
    return "openai" if module == "obsmem.embeddings.openai" else "unknown"


class _GuardedEmbedder:
    """An embedder behind the privacy boundary: every text is redacted first (the roles'
    placeholders, so a query and the text it should find still match on them), and a call for
    a scope (the running :func:`~obsmem.calls.call_scope`) whose text the allow-list keeps from
    the embedder's provider sends nothing: its texts get zero vectors, which match nothing (event
    ``privacy-fallback``), or with ``privacy.strict`` it raises :class:`~obsmem.errors.PrivacyError`
    (the group index leaves that thread's groups out; a search recall reports the error)."""

    def __init__(self, wrapped: Any, boundary: _Boundary, provider: str) -> None:
        self.wrapped = wrapped
        self.boundary = boundary
        self.provider = provider
        self.name = wrapped.name
        self.dimensions = wrapped.dimensions

    def __getattr__(self, name: str) -> object:  # anything else the wrapped embedder offers
        return getattr(self.wrapped, name)

    async def embed(self, texts: Sequence[str]) -> Any:
        rules = self.boundary.rules
        if rules is not None:
            current = current_scope()
            scopes: list[Scope] | None = (
                [(current.thread_id, current.resource_id)] if (current.thread_id or current.resource_id) else None
            )
            if not rules.allows(self.provider, scopes):
                if self.boundary.strict:
                    raise PrivacyError(role="embedding", provider=self.provider, scope=_describe_scopes(scopes))
                # Not strict: nothing is sent and the texts get zero vectors, which match nothing
                # (a search recall finds no group by meaning; the index holds no vector of them).
                self.boundary.emit("privacy-fallback", current.thread_id or "", role="embedding",
                                   provider=self.provider, to="not-embedded")
                import numpy as np

                return np.zeros((len(texts), self.dimensions), dtype=np.float32)
        redact = self.boundary.redactor.redact
        if sum(len(text) for text in texts) >= REDACT_OFFLOAD_CHARS:  # linear but not cheap: off the loop
            redacted = await asyncio.to_thread(lambda: [redact(text) for text in texts])
        else:
            redacted = [redact(text) for text in texts]
        counts: dict[str, int] = {}
        for one in redacted:
            for category, count in one.counts.items():
                counts[category] = counts.get(category, 0) + count
        if counts:
            self.boundary.emit("redaction", current_scope().thread_id or "", role="embedding",
                               model=self.name, counts=counts)
        return await self.wrapped.embed([one.text for one in redacted])


def guard_embedder(embedder: Any, boundary: _Boundary) -> Any:
    """``embedder`` behind ``boundary`` (:class:`_GuardedEmbedder`), unless it runs in process."""
    provider = embedder_provider(embedder)
    return embedder if provider == "offline" else _GuardedEmbedder(embedder, boundary, provider)


def _scopes(request: ObservationRequest | ReflectionRequest) -> list[Scope] | None:
    """The (thread, resource) pairs a request's text belongs to; None when it names none.

    A request may carry ``thread_id`` / ``resource_id`` itself; an observation request's messages
    carry theirs (several threads in resource scope), and a reflection request's observations
    the threads whose ``<thread id>`` sections they hold (a resource's record; the engine
    reflects each section on its own, as that thread's request, so this is a second guard).
    """
    own: Scope = (getattr(request, "thread_id", None), getattr(request, "resource_id", None))
    found: dict[Scope, None] = {}
    if own != (None, None):
        found[own] = None
    if isinstance(request, ObservationRequest):
        for message in request.messages:
            pair = (message.thread_id, message.resource_id or own[1])
            if pair != (None, None):
                found[pair] = None
    else:
        for thread_id in _section_threads(request.observations):
            found[(thread_id, own[1])] = None
    return list(found) or None


def _section_threads(text: str) -> list[str]:
    """The threads whose ``<thread id>`` sections ``text`` holds (a resource's record)."""
    if "<thread" not in text:
        return []
    return list(dict.fromkeys(tid for tid, _ in split_sections(text) if tid is not None))


def _describe_scopes(scopes: list[Scope] | None) -> str:
    if scopes is None:
        return "a request that names no thread or resource"
    return ", ".join(
        " ".join(part for part in (f"thread '{t}'" if t else "", f"resource '{r}'" if r else "") if part)
        for t, r in scopes
    )


class _RoutedRole:
    """Where a request goes: the LLM role, or the offline one when the privacy boundary forbids
    its provider for the request's scope, or when the request's resource has spent its budget."""

    def __init__(self, chat: ChatModel, routes: _Routes, role: str) -> None:
        self.chat = chat
        self.routes = routes
        self.boundary = routes.boundary
        self.role = role

    async def _route(self, request: ObservationRequest | ReflectionRequest) -> tuple[bool, str]:
        """Whether the model may see the request, and the thread id its events name."""
        scopes = _scopes(request)
        thread_id = next((t for t, _ in scopes or [] if t), "")
        if self.boundary is not None:
            provider = self.boundary.forbidden(self.chat, scopes)
            if provider is not None:
                if self.boundary.strict:
                    raise PrivacyError(role=self.role, provider=provider, scope=_describe_scopes(scopes))
                self.boundary.emit("privacy-fallback", thread_id, role=self.role, provider=provider, to="offline")
                return False, thread_id
        budget = self.routes.budget
        if budget is not None:
            resources = {r for _, r in scopes or [] if r}
            for resource_id in sorted(resources):
                if await budget.exceeded(resource_id):
                    return False, thread_id
        return True, thread_id


class _RoutedObserver(_RoutedRole):
    """The LLM observer for allowed requests, the offline one for the others."""

    def __init__(self, llm: LLMObserver, offline: Observer, chat: ChatModel, routes: _Routes) -> None:
        super().__init__(chat, routes, "observation")
        self.llm = llm
        self.offline = offline
        self.name = llm.name

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        allowed, thread_id = await self._route(request)
        if not allowed:
            return await self.offline.observe(request)
        request = self._without_forbidden_sections(request)
        token = _REQUEST.set((self.role, thread_id))
        try:
            return await self.llm.observe(request)
        finally:
            _REQUEST.reset(token)


    def _without_forbidden_sections(self, request: ObservationRequest) -> ObservationRequest:
        """``request`` without the previous observations of threads the model may not see: in
        resource scope with ``share_threads_in_resource``, the observer of one thread is shown
        the other threads' sections, and a thread the allow-list keeps offline must not reach
        the hosted model that way (its section is left out; the observer only reads them to
        avoid repeating itself)."""
        boundary = self.boundary
        previous = request.previous_observations
        if boundary is None or boundary.rules is None or "<thread" not in previous:
            return request
        pieces = split_sections(previous)
        kept = [(tid, body) for tid, body in pieces
                if tid is None or boundary.forbidden(self.chat, [(tid, request.resource_id)]) is None]  # fmt: skip
        if len(kept) == len(pieces):
            return request
        return dataclasses.replace(request, previous_observations=join_sections(kept))


class _RoutedReflector(_RoutedRole):
    """The LLM reflector for allowed requests, the offline one for the others."""

    def __init__(self, llm: Reflector, offline: Reflector, chat: ChatModel, routes: _Routes) -> None:
        super().__init__(chat, routes, "reflection")
        self.llm = llm
        self.offline = offline
        self.name = llm.name

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        allowed, thread_id = await self._route(request)
        if not allowed:
            return await self.offline.reflect(request)
        token = _REQUEST.set((self.role, thread_id))
        try:
            return await self.llm.reflect(request)
        finally:
            _REQUEST.reset(token)


def budget_events(on_event: Callable[[EngineEvent], None] | None) -> Callable[[str, dict[str, Any]], None]:
    """The budget's ``on_exceeded``, reported as an event ``budget-exceeded`` (thread id empty)."""

    def exceeded(resource_id: str, data: dict[str, Any]) -> None:
        if on_event is not None:
            on_event(EngineEvent(kind="budget-exceeded", thread_id="", data=data))

    return exceeded


# -- the knowledge agents ------------------------------------------------------------------------
# Memory and Worker both wire the knowledge agents here: the engine reports committed
# observations and reflections as events, and the committed delta itself is on the cycle's
# marker (``om-observation-end`` / ``om-activation``, data ``observations``) in the thread's
# messages. Reading the delta from the markers (not from the event) makes capture durable: a
# capture that fails, or a process that dies before capturing, leaves the capture lane's cursor
# where it was, and the next run reads the same markers again.

_CAPTURED_MARKERS = ("om-observation-end", "om-activation")
_CAPTURE_EVENTS = frozenset({"observation-end", "activation"})
_REFLECTION_EVENTS = frozenset({"reflection-end", "reflection-activated"})
_KEEP_CYCLES = 200


def knowledge_settings(config: MemoryConfig) -> AgentSettings:
    """The agents' settings from ``config.knowledge``."""
    from obsmem.knowledge.agents import AgentSettings
    from obsmem.knowledge.store.contract import TrustState
    from obsmem.knowledge.store.scopes import parse_level

    k = config.knowledge
    return AgentSettings(
        capture=k.capture, remind=k.remind, curate=k.curate, learn=k.learn, pins=k.pins,
        trust=TrustState(k.trust), record_level=parse_level(k.record_level), node_level=parse_level(k.node_level),
        ceiling=parse_level(k.ceiling), capture_pinning=k.capture_pinning, remind_limit=k.remind_limit,
        remind_tokens=k.remind_tokens, remind_candidates=k.remind_candidates, pins_tokens=k.pins_tokens,
        max_pins=k.max_pins, curate_after_records=k.curate_after_records, curate_max_age_s=k.curate_max_age_s,
        max_steps=k.max_steps, curate_max_steps=k.curate_max_steps,
    )


def knowledge_model(
    config: MemoryConfig, model: ChatModel | str | None = None, *, roles: Roles | None = None
) -> ChatModel | None:
    """The knowledge agents' model: ``model`` if given, else ``config.knowledge.model``; None is
    offline. With ``roles``, the model is metered (its calls reach ``roles.sinks``, role
    ``knowledge`` unless the agents' scope names one) and, under a privacy boundary, wrapped in it."""
    spec = model if model is not None else config.knowledge.model
    if spec is None or spec == "offline":
        return None
    from obsmem.models import infer_model

    chat = infer_model(spec)
    if roles is not None:
        chat = metered(chat, role="knowledge", sinks=roles.sinks)
    return roles.guard(chat, "knowledge") if roles is not None and roles.guard is not None else chat


def knowledge_hosted_for(
    chat: ChatModel | None, roles: Roles
) -> Callable[[str | None, str | None], bool] | None:
    """For :class:`~obsmem.knowledge.agents.KnowledgeAgents`: whether the agents' ``chat`` may see
    a (thread, resource)'s text under the privacy allow-list (None: no model, or no boundary)."""
    allows = roles.allows
    if chat is None or allows is None:
        return None
    return lambda thread_id, resource_id: allows(chat, thread_id, resource_id)


def observation_deltas(
    messages: Sequence[Message], done: set[str], buffered: Mapping[str, str] | None = None
) -> tuple[list[tuple[str, str, int]], set[str]]:
    """``(cycle id, observations, seq)`` of each committed delta on ``messages`` not in ``done``,
    and the ids of activated cycles whose buffered text is not on ``messages``.

    A synchronous observation carries its delta on its ``om-observation-end`` marker; a buffered
    chunk carries it on its ``om-buffering-end`` marker and is committed by an ``om-activation``
    marker under the same cycle id (``buffered`` supplies texts from outside ``messages``)."""
    texts: dict[str, str] = dict(buffered or {})
    for message in messages:
        for part in find_markers([message], "om-buffering-end"):
            text = part.data.get("observations")
            if isinstance(text, str) and part.data.get("cycle_id"):
                texts[str(part.data["cycle_id"])] = text
    found: list[tuple[str, str, int]] = []
    missing: set[str] = set()
    for message in messages:
        for part in find_markers([message]):
            if part.name not in _CAPTURED_MARKERS:
                continue
            cycle = str(part.data.get("cycle_id") or "")
            if not cycle or cycle in done:
                continue
            text = part.data.get("observations")
            if part.name == "om-activation" and not isinstance(text, str):
                text = texts.get(cycle)
                if text is None:
                    missing.add(cycle)
                    continue
            if isinstance(text, str) and text.strip():
                found.append((cycle, text, message.seq or 0))
    return found, missing


async def forget_kept_in_process(
    *, engine: Any, store: Store, counter: TokenCounter, knowledge_agents: Any = None, lineages: Sequence[str] = ()
) -> None:
    """After an erase: nothing this process keeps between calls holds what went any more: the
    renderings of observations, the engine's windows and per-lineage state (of ``lineages``),
    the store's decoded rows, the texts kept for counting tokens, the offline roles' and the
    lexical embedder's kept lines and words (and their idle child interpreters), the knowledge
    agents' run log and recent requests, the values a forget searched for, and the patterns
    ``re`` compiled (some are built from a user's words: a name, a value that changed). For a
    ``Memory`` after its own erase, and for an ``obsmem worker`` that saw another process erase."""
    import re
    import sys

    from obsmem.om.context import forget_rendered
    from obsmem.om.offline import end_idle_children
    from obsmem.om.offline import forget_texts as forget_offline_texts
    from obsmem.storage.contract import forget_cached
    from obsmem.storage.forgetting import forget_needles
    from obsmem.tokens import forget_segments

    forget_rendered()
    if knowledge_agents is not None:
        knowledge_agents.forget_kept()
    core = engine.core
    core.windows.forget()
    core.other_block_memo.clear()
    if engine.buffered is not None:
        engine.buffered.forget(lineages)
    forget_cached(store)
    forget_texts = getattr(counter, "forget_texts", None)
    if forget_texts is not None:  # (a counter of the user's own keeps what it keeps)
        forget_texts()
    forget_segments()
    forget_offline_texts()
    lexical = sys.modules.get("obsmem.embeddings.lexical")  # (only when loaded: it brings numpy)
    if lexical is not None:
        lexical.forget_features()
    forget_needles()
    re.purge()
    await asyncio.to_thread(end_idle_children)


class KnowledgeHook:
    """Runs the knowledge agents off the engine's events, as owned background tasks.

    ``spawn`` is the owner's (``BackgroundWork.spawn`` for a Memory, the worker's for a Worker),
    so ``Memory.settled()`` waits for capture and curation and ``aclose()`` ends them. Requests
    for one thread coalesce: while a run is going, further events only mark it to run again.
    With ``handoff`` (a Memory in queue mode) the agents do not run here: each request is put on
    the store's work queue (kind ``knowledge``) for ``obsmem worker --knowledge`` to run.
    Nothing here raises into the engine: failures are logged and kept in ``agents.runs``.
    """

    def __init__(
        self,
        agents: KnowledgeAgents,
        store: Store,
        spawn: Callable[[Coroutine[Any, Any, None], str], object],
        on_error: Callable[[str, str], None] | None = None,
        handoff: Callable[[str, bool], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.agents = agents
        self.store = store
        self._spawn = spawn
        self._handoff = handoff
        self._on_error = on_error
        self._running: set[tuple[str, str]] = set()
        self._again: set[tuple[str, str]] = set()

    def on_event(self, event: EngineEvent) -> None:
        if event.kind in _CAPTURE_EVENTS:
            self.request(event.thread_id, "capture")
        elif event.kind in _REFLECTION_EVENTS:
            self.request(event.thread_id, "reflection")

    def request(self, thread_id: str, phase: Literal["capture", "reflection"]) -> None:
        if self._handoff is not None:  # queue mode: a worker runs the agents
            self._spawn(self._handoff(thread_id, phase == "reflection"), f"knowledge-enqueue:{thread_id}")
            return
        key = (thread_id, phase)
        if key in self._running:
            self._again.add(key)
            return
        self._running.add(key)
        self._spawn(self._loop(key), f"knowledge-{phase}:{thread_id}")

    async def _loop(self, key: tuple[str, str]) -> None:
        thread_id, phase = key
        try:
            while True:
                self._again.discard(key)
                try:
                    if phase == "capture":
                        await self.capture_thread(thread_id)
                    else:
                        await self.reflection_phase(thread_id)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # never into the engine or the turn
                    telemetry.log_failure(logger, "knowledge %s for thread %r failed", phase, thread_id, error=exc,
                                          thread_id=thread_id, operation=phase)
                    if self._on_error is not None:
                        self._on_error(thread_id, f"{phase}: {type(exc).__name__}: {exc}")
                if key not in self._again:
                    return
        finally:
            self._running.discard(key)

    async def _scope(self, thread_id: str) -> tuple[Thread, KnowledgeScope] | None:
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            return None
        return thread, self.agents.scope(thread.org_id, thread.resource_id, thread.id)

    # -- a thread deleted while its knowledge is written ---------------------------------------
    # ``Memory.delete_thread`` / ``delete_resource`` delete the thread in the main store first and
    # purge its knowledge scope after. An agent run that found the thread at its start may still
    # be writing when that purge runs, and a write landing after the purge would outlive the
    # delete. So every run is fenced by the main store, in whatever process it runs: the thread
    # (this one: same scope, same creation) is looked up before each delta and after each run, and
    # a run that finds it gone stops and takes back what may have landed after the purge
    # (:meth:`_withdraw`). Check-then-write leaves a window; the look-up *after* the writes closes
    # it: a purge that ran before a write was preceded by the thread's deletion, which that
    # look-up then sees. No process-local lock is involved.

    async def _alive(self, thread: Thread) -> bool:
        """Whether ``thread`` is still stored as the run found it (a thread deleted and created
        again under its id is another thread)."""
        now = await self.store.get_thread(thread.id)
        return (
            now is not None
            and now.resource_id == thread.resource_id
            and now.org_id == thread.org_id
            and now.created_at == thread.created_at
        )

    async def _org_mark(self, scope: KnowledgeScope) -> str | None:
        """The newest audit event of the scope's org (ids sort in creation order): a purge of the
        resource logged later than this happened while the run was going."""
        from obsmem.knowledge.store.scopes import Level

        page = await self.agents.knowledge.store.list_activity(scope.at(Level.ORG).key, limit=1)
        return page.items[0].id if page.items else None

    async def _resource_purged_since(self, scope: KnowledgeScope, mark: str | None) -> bool:
        """Whether the resource's knowledge scope was purged after ``mark`` (its ``scope-purged``
        event, at the org, names the scope by digest)."""
        from obsmem.knowledge.store.contract import ActivityAction
        from obsmem.knowledge.store.scopes import Level
        from obsmem.knowledge.store.values import forgotten_digest

        store = self.agents.knowledge.store
        digest = forgotten_digest(scope.at(Level.RESOURCE).key)
        after: str | None = None
        while True:
            page = await store.list_activity(scope.at(Level.ORG).key, after=after, limit=100)
            for event in page.items:  # newest first
                if mark is not None and event.id <= mark:
                    return False
                if event.action is ActivityAction.SCOPE_PURGED and event.subject_id == digest:
                    return True
            if page.next_cursor is None:
                return False
            after = page.next_cursor

    async def _withdraw(self, thread: Thread, scope: KnowledgeScope, mark: str | None, runs: Sequence[AgentRun]) -> None:
        """The thread was deleted while agents wrote its knowledge: redo the delete's purge.

        * the resource was purged since the run began and has no thread left (``delete_resource``):
          its whole knowledge scope again, so nothing written after that purge (a node created
          again, a record, a refused write's audit event) stays under it;
        * otherwise, unless a thread of the same scope exists again: the thread's scope (what
          ``delete_thread`` purges);
        * and the records these runs wrote that are still there (a broader level, or a thread
          created again under this id), erased.

        A purge that has not run yet (the delete is still going) runs after these writes and
        takes them with it."""
        from obsmem.knowledge.agents.common import ALL_RECORDS
        from obsmem.knowledge.store.scopes import Level

        knowledge = self.agents.knowledge
        store, actor = knowledge.store, knowledge.actor
        if not await self.store.list_threads(thread.resource_id, limit=1) and await self._resource_purged_since(
            scope, mark
        ):
            await store.purge_scope(scope.at(Level.RESOURCE).key, actor=actor, reason="resource deleted")
            return
        now = await self.store.get_thread(thread.id)
        if now is None or self.agents.scope(now.org_id, now.resource_id, now.id).key != scope.key:
            await store.purge_scope(scope.key, actor=actor, reason="thread deleted")
        written = dict.fromkeys(record.id for run in runs for record in run.written)
        left = [rid for rid in written if await store.get_record(rid, scope.key, ALL_RECORDS) is not None]
        if left:
            await store.erase_records(left, scope.key, actor=actor, reason="thread deleted")

    async def _fenced(
        self, thread: Thread, scope: KnowledgeScope, mark: str | None, runs: list[AgentRun],
        work: Callable[[], Coroutine[Any, Any, list[AgentRun]]],
    ) -> bool:
        """Run ``work`` (its runs added to ``runs``) unless the thread is gone; after it (or its
        failure), withdraw what it wrote if the thread went meanwhile. False: the thread is gone
        (the failure a delete caused is not raised).

        Gone before ``work``: nothing to withdraw, since every earlier write of this run was
        followed by a look-up that found the thread, so the delete's purge comes after it."""
        if not await self._alive(thread):
            return False
        try:
            runs.extend(await work())
        except asyncio.CancelledError:
            raise
        except Exception:
            if await self._alive(thread):
                raise
            await self._withdraw(thread, scope, mark, runs)
            return False
        if not await self._alive(thread):
            await self._withdraw(thread, scope, mark, runs)
            return False
        return True

    async def capture_thread(self, thread_id: str) -> list[AgentRun]:
        """Capture every committed delta of ``thread_id`` past the capture lane's cursor.

        The cursor (a message seq) and the set of captured cycle ids advance delta by delta,
        only past deltas whose capture finished; a failure stops there (and raises). A thread
        deleted meanwhile stops the capture, and what it wrote is taken back (see
        :meth:`_withdraw`)."""
        from obsmem.knowledge.agents import LaneBusyError

        if not self.agents.settings.capture:
            return []
        found = await self._scope(thread_id)
        if found is None:
            return []
        thread, scope = found
        mark = await self._org_mark(scope)
        runs: list[AgentRun] = []
        alive = True
        lane = f"capture:{thread.id}"
        try:
            async with self.agents.lanes.hold(lane, wait_s=5.0) as state:  # one capture at a time
                after = max(0, int(state.cursor or 0) - 1)  # re-read the last marked message: a
                done: list[str] = list(state.get("cycles", []))  # later marker may land on it
                messages = await self.store.list_messages(thread.id, after_seq=after)
                cursor = int(state.cursor or 0)
                deltas, missing = observation_deltas(messages, set(done))
                if missing:  # a chunk buffered before the cursor, activated after it: read it all
                    deltas, _ = observation_deltas(await self.store.list_messages(thread.id), set(done))
                    deltas = [d for d in deltas if d[2] > after or d[0] in missing]
                if deltas:  # known to the workers' idle pass before anything can fail
                    await self.agents.lanes.register(self.agents.curator.lane(thread.id))
                captured: list[AgentRun] = []
                try:
                    for cycle, text, seq in deltas:

                        async def one(text: str = text) -> list[AgentRun]:
                            with call_scope(role="capture", thread_id=thread.id, resource_id=thread.resource_id):
                                return [await self.agents.capture(text, scope, source_thread_id=thread.id)]

                        alive = await self._fenced(thread, scope, mark, captured, one)
                        if not alive:
                            break
                        done.append(cycle)
                        cursor = max(cursor, seq)
                finally:
                    runs.extend(captured)
                    if captured and alive:  # a deleted thread's lane is not written again
                        progressed = state.succeeded(str(cursor), self.agents.clock.now())
                        await self.agents.lanes.write(lane, progressed.with_extra(cycles=done[-_KEEP_CYCLES:]))
        except LaneBusyError:  # another process is capturing this thread; its cursor is durable,
            return runs          # and the next commit (or a worker's idle pass) catches up
        except ThreadNotFoundError:  # deleted before its messages were read: nothing to capture
            if await self._alive(thread):
                raise
            return runs
        if alive and any(run.written for run in runs):

            async def curate() -> list[AgentRun]:
                with call_scope(role="curate", thread_id=thread.id, resource_id=thread.resource_id):
                    return [await self.agents.curate_if_due(scope, thread.id)]

            await self._fenced(thread, scope, mark, runs, curate)
        return runs

    async def reflection_phase(self, thread_id: str) -> list[AgentRun]:
        found = await self._scope(thread_id)
        if found is None:
            return []
        thread, scope = found
        mark = await self._org_mark(scope)
        await self.capture_thread(thread_id)  # what the reflection condensed is captured first

        async def phase() -> list[AgentRun]:
            with call_scope(thread_id=thread_id, resource_id=thread.resource_id, operation="reflection"):
                return await self.agents.reflection_phase(scope, thread_id)

        runs: list[AgentRun] = []
        await self._fenced(thread, scope, mark, runs, phase)
        return runs

    async def curate_due(self) -> list[AgentRun]:
        """The worker's idle pass over every registered lane: capture what is still uncaptured
        (a capture that failed or was busy), then curate the lane if it is due."""
        runs: list[AgentRun] = []
        for lane in await self.agents.lanes.all_lanes():
            if not lane.startswith("curate:"):
                continue
            thread_id = lane.removeprefix("curate:")
            found = await self._scope(thread_id)
            if found is None:
                continue
            thread, scope = found
            mark = await self._org_mark(scope)
            try:
                runs += [r for r in await self.capture_thread(thread_id) if r.agent == "capture" and r.written]
            except Exception as exc:  # the capture lane keeps its cursor; curation still runs
                telemetry.log_failure(logger, "knowledge capture catch-up for %r failed", thread_id, error=exc,
                                      thread_id=thread_id, operation="capture")

            async def curate(scope: KnowledgeScope = scope, thread: Thread = thread) -> list[AgentRun]:
                with call_scope(role="curate", thread_id=thread.id, resource_id=thread.resource_id):
                    return [await self.agents.curate_if_due(scope, thread.id)]

            curated: list[AgentRun] = []
            await self._fenced(thread, scope, mark, curated, curate)
            runs += [run for run in curated if run.status != "skipped"]
        return runs
