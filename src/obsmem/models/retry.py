"""Retrying model calls: which errors are worth another try, and how long to wait between tries.

Observer and Reflector calls run in the background of a conversation; a rate limit or a
dropped connection there should cost a delay, not a lost observation. So every such call
goes through :func:`with_retry`. The pieces:

- :func:`is_transient` decides whether an error can heal by itself (rate limit, 5xx, timeout,
  reset connection, incomplete response) or is the caller's problem (bad key, bad request,
  abort). Only transient errors are retried.
- :class:`RetryPolicy` is the schedule: 1, 2, 4 … s, capped at 120 s, ±20 % jitter so that
  many clients hit by the same outage do not retry in lockstep. Eight retries wait about
  four minutes in all, long enough to ride out a typical rate-limit window.
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
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

from obsmem.clock import Clock, SystemClock
from obsmem.errors import (
    ConfigError,
    IncompleteResponseError,
    MissingCredentialsError,
    ModelOutputError,
    ModelRequestError,
    ModelUnavailableError,
    OperationAbortedError,
)
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

# --- classification -------------------------------------------------------------------------

# Substrings of lower-cased error messages (and string error codes) that mean a network or
# server hiccup. "terminated" is how undici reports a connection cut mid-body
# ("TypeError: terminated"); it also covers "connection terminated due to connection timeout".
_TRANSIENT_TEXT = (
    "terminated",
    "fetch failed",
    "econnreset",
    "econnrefused",
    "enotfound",
    "eai_again",
    "socket hang up",
    "network error",
    "timed out",
    "timeout",
    "connection reset",
    "connection closed",
)
# Messages that are permanent even if they happen to contain a transient word
# ("schema validation failed: timeout must be a number").
_PERMANENT_TEXT = ("invalid api key", "schema validation failed")

_TRANSIENT_STATUS = frozenset({408, 425, 429})
_STATUS_FIELDS = ("status", "status_code", "statusCode")
_RETRYABLE_FIELDS = ("is_retryable", "isRetryable")
# Where wrapped errors hide: Python's own chaining, then the JS-style fields that HTTP
# clients and SDK errors use. Explicit causes come before the implicit __context__.
_CHAIN_FIELDS = ("__cause__", "cause", "error", "__context__")


def _field(node: object, name: str) -> object:
    if isinstance(node, Mapping):
        return node.get(name)
    return getattr(node, name, None)


def _status_verdict(status: int) -> bool | None:
    if status in _TRANSIENT_STATUS or 500 <= status <= 599:
        return True
    if 400 <= status <= 499:
        return False
    return None


def _is_abort(node: BaseException | Mapping[object, object]) -> bool:
    if isinstance(node, asyncio.CancelledError | OperationAbortedError):
        return True
    if isinstance(node, Mapping):
        names = [node.get("name")]
    else:
        names = [cls.__name__ for cls in type(node).__mro__]
    # undici reports a request aborted by its signal as an AbortError with this code.
    return "AbortError" in names or _field(node, "code") in ("ABORT_ERR", "UND_ERR_ABORTED")


def _node_verdict(node: BaseException | Mapping[object, object]) -> bool | None:
    """What one error says about itself: True transient, False permanent, None no opinion."""
    if _is_abort(node):
        return False
    if isinstance(node, ModelUnavailableError):  # includes IncompleteResponseError
        return True
    if isinstance(node, ModelRequestError | MissingCredentialsError | ModelOutputError):
        return False
    if isinstance(node, TimeoutError | ConnectionError | socket.gaierror):
        return True
    for name in _RETRYABLE_FIELDS:
        flag = _field(node, name)
        if isinstance(flag, bool):
            return flag
    for name in _STATUS_FIELDS:
        status = _field(node, name)
        if isinstance(status, int) and not isinstance(status, bool):
            verdict = _status_verdict(status)
            if verdict is not None:
                return verdict
    code = _field(node, "code")
    if isinstance(code, int) and not isinstance(code, bool):  # OpenRouter puts HTTP codes here
        verdict = _status_verdict(code)
        if verdict is not None:
            return verdict
    if isinstance(code, str):
        lowered = code.lower()
        if lowered.startswith("und_err_") or any(word in lowered for word in _TRANSIENT_TEXT):
            return True
    message = _field(node, "message") if isinstance(node, Mapping) else str(node)
    if isinstance(message, str):
        lowered = message.lower()
        if any(text in lowered for text in _PERMANENT_TEXT):
            return False
        if any(text in lowered for text in _TRANSIENT_TEXT):
            return True
    return None


def is_transient(error: object) -> bool:
    """Whether retrying the call that raised ``error`` may succeed.

    ``error`` is usually an exception; a plain mapping is read the same way (its keys stand
    for attributes), because provider SDKs and JSON error bodies often carry ``status`` or
    ``code`` in a dict. Anything else (None, a string, a number) is not transient.

    The error and everything it wraps (``__cause__``, ``.cause``, ``.error``,
    ``__context__``; cycles are safe) are examined nearest first, and the first one with an
    opinion decides. Nearest first matters: a ``TimeoutError`` raised by
    :func:`asyncio.timeout` wraps a ``CancelledError`` but is a timeout, not an abort, while a
    generic wrapper around a ``429`` is a rate limit. Per error, in order:

    1. an abort (``CancelledError``, :class:`~obsmem.errors.OperationAbortedError`, a class
       named ``AbortError``, code ``ABORT_ERR``) is never transient: the caller asked to stop;
    2. obsmem's own types: :class:`~obsmem.errors.ModelUnavailableError` (and
       :class:`~obsmem.errors.IncompleteResponseError`) yes; ``ModelRequestError``,
       ``MissingCredentialsError``, ``ModelOutputError`` no. Python's ``TimeoutError``,
       ``ConnectionError`` and ``socket.gaierror`` yes;
    3. an explicit ``is_retryable``/``isRetryable`` flag is believed either way;
    4. an HTTP status in ``status``/``status_code``/``statusCode``, or a numeric ``code``:
       408, 425, 429 and 5xx yes, other 4xx no;
    5. a string ``code`` starting ``UND_ERR_`` (undici) or naming a socket error yes;
    6. the message: "invalid api key" or "schema validation failed" no; otherwise any of
       terminated, fetch failed, ECONNRESET, ECONNREFUSED, ENOTFOUND, EAI_AGAIN, socket hang
       up, network error, timed out, timeout, connection reset/closed yes.

    Nothing with an opinion anywhere in the chain means not transient.
    """
    queue: deque[object] = deque([error])
    seen: set[int] = set()
    while queue:
        node = queue.popleft()
        if id(node) in seen or not isinstance(node, BaseException | Mapping):
            continue
        seen.add(id(node))
        verdict = _node_verdict(node)
        if verdict is not None:
            return verdict
        queue.extend(_field(node, name) for name in _CHAIN_FIELDS)
    return False


# --- schedule -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff: ``initial_delay_s * factor**n``, capped, with multiplicative jitter.

    The defaults wait 1, 2, 4, 8, 16, 32, 64 and 120 s before retries 1 to 8 (247 s before
    jitter), so a call gives up after about four minutes. ``max_delay_s`` is a hard ceiling
    on any single wait, including a provider's ``retry_after`` and the jittered last steps.
    """

    max_retries: int = 8
    initial_delay_s: float = 1.0
    factor: float = 2.0
    max_delay_s: float = 120.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ConfigError("retry.max_retries", f"{self.max_retries} is negative", allowed=">= 0")
        if self.initial_delay_s < 0:
            raise ConfigError("retry.initial_delay_s", f"{self.initial_delay_s} is negative", allowed=">= 0")
        if self.factor < 1:
            raise ConfigError("retry.factor", f"{self.factor} would shrink the delays", allowed=">= 1")
        if self.max_delay_s < self.initial_delay_s:
            raise ConfigError(
                "retry.max_delay_s",
                f"{self.max_delay_s} is below initial_delay_s ({self.initial_delay_s})",
                allowed=">= initial_delay_s",
            )
        if not 0 <= self.jitter < 1:
            raise ConfigError("retry.jitter", f"{self.jitter} is out of range", allowed="0 <= jitter < 1")

    def delays(self) -> list[float]:
        """The wait before each retry, before jitter: one entry per retry."""
        return [self._base_delay(attempt) for attempt in range(1, self.max_retries + 1)]

    def delay_for(
        self, attempt: int, rng: random.Random | None = None, *, retry_after: float | None = None
    ) -> float:
        """The wait before retry number ``attempt`` (1 for the first retry), jittered.

        ``retry_after`` is a delay the provider asked for: the wait is at least that long,
        but never longer than ``max_delay_s``. ``rng`` makes the jitter reproducible; without
        it the module-level :mod:`random` generator is used.
        """
        if attempt < 1:
            raise ValueError(f"attempt counts retries from 1, got {attempt}")
        delay = self._base_delay(attempt)
        if self.jitter:
            uniform = rng.uniform if rng is not None else random.uniform
            delay *= 1 + uniform(-self.jitter, self.jitter)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.max_delay_s)

    def _base_delay(self, attempt: int) -> float:
        # Multiply step by step and stop at the cap, so a large attempt never overflows a float.
        delay = self.initial_delay_s
        for _ in range(attempt - 1):
            if delay >= self.max_delay_s:
                break
            delay *= self.factor
        return min(delay, self.max_delay_s)


