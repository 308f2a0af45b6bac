"""OpenTelemetry spans and metrics for obsmem's memory work (optional: ``pip install obsmem[otel]``).

Everything here is a no-op unless ``opentelemetry-api`` is importable; obsmem never installs a
provider. The tracer (``opentelemetry.trace.get_tracer("obsmem", <version>)``) and the meter are
taken lazily from the global providers, so an application that configures the SDK (before or
after importing obsmem) sees obsmem's spans under its own. Until a tracer (meter) provider is
set, the API's stand-ins would keep nothing: obsmem then makes no span (records no metric), at
the cost of one lookup per use.

What is recorded (see the README's "Observability" section for the full list):

* spans ``obsmem.begin_turn``, ``obsmem.step``, ``obsmem.end``, ``obsmem.observe``,
  ``obsmem.buffer``, ``obsmem.activate``, ``obsmem.reflect``, ``obsmem.recall`` and
  ``obsmem.agent <name>``, with ``obsmem.thread_id`` / ``obsmem.resource_id`` and numbers (token
  counts, outcome, trigger), never the text of a message;
* one span per memory model call (``chat <model>`` / ``embeddings <model>``, GenAI semantic
  conventions), recorded from the :class:`~obsmem.calls.ModelCall` each metered call reports,
  under whatever span was current when the call was made (the observe/reflect/agent span);
* metrics: turn waits and overhead, tokens by role, model calls and their duration, buffers
  started/activated/thrown away, failures and backoffs.

Privacy: ``configure(hash_ids=True)`` (or ``OBSMEM_OTEL_HASH_IDS=1``) replaces thread and
resource ids by the first 16 hex digits of ``sha256(salt + id)`` (``salt`` or
``OBSMEM_OTEL_HASH_SALT``, default empty): stable, so one thread's spans still group together.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from obsmem import calls

__all__ = [
    "Span",
    "configure",
    "enabled",
    "hash_id",
    "ids",
    "log_failure",
    "log_fields",
    "record_boundary",
    "record_event",
    "record_buffer_started",
    "record_outcome",
    "record_turn_waited",
    "recording",
    "span",
]

log = logging.getLogger("obsmem.telemetry")

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float] | Sequence[bool]

# GenAI semantic conventions (opentelemetry-semantic-conventions, gen_ai_attributes).
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"

THREAD_ID = "obsmem.thread_id"
RESOURCE_ID = "obsmem.resource_id"
#: Attributes that name a thread besides :data:`THREAD_ID` (a resource-scope cycle that another
#: thread joined names the thread it joined): hashed like it when ids are hashed. ``ids()``
#: hashes the two ids themselves; these come raw from the engine's ``traced(..., joined=...)``.
OTHER_ID_ATTRIBUTES = frozenset({"obsmem.joined"})
ROLE = "obsmem.role"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("obsmem")
    except Exception:  # an uninstalled checkout
        return "0"


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------

@dataclass(slots=True)
class _Options:
    hash_ids: bool
    salt: str
    enabled: bool = True


_OPTIONS = _Options(
    hash_ids=os.environ.get("OBSMEM_OTEL_HASH_IDS", "").strip().lower() in {"1", "true", "yes", "on"},
    salt=os.environ.get("OBSMEM_OTEL_HASH_SALT", ""),
)


def configure(*, hash_ids: bool | None = None, salt: str | None = None, enabled: bool | None = None) -> None:
    """Set the options for the whole process (``None`` keeps the current value).

    ``hash_ids``: record thread and resource ids as a stable SHA-256 prefix instead of the ids;
    ``salt``: prefixed to each id before hashing (the default is ``OBSMEM_OTEL_HASH_SALT`` or empty);
    ``enabled``: False records nothing even with OpenTelemetry installed (default True).
    """
    if enabled is not None:
        _OPTIONS.enabled = bool(enabled)
    if hash_ids is not None:
        _OPTIONS.hash_ids = bool(hash_ids)
    if salt is not None:
        _OPTIONS.salt = salt


def hash_id(value: str) -> str:
    """``value`` as recorded when ids are hashed: 16 hex digits of ``sha256(salt + value)``."""
    return hashlib.sha256((_OPTIONS.salt + value).encode("utf-8")).hexdigest()[:16]


def _id(value: str) -> str:
    return hash_id(value) if _OPTIONS.hash_ids else value


def _attribute(key: str, value: AttributeValue) -> AttributeValue:
    """``value`` as recorded under ``key``: an id in :data:`OTHER_ID_ATTRIBUTES` hashed when
    configured."""
    return _id(value) if key in OTHER_ID_ATTRIBUTES and isinstance(value, str) else value


def ids(thread_id: str | None = None, resource_id: str | None = None) -> dict[str, AttributeValue]:
    """The ``obsmem.thread_id`` / ``obsmem.resource_id`` attributes (hashed when configured)."""
    found: dict[str, AttributeValue] = {}
    if thread_id:
        found[THREAD_ID] = _id(thread_id)
    if resource_id:
        found[RESOURCE_ID] = _id(resource_id)
    return found


def log_fields(
    thread_id: str | None = None, operation: str | None = None, error: BaseException | None = None, **more: Any
) -> dict[str, Any]:
    """Structured fields for a log record's ``extra=`` (``obsmem_thread_id``, ``obsmem_operation``,
    ``obsmem_error_type`` and ``obsmem_<key>`` for ``more``); ids hashed when configured. The
    logging rule: obsmem logs under ``obsmem.*`` and never puts message text in a record at INFO
    or above (ids, counts, types only)."""
    fields: dict[str, Any] = {}
    if thread_id:
        fields["obsmem_thread_id"] = _id(thread_id)
    if operation:
        fields["obsmem_operation"] = operation
    if error is not None:
        fields["obsmem_error_type"] = type(error).__name__
    fields.update({f"obsmem_{key}": value for key, value in more.items()})
    return fields


def log_failure(
    logger: logging.Logger, what: str, *args: Any, error: BaseException | str, thread_id: str | None = None,
    operation: str | None = None, **more: Any,
) -> None:
    """Log a failure by the logging rule: at WARNING ``what`` (a %-format over ``args``: ids and
    counts only) with the error's type; the error's own text (which may quote a message or a
    model's output) only at DEBUG. Both records carry :func:`log_fields`. With ids hashed, an
    argument that is ``thread_id`` (or ``resource_id=`` in ``more``) is written hashed too."""
    if isinstance(error, str):  # "Type: text" as AgentRun.detail and describe() write it
        prefix = error.split(":", 1)[0].strip()
        kind = prefix if prefix.isidentifier() else "error"
    else:
        kind = type(error).__name__
    fields = log_fields(thread_id, operation, error if isinstance(error, BaseException) else None, **more)
    if isinstance(error, str):
        fields["obsmem_error_type"] = kind
    if _OPTIONS.hash_ids:  # the ids the message names, as its fields name them (an id may be an e-mail)
        named = {value for value in (thread_id, more.get("resource_id")) if isinstance(value, str) and value}
        args = tuple(_id(arg) if isinstance(arg, str) and arg in named else arg for arg in args)
    logger.warning(what + " (%s)", *args, kind, extra=fields)
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(what + ": %s", *args, error, extra=fields)


# --------------------------------------------------------------------------------------------
# The API, loaded once
# --------------------------------------------------------------------------------------------

class _Otel:
    """The tracer, the meter and the instruments, made once the API is found."""

    def __init__(self) -> None:
        from opentelemetry import metrics, trace

        self.trace = trace
        self.metrics = metrics
        # The providers that record nothing: the API's own stand-ins until an application sets
        # an SDK up (at any time: the providers are looked up on every use), and the no-op ones.
        self.silent_tracers: tuple[type, ...] = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        try:
            from opentelemetry.metrics._internal import _ProxyMeterProvider

            self.silent_meters: tuple[type, ...] = (_ProxyMeterProvider, metrics.NoOpMeterProvider)
        except ImportError:  # another API layout: every provider counts as one that records
            self.silent_meters = ()
        version = _version()
        self.tracer = trace.get_tracer("obsmem", version)
        meter = metrics.get_meter("obsmem", version)
        self.status_error = trace.Status(trace.StatusCode.ERROR)
        self.client = trace.SpanKind.CLIENT
        self.turn_wait = meter.create_histogram(
            "obsmem.turn.wait.duration", unit="s",
            description="Seconds a turn boundary waited on memory model work (sync observation or "
                        "reflection, or a buffer in flight)",
        )
        self.turns_waited = meter.create_counter(
            "obsmem.turn.waited", unit="{turn}", description="Turns that waited on memory model work",
        )
        self.overhead = meter.create_histogram(
            "obsmem.turn.overhead", unit="s",
            description="Seconds a turn boundary spent in obsmem, not counting its waits on model work",
        )
        self.tokens = meter.create_counter(
            "obsmem.model.tokens", unit="{token}", description="Tokens of memory model calls, by role and type",
        )
        self.calls = meter.create_counter(
            "obsmem.model.calls", unit="{call}", description="Memory model calls, by role and outcome",
        )
        self.call_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration",
        )
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per GenAI call",
        )
        self.buffers_started = meter.create_counter(
            "obsmem.buffers.started", unit="{buffer}", description="Background buffers started",
        )
        self.buffers_activated = meter.create_counter(
            "obsmem.buffers.activated", unit="{buffer}", description="Buffered chunks/reflections activated",
        )
        self.buffers_dropped = meter.create_counter(
            "obsmem.buffers.dropped", unit="{buffer}", description="Buffers thrown away (overtaken or stale)",
        )
        self.failures = meter.create_counter(
            "obsmem.failures", unit="{failure}", description="Memory operations that failed",
        )
        self.backoffs = meter.create_counter(
            "obsmem.backoffs", unit="{backoff}",
            description="Times a role's model was put in backoff (and due calls skipped for it)",
        )
        self.wait_exceeded = meter.create_counter(
            "obsmem.turn.wait_exceeded", unit="{boundary}",
            description="Boundaries that stopped waiting at max_turn_wait (the work went on)",
        )
        self.trimmed = meter.create_counter(
            "obsmem.context.trimmed", unit="{message}",
            description="Raw messages left out of a context to keep it under its limit",
        )


    def tracing(self) -> bool:
        """Whether a span started now may be recorded (a tracer provider is set)."""
        return not isinstance(self.trace.get_tracer_provider(), self.silent_tracers)

    def metering(self) -> bool:
        """Whether a metric recorded now may be kept (a meter provider is set)."""
        return not isinstance(self.metrics.get_meter_provider(), self.silent_meters)

    def recording(self) -> bool:
        """Whether a span or a metric recorded now may be kept (either provider is set)."""
        return self.tracing() or self.metering()


_UNLOADED: Any = object()
_STATE: Any = _UNLOADED
_LOADING = threading.Lock()  # one load, whichever thread asks first (see ready)


def _otel() -> _Otel | None:
    global _STATE
    if not _OPTIONS.enabled:
        return None
    state = _STATE
    if state is _UNLOADED:
        with _LOADING:
            state = _STATE
            if state is _UNLOADED:
                try:
                    state = _Otel()
                except ImportError:
                    state = None
                except Exception:  # a broken install must not break memory
                    log.warning("obsmem: OpenTelemetry could not be set up; telemetry is off", exc_info=True)
                    state = None
                _STATE = state
    return state  # type: ignore[no-any-return]


async def ready() -> None:
    """Load the OpenTelemetry API in a thread when telemetry is on and it is not loaded yet: its
    imports and the package metadata read for the tracer's version take 50-100 ms, once per
    process, and a process's first turn does not hold up the event loop with them. Afterwards
    one check."""
    if _OPTIONS.enabled and _STATE is _UNLOADED:
        await asyncio.to_thread(_otel)


def _with_metrics(record: Callable[[_Otel], object]) -> None:
    """``record(otel)`` when telemetry is on; when it is off, nothing (not even an import)."""
    otel = _otel()
    if otel is not None and otel.metering():
        record(otel)


def enabled() -> bool:
    """Whether spans and metrics are recorded: the OpenTelemetry API is importable and
    :func:`configure` did not turn telemetry off."""
    return _otel() is not None


def recording() -> bool:
    """Whether anything obsmem records now is kept: :func:`enabled`, and the application has set a
    tracer or meter provider (an SDK). With the API alone, its stand-in providers would keep
    nothing, so obsmem then makes no span objects and no metric calls (a turn boundary's spans
    and metrics cost about a tenth of its time); an SDK set up later is used from then on."""
    otel = _otel()
    return otel is not None and otel.recording()


# --------------------------------------------------------------------------------------------
# Spans
# --------------------------------------------------------------------------------------------

class Span:
    """One obsmem span, as a context manager (sync ``with``; it works in coroutines too: the
    OpenTelemetry context is a context variable). ``set`` / ``update`` add attributes; ``None``
    values are skipped. Without OpenTelemetry every method does nothing."""

    __slots__ = ("_manager", "_span")

    def __init__(self, manager: Any = None) -> None:
        self._manager = manager
        self._span: Any = None

    def __enter__(self) -> Span:
        if self._manager is not None:
            self._span = self._manager.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._manager is not None:
            if exc is not None:
                self.fail(exc)
            self._manager.__exit__(kind, exc, tb)

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(kind, exc, tb)

    @property
    def recording(self) -> bool:
        return self._span is not None and bool(self._span.is_recording())

    def set(self, key: str, value: AttributeValue | None) -> None:
        if self._span is not None and value is not None:
            self._span.set_attribute(key, _attribute(key, value))

    def update(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        if self._span is not None:
            for key, value in attributes.items():
                if value is not None:
                    self._span.set_attribute(key, _attribute(key, value))

    def fail(self, error: BaseException | str) -> None:
        """Mark the span failed (an operation that failed without raising); ``error.type`` is the
        exception's class name (never its message: it may quote a model's output)."""
        otel = _otel()
        if self._span is not None and otel is not None:
            name = error if isinstance(error, str) else type(error).__name__
            self._span.set_attribute(ERROR_TYPE, name)
            self._span.set_status(otel.status_error)


_NOOP = Span()


def span(name: str, attributes: Mapping[str, AttributeValue | None] | None = None) -> Span:
    """A span named ``name``, current for the ``with`` (or ``async with``) body; an exception
    leaving it marks it failed. ``attributes`` with a ``None`` value are left out."""
    otel = _otel()
    if otel is None or not otel.tracing():
        return _NOOP
    clean = {key: _attribute(key, value) for key, value in attributes.items() if value is not None} if attributes else None
    return Span(
        otel.tracer.start_as_current_span(name, attributes=clean, record_exception=False, set_status_on_exception=False)
    )


def outcome_attributes(outcome: Any) -> dict[str, AttributeValue | None]:
    """The attributes of a :class:`~obsmem.om.outcomes.CycleOutcome` (duck-typed: this module sits
    below the engine): applied, reason, message count, token counts, whether the turn waited."""
    error = getattr(outcome, "error", None)
    return {
        "obsmem.applied": bool(outcome.applied),
        "obsmem.outcome": outcome.reason or ("applied" if outcome.applied else "not-applied"),
        "obsmem.messages": int(outcome.messages),
        "obsmem.input_tokens": int(outcome.input_tokens),
        "obsmem.output_tokens": int(outcome.output_tokens),
        "obsmem.waited": bool(outcome.waited),
        ERROR_TYPE: type(error).__name__ if error is not None else None,
    }


def record_outcome(current: Span, outcome: Any) -> None:
    """Put ``outcome`` on ``current`` (and mark it failed when the outcome carries an error)."""
    if current._span is None:
        return
    current.update(outcome_attributes(outcome))
    if getattr(outcome, "error", None) is not None:
        current.fail(outcome.error)


# --------------------------------------------------------------------------------------------
# Model calls: a span and metrics per ModelCall
# --------------------------------------------------------------------------------------------

def _on_model_call(call: calls.ModelCall) -> None:
    otel = _otel()  # a span and metrics: either provider may be the one that is set
    if otel is not None and otel.recording():
        _record_model_call(otel, call)


def _record_model_call(otel: _Otel, call: calls.ModelCall) -> None:
    operation = "embeddings" if call.kind == "embedding" else "chat"
    attributes: dict[str, AttributeValue] = {
        GEN_AI_OPERATION_NAME: operation,
        GEN_AI_REQUEST_MODEL: call.model,
        GEN_AI_USAGE_INPUT_TOKENS: call.input_tokens,
        GEN_AI_USAGE_OUTPUT_TOKENS: call.output_tokens,
        ROLE: call.role,
        "obsmem.call.outcome": call.outcome,
    }
    if call.cached_input_tokens:
        attributes[GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = call.cached_input_tokens
    if call.cache_write_tokens:
        attributes[GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = call.cache_write_tokens
    if call.finish_reason:
        attributes[GEN_AI_RESPONSE_FINISH_REASONS] = [call.finish_reason]
    if call.operation:
        attributes["obsmem.operation"] = call.operation
    if call.error_type:
        attributes[ERROR_TYPE] = call.error_type
    attributes.update(ids(call.thread_id, call.resource_id))
    start_ns = int(call.started_at.timestamp() * 1e9)
    end_ns = start_ns + int(call.latency_s * 1e9)
    model_span = otel.tracer.start_span(
        f"{operation} {call.model}", kind=otel.client, attributes=attributes, start_time=start_ns
    )
    if call.outcome != "ok":
        model_span.set_status(otel.status_error)
    model_span.end(end_time=end_ns)

    by_role = {ROLE: call.role, GEN_AI_REQUEST_MODEL: call.model}
    otel.calls.add(1, {**by_role, "obsmem.call.outcome": call.outcome})
    for kind, count in (
        ("input", call.input_tokens),
        ("output", call.output_tokens),
        ("cache_read", call.cached_input_tokens),
        ("cache_creation", call.cache_write_tokens),
    ):
        if count:
            otel.tokens.add(count, {**by_role, GEN_AI_TOKEN_TYPE: kind})
    semconv = {GEN_AI_OPERATION_NAME: operation, GEN_AI_REQUEST_MODEL: call.model}
    otel.call_duration.record(call.latency_s, {**semconv, ERROR_TYPE: call.error_type} if call.error_type else semconv)
    if call.outcome == "ok":
        otel.token_usage.record(call.input_tokens, {**semconv, GEN_AI_TOKEN_TYPE: "input"})
        otel.token_usage.record(call.output_tokens, {**semconv, GEN_AI_TOKEN_TYPE: "output"})


calls.add_listener(_on_model_call)


# --------------------------------------------------------------------------------------------
# Metrics from the engine's events and the turn's boundaries
# --------------------------------------------------------------------------------------------

def _count(kind: str, data: Mapping[str, Any], otel: _Otel) -> None:
    if kind == "buffer-start":
        otel.buffers_started.add(1, {"obsmem.kind": "observation"})
    elif kind == "activation":
        otel.buffers_activated.add(int(data.get("chunks", 1) or 0), {"obsmem.kind": "observation"})
    elif kind == "reflection-activated":
        otel.buffers_activated.add(1, {"obsmem.kind": "reflection"})
    elif kind == "buffer-dropped":
        otel.buffers_dropped.add(1, {"obsmem.kind": "observation"})
    elif kind == "buffer-dropped-reflection":  # not an engine event: a buffered reflection a new head overtook
        otel.buffers_dropped.add(1, {"obsmem.kind": "reflection"})
    elif kind.endswith("-failed"):
        otel.failures.add(1, {"obsmem.operation": kind.removesuffix("-failed")})
    elif kind.endswith("-backoff"):
        otel.backoffs.add(1, {ROLE: kind.removesuffix("-backoff"), "obsmem.backoff": "started"})
    elif kind.endswith("-backoff-skipped"):
        otel.backoffs.add(1, {ROLE: kind.removesuffix("-backoff-skipped"), "obsmem.backoff": "skipped"})
    elif kind == "turn-wait-exceeded":
        otel.wait_exceeded.add(1)
    elif kind == "context-trimmed":
        otel.trimmed.add(int(data.get("messages", 0) or 0))


def record_event(kind: str, data: Mapping[str, Any]) -> None:
    """Count an engine event (``EngineEvent.kind`` and its data) in the metrics."""
    _with_metrics(lambda otel: _count(kind, data, otel))


def record_buffer_started(kind: str) -> None:
    """A background buffer of ``kind`` (``observation`` / ``reflection``) was started."""
    _with_metrics(lambda otel: otel.buffers_started.add(1, {"obsmem.kind": kind}))


def record_boundary(boundary: str, duration_s: float, wait_s: float) -> None:
    """One turn boundary (``begin_turn`` / ``step`` / ``end``): its overhead (``duration_s`` less
    ``wait_s``) and, when it waited, the wait."""

    def record(otel: _Otel) -> None:
        attributes = {"obsmem.boundary": boundary}
        otel.overhead.record(max(0.0, duration_s - wait_s), attributes)
        if wait_s > 0:
            otel.turn_wait.record(wait_s, attributes)

    _with_metrics(record)


def record_turn_waited() -> None:
    """A turn ended that waited on memory model work at one of its boundaries."""
    _with_metrics(lambda otel: otel.turns_waited.add(1))
