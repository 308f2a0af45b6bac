"""Who is calling a memory model, and what one call cost: the record every model call leaves.

Two things are shared by everything that watches model calls (the cost ledger, OpenTelemetry):

* :func:`call_scope` / :func:`current_scope`: a context variable that the engine, the knowledge
  agents and the worker set around their work (``role``, ``thread_id``, ``resource_id``,
  ``operation``), so a model wrapper deep below knows whom a call was for without changing the
  :class:`~obsmem.models.base.ChatModel` protocol. Scopes nest: an inner scope keeps every field
  the outer one set and it does not set itself.
* :class:`ModelCall`: one finished call (or a failed one), as the wrapper that timed it reports it
  to its sinks and to the process-wide listeners (:func:`add_listener`). A listener must be quick
  and must not raise: an exception is logged and swallowed, never surfaced to the model's caller.

No text of any message is ever part of a scope or a call record.
"""

from __future__ import annotations

import contextvars
import logging
import math
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "CallOutcome",
    "CallScope",
    "ModelCall",
    "UsageReport",
    "UsageRow",
    "add_listener",
    "call_scope",
    "current_scope",
    "notify",
    "remove_listener",
]

log = logging.getLogger("obsmem.calls")

CallOutcome = Literal["ok", "error", "timeout", "cancelled"]


@dataclass(frozen=True, slots=True)
class CallScope:
    """What the current memory work is: its role (observer, reflector, agent name ...) and ids."""

    role: str | None = None
    thread_id: str | None = None
    resource_id: str | None = None
    operation: str | None = None


_SCOPE: contextvars.ContextVar[CallScope] = contextvars.ContextVar("obsmem_call_scope", default=CallScope())


def current_scope() -> CallScope:
    """The scope set by the innermost :func:`call_scope` around the running code (all ``None`` outside)."""
    return _SCOPE.get()


@contextmanager
def call_scope(
    *,
    role: str | None = None,
    thread_id: str | None = None,
    resource_id: str | None = None,
    operation: str | None = None,
) -> Iterator[CallScope]:
    """Set the fields given (the others stay as the enclosing scope set them) for the ``with`` body."""
    outer = _SCOPE.get()
    changes = {
        name: value
        for name, value in (
            ("role", role),
            ("thread_id", thread_id),
            ("resource_id", resource_id),
            ("operation", operation),
        )
        if value is not None
    }
    scope = replace(outer, **changes) if changes else outer
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One memory model call: who made it, which model, what it cost, how long it took, how it ended.

    ``kind`` is ``chat`` or ``embedding``. Token counts are the provider's (0 when it reported none;
    an embedding call has only input tokens). ``started_at`` is wall-clock UTC; ``latency_s`` is
    measured on a monotonic clock. ``error_type`` is the exception's class name for a failed call.
    """

    role: str
    model: str
    started_at: datetime
    latency_s: float
    outcome: CallOutcome = "ok"
    kind: Literal["chat", "embedding"] = "chat"
    thread_id: str | None = None
    resource_id: str | None = None
    operation: str | None = None
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    error_type: str | None = None

    def __post_init__(self) -> None:
        # A count as reported by any model (an application's own, a LiteLLM answer, a sum of
        # usages) reads as a whole number in [0, MAX_CALL_TOKENS]: the ledger stores it in a
        # 64-bit column, and one unstorable count must not cost the call its row.
        for name in _TOKEN_FIELDS:
            value = getattr(self, name)
            if not (type(value) is int and 0 <= value <= MAX_CALL_TOKENS):
                object.__setattr__(self, name, _token_count(value))
        latency = self.latency_s
        if not (type(latency) is float and 0.0 <= latency < math.inf):
            object.__setattr__(self, "latency_s", _seconds(latency))


#: The most tokens a :class:`ModelCall` records for one count (as the built-in providers read a
#: reported count: :data:`obsmem.models.transport.MAX_REPORTED_TOKENS`).
MAX_CALL_TOKENS = 2**40
_TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")


def _token_count(value: object) -> int:
    """``value`` as a count the ledger can store: a number clamped into [0, MAX_CALL_TOKENS]
    (an integer of any kind, numpy's included, or a finite float; NaN, a non-number or a
    negative count reads 0)."""
    if isinstance(value, bool):
        return 0
    try:
        number: int | float = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        if not isinstance(value, float) or value != value:
            return 0
        number = value
    if number >= MAX_CALL_TOKENS:
        return MAX_CALL_TOKENS
    return max(0, int(number))


def _seconds(value: object) -> float:
    """A latency the ledger can store: finite and not negative (NaN or a non-number reads 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return 0.0
    return float(min(value, 1e12))


_LISTENERS: list[Callable[[ModelCall], None]] = []


def add_listener(listener: Callable[[ModelCall], None]) -> None:
    """Hear every model call any obsmem model wrapper in this process finishes (idempotent)."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def remove_listener(listener: Callable[[ModelCall], None]) -> None:
    if listener in _LISTENERS:
        _LISTENERS.remove(listener)


def notify(call: ModelCall, sinks: tuple[Callable[[ModelCall], None], ...] = ()) -> None:
    """Give ``call`` to ``sinks`` and then to the process-wide listeners; never raises."""
    for listener in (*sinks, *_LISTENERS):
        try:
            listener(call)
        except Exception:  # a watcher must never break a model call
            log.exception("a model-call listener failed")


UsageField = Literal["day", "role", "model"]


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Model calls summed over one group: a UTC ``day`` (``YYYY-MM-DD``), a ``role`` and a ``model``.

    A field is ``None`` when the row sums over it (see :meth:`UsageReport.by`). ``latency_s`` is
    the summed latency (divide by ``calls`` for the mean). ``cost_usd`` is the estimate from the
    price table for the calls whose model has a price; ``unpriced_calls`` counts those without one.
    """

    day: str | None = None
    role: str | None = None
    model: str | None = None
    calls: int = 0
    failed: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    def __add__(self, other: UsageRow) -> UsageRow:
        values: dict[str, Any] = {
            name: getattr(self, name) if getattr(self, name) == getattr(other, name) else None for name in _KEYS
        }
        values.update(
            {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name not in _KEYS}
        )
        return UsageRow(**values)


_KEYS: tuple[UsageField, ...] = ("day", "role", "model")


@dataclass(frozen=True, slots=True)
class UsageReport:
    """What the cost ledger holds for a filter: one row per (day, role, model), ordered by them."""

    rows: tuple[UsageRow, ...] = ()

    def total(self) -> UsageRow:
        """Everything summed (every key ``None``)."""
        total = UsageRow()
        for row in self.rows:
            total = total + replace(row, day=None, role=None, model=None)
        return total

    def by(self, *keys: UsageField) -> tuple[UsageRow, ...]:
        """Rows summed over the keys not named, ordered by the named ones (``by("role")``, ``by("day", "role")``)."""
        groups: dict[tuple[str | None, ...], UsageRow] = {}
        for row in self.rows:
            dropped: dict[str, Any] = {key: None for key in _KEYS if key not in keys}
            kept = replace(row, **dropped)
            group = tuple(getattr(kept, key) for key in _KEYS)
            groups[group] = groups[group] + kept if group in groups else kept
        return tuple(groups[group] for group in sorted(groups, key=lambda g: tuple("" if v is None else v for v in g)))
