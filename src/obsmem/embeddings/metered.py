"""An embedder wrapper that reports every ``embed`` call, like :mod:`obsmem.models.metered` for chat.

Each call becomes a :class:`~obsmem.calls.ModelCall` of kind ``embedding`` (role from
:func:`obsmem.calls.current_scope`, else the wrapper's ``role``; ``model`` is the embedder's
``name``), given to the sinks and the process-wide listeners, success or failure. The embedding
port reports no usage, so ``input_tokens`` is ``count_tokens`` summed over the texts when given
(an estimate), else 0. No text is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from obsmem.calls import CallOutcome, ModelCall, current_scope, notify
from obsmem.embeddings.base import Embedder, EmbeddingMatrix

__all__ = ["MeteredEmbedder"]


def _outcome(exc: BaseException) -> CallOutcome:
    import asyncio

    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower():
        return "timeout"
    return "error"


class MeteredEmbedder:
    """``wrapped`` (same ``name`` and ``dimensions``), reporting one call per ``embed``."""

    def __init__(
        self,
        wrapped: Embedder,
        *,
        role: str = "embedding",
        sinks: tuple[Callable[[ModelCall], None], ...] = (),
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.wrapped = wrapped
        self.name = wrapped.name
        self.dimensions = wrapped.dimensions
        self.role = role
        self.sinks = sinks
        self.count_tokens = count_tokens

    def __getattr__(self, name: str) -> object:  # anything else the wrapped embedder offers
        return getattr(self.wrapped, name)

    async def embed(self, texts: Sequence[str]) -> EmbeddingMatrix:
        started_at = datetime.now(UTC)
        start = time.monotonic()
        outcome: CallOutcome = "ok"
        error_type: str | None = None
        try:
            return await self.wrapped.embed(texts)
        except BaseException as exc:
            outcome, error_type = _outcome(exc), type(exc).__name__
            raise
        finally:
            scope = current_scope()
            tokens = sum(self.count_tokens(text) for text in texts) if self.count_tokens is not None else 0
            notify(ModelCall(
                role=scope.role or self.role, model=self.name, started_at=started_at,
                latency_s=max(0.0, time.monotonic() - start), outcome=outcome, kind="embedding",
                thread_id=scope.thread_id, resource_id=scope.resource_id, operation=scope.operation,
                input_tokens=tokens, error_type=error_type,
            ), self.sinks)
