"""A model wrapper that reports every call it forwards: the cost ledger's and tracing's source.

:class:`MeteredModel` times each ``request`` on a monotonic clock and, success or failure, gives a
:class:`~obsmem.calls.ModelCall` to its sinks (the cost ledger) and to the process-wide listeners
(:func:`obsmem.calls.add_listener`, e.g. OpenTelemetry) through :func:`obsmem.calls.notify`.
Whom the call was for comes from :func:`obsmem.calls.current_scope`, which the engine's roles, the
knowledge agents and the worker set around their work; the wrapper's own ``role`` names the call
when the scope names none. Tokens are the provider's usage (cached and cache-write tokens
included). No text of any message is recorded.

Offline roles (the deterministic observer and reflector, the offline knowledge rules) make no
model call, so nothing wraps them and they leave no ledger row.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from datetime import UTC, datetime

from obsmem.calls import CallOutcome, ModelCall, current_scope, notify
from obsmem.models.base import ChatModel, ModelRequest, ModelResponse, Usage, WrapperModel
from obsmem.models.tiers import ModelByInputTokens
from obsmem.types import Message

__all__ = ["CallSink", "MeteredModel", "metered", "outcome_of"]

CallSink = Callable[[ModelCall], None]


def outcome_of(exc: BaseException) -> CallOutcome:
    """How a call that raised ``exc`` ended: ``cancelled``, ``timeout`` or ``error``."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower():
        return "timeout"
    return "error"


class MeteredModel(WrapperModel):
    """``wrapped``, reporting one :class:`ModelCall` per request to ``sinks`` and the listeners."""

    def __init__(self, wrapped: ChatModel, *, role: str, sinks: tuple[CallSink, ...] = ()) -> None:
        super().__init__(wrapped)
        self.role = role
        self.sinks = sinks

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        started_at = datetime.now(UTC)
        start = time.monotonic()
        try:
            response = await self.wrapped.request(messages, settings)
        except BaseException as exc:
            self._report(started_at, start, Usage(), outcome_of(exc), type(exc).__name__, None)
            raise
        self._report(started_at, start, response.usage, "ok", None, response.finish_reason)
        return response

    def _report(
        self, started_at: datetime, start: float, usage: Usage, outcome: CallOutcome, error_type: str | None,
        finish_reason: str | None,
    ) -> None:
        scope = current_scope()
        call = ModelCall(
            role=scope.role or self.role, model=self.name, started_at=started_at,
            latency_s=max(0.0, time.monotonic() - start), outcome=outcome, kind="chat", thread_id=scope.thread_id,
            resource_id=scope.resource_id, operation=scope.operation, input_tokens=usage.input_tokens,
            cached_input_tokens=usage.cached_input_tokens, cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens, finish_reason=finish_reason, error_type=error_type,
        )
        notify(call, self.sinks)


def metered(chat: ChatModel, *, role: str, sinks: tuple[CallSink, ...] = ()) -> ChatModel:
    """``chat`` metered; for tiers (:class:`ModelByInputTokens`) each tier is metered, so a row
    names the tier's model (the one that was billed), and the tiers object keeps its name. A model
    metered already is not metered twice: a copy of it reports to ``sinks`` too."""
    if isinstance(chat, MeteredModel):  # metered already (by the application): add the sinks it lacks
        extra = tuple(sink for sink in sinks if sink not in chat.sinks)
        return MeteredModel(chat.wrapped, role=chat.role, sinks=chat.sinks + extra) if extra else chat
    if isinstance(chat, ModelByInputTokens):
        tiers = copy.copy(chat)
        tiers.tiers = tuple((bound, metered(model, role=role, sinks=sinks)) for bound, model in chat.tiers)
        return tiers
    return MeteredModel(chat, role=role, sinks=sinks)