# --- the loop -------------------------------------------------------------------------------


async def _backoff(delay: float, clock: Clock, abort: asyncio.Event | None) -> None:
    """Sleep ``delay`` on ``clock``, or raise OperationAbortedError as soon as ``abort`` is set."""
    if abort is None:
        await clock.sleep(delay)
        return
    if abort.is_set():
        raise OperationAbortedError("retrying model call")
    sleeper = asyncio.ensure_future(clock.sleep(delay))
    watcher = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait((sleeper, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:  # also on our own cancellation: leave no task behind
        sleeper.cancel()
        watcher.cancel()
    if abort.is_set():
        raise OperationAbortedError("retrying model call")
    sleeper.result()  # a clock that failed fails the retry loop too


_COMPLETE_FINISH_REASONS = frozenset({"stop", "length", "tool_calls"})


def _retry_after(error: BaseException) -> float | None:
    return error.retry_after if isinstance(error, ModelUnavailableError) else None


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

    - A non-transient error (see :func:`is_transient`) is re-raised at once, unchanged.
    - When retries run out, the *last* error is re-raised, so the caller sees the most
      recent state of the provider.
    - ``abort``, when set, stops the loop: before the first call (no call is made) or during
      a backoff wait (the wait is cut short) with :class:`~obsmem.errors.OperationAbortedError`.
      A call already in flight is not interrupted by ``abort``; cancel the task for that.
    - ``asyncio.CancelledError`` (and any other ``BaseException``) is never caught.
    - ``on_retry(attempt, error, delay)`` runs before each wait, ``attempt`` counting
      retries from 1; every retry is also logged at WARNING on ``obsmem.models.retry``.
    """
    clock = clock if clock is not None else SystemClock()
    if abort is not None and abort.is_set():
        raise OperationAbortedError("retrying model call")
    attempt = 0
    while True:
        try:
            return await call()
        except Exception as error:
            attempt += 1
            if attempt > policy.max_retries or not is_transient(error):
                raise
            delay = policy.delay_for(attempt, rng, retry_after=_retry_after(error))
            logger.warning(
                "Transient model error, retry %d of %d in %.1f s: %s",
                attempt,
                policy.max_retries,
                delay,
                error,
            )
            if on_retry is not None:
                on_retry(attempt, error, delay)
            await _backoff(delay, clock, abort)


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
