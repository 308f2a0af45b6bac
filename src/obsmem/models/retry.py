"""Retrying model calls: which errors are worth another try, and how long to wait between tries.

Observer and Reflector calls run in the background of a conversation; a rate limit or a
dropped connection there should cost a delay, not a lost observation. So every such call
goes through :func:`with_retry`. The pieces:

- :func:`is_transient` decides whether an error can heal by itself (rate limit, 5xx, timeout,
  reset connection, incomplete response) or is the caller's problem (bad key, bad request,
  abort). Only transient errors are retried.
- :class:`RetryPolicy` is the schedule: 1, 2, 4 … s, capped at 120 s, ±20 % jitter so that
  many clients hit by the same outage do not retry in lockstep. Eight retries wait about
  four minutes in all, long enough to ride out a typical rate-limit window, and no wait ends
  past the policy's deadline (``max_total_s``, 300 s): a ``retry-after`` that would cross it
  fails at once. A connection refused by a server on this machine is retried once, not for
  minutes (``local_refused_retries``); one refused by a remote host three times.

Those two and the loop itself live in :mod:`obsmem._http`, shared with the embedders; they
are re-exported here, where model code has always found them.
- :func:`assert_complete` turns a response that stopped for no good reason (finish reason
  ``content_filter``/``other``/``unknown``, typically a stream cut mid-way) into a transient error.
- :class:`RetryingModel` packages all of it as a :class:`~obsmem.models.base.ChatModel`
  wrapper, so vendor adapters never contain retry loops.

Waiting goes through an injected :class:`~obsmem.clock.Clock`: with
:class:`~obsmem.clock.FakeClock` a full eight-retry schedule runs in milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from obsmem import _http
from obsmem._http import RetryPolicy, is_transient
from obsmem.clock import Clock
from obsmem.errors import IncompleteResponseError
from obsmem.models.base import ChatModel, ModelRequest, ModelResponse, WrapperModel
from obsmem.types import Message

__all__ = [
    "FailurePolicy",
    "RetryPolicy",
    "RetryingModel",
    "assert_complete",
    "is_transient",
    "with_retry",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

FailurePolicy = Literal["throw", "warn", "continue"]
"""What a failed *synchronous* observation does to the caller's turn (after retries ran out).

- ``"throw"`` (the reference default): the error propagates out of the turn, so the caller sees that
  memory could not keep up instead of silently growing an unobserved context.
- ``"warn"``: the error is logged; the messages stay pending (unobserved, retried by the
  next cycle) and the turn continues.
- ``"continue"``: like ``"warn"`` but silent, for callers that track failures through hooks.

Background (buffered) observation never surfaces errors whatever the policy: it records a
failed marker and the next cycle tries again.
"""

# --- the loop -------------------------------------------------------------------------------


async def with_retry(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy = RetryPolicy(),
    clock: Clock | None = None,
    abort: asyncio.Event | None = None,
    rng: random.Random | None = None,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
) -> T:
    """Await ``call()`` until it succeeds, retrying transient errors on ``policy``'s schedule.

    The loop is :func:`obsmem._http.with_retry`, shared with the embedders:

    - A non-transient error (see :func:`is_transient`) is re-raised at once, unchanged.
    - When retries run out, the *last* error is re-raised, so the caller sees the most
      recent state of the provider; a refused connection runs out sooner (once for a local
      server, see :class:`RetryPolicy`).
    - No wait ends past ``policy.max_total_s``: the loop raises
      :class:`~obsmem.errors.ModelUnavailableError` at once instead.
    - ``abort``, when set, stops the loop: before the first call (no call is made) or during
      a backoff wait (the wait is cut short) with :class:`~obsmem.errors.OperationAbortedError`.
      A call already in flight is not interrupted by ``abort``; cancel the task for that.
    - ``asyncio.CancelledError`` (and any other ``BaseException``) is never caught.
    - ``on_retry(attempt, error, delay)`` runs before each wait, ``attempt`` counting
      retries from 1; every retry is also logged at WARNING on ``obsmem.models.retry``.
    """
    return await _http.with_retry(
        call, policy=policy, clock=clock, abort=abort, rng=rng, on_retry=on_retry, logger=logger
    )


_COMPLETE_FINISH_REASONS = frozenset({"stop", "length", "tool_calls"})



def assert_complete(response: ModelResponse) -> ModelResponse:
    """Return ``response`` if it ended deliberately; otherwise raise a transient error.

    ``stop`` and ``length`` are the model's own endings and ``tool_calls`` is a complete
    answer to a request that offered tools; they are returned unchanged. Anything else
    (``content_filter``, ``other``, ``unknown`` — typically a stream cut mid-way or a filter
    tripped by a sampling accident) raises :class:`~obsmem.errors.IncompleteResponseError`,
    which is transient: the same request normally succeeds when repeated, and a persistent
    filter still surfaces once the retries run out.
    """
    if response.finish_reason not in _COMPLETE_FINISH_REASONS:
        raise IncompleteResponseError(response.finish_reason)
    return response


class RetryingModel(WrapperModel):
    """A :class:`~obsmem.models.base.ChatModel` that retries the model it wraps.

    Each request is attempted with :func:`with_retry`; an incomplete response counts as a
    transient failure (:func:`assert_complete`). ``abort`` applies to every request made
    through this wrapper.
    """

    def __init__(
        self,
        wrapped: ChatModel,
        policy: RetryPolicy = RetryPolicy(),
        clock: Clock | None = None,
        abort: asyncio.Event | None = None,
    ) -> None:
        super().__init__(wrapped)
        self.policy = policy
        self.clock = clock
        self.abort = abort

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        async def attempt() -> ModelResponse:
            return assert_complete(await self.wrapped.request(messages, settings))

        return await with_retry(attempt, policy=self.policy, clock=self.clock, abort=self.abort)
