"""Retries: the transient/permanent table, the backoff schedule, the retry loop and its aborts.

Reference: mastra-behaviour.md §3.14 and §9.8 items 47–51. Every wait goes through a
FakeClock (or a clock that blocks until cancelled), so nothing here really sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import socket
from collections.abc import Callable
from typing import Any, get_args

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import (
    ConfigError,
    DegenerateOutputError,
    IncompleteResponseError,
    MissingCredentialsError,
    ModelOutputError,
    ModelRequestError,
    ModelUnavailableError,
    OperationAbortedError,
)
from obsmem.models.base import ChatModel, ModelResponse
from obsmem.models.retry import (
    FailurePolicy,
    RetryingModel,
    RetryPolicy,
    assert_complete,
    is_transient,
    with_retry,
)
from obsmem.models.testing import ScriptedModel
from obsmem.types import Message

NO_JITTER = RetryPolicy(jitter=0.0)
HELLO = [Message.user("hi")]


def err(message: str = "boom", **attrs: Any) -> Exception:
    """An Exception carrying JS-style attributes (status, code, isRetryable, cause, ...)."""
    error = Exception(message)
    for name, value in attrs.items():
        setattr(error, name, value)
    return error


class AbortError(Exception):
    """Named like the DOM/undici error that signals an aborted request."""


class TypeErrorLike(Exception):
    pass


def caused(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


# --- item 47: transient ---------------------------------------------------------------------

TRANSIENT: list[tuple[str, object]] = [
    ("terminated", err("terminated")),
    ("TypeError: terminated", err("TypeError: terminated")),
    ("undici code", err("other side closed", code="UND_ERR_SOCKET")),
    ("undici headers timeout", err("x", code="UND_ERR_HEADERS_TIMEOUT")),
    ("fetch failed", err("fetch failed")),
    ("ECONNRESET", err("read ECONNRESET")),
    ("ECONNRESET as code", err("x", code="ECONNRESET")),
    ("ECONNREFUSED", err("connect ECONNREFUSED 127.0.0.1:443")),
    ("ENOTFOUND", err("getaddrinfo ENOTFOUND api.example.com")),
    ("EAI_AGAIN", err("getaddrinfo EAI_AGAIN api.example.com")),
    ("socket hang up", err("socket hang up")),
    ("network error", err("Network error while reading body")),
    ("connection closed", err("Connection closed by peer")),
    ("connection reset", err("connection reset by peer")),
    ("request timeout", err("Request timeout")),
    ("request timed out", err("The request timed out.")),
    ("pg timeout", err("Connection terminated due to connection timeout")),
    ("statusCode 500", err(statusCode=500)),
    ("statusCode 502", err(statusCode=502)),
    ("statusCode 429", err(statusCode=429)),
    ("statusCode 408", err(statusCode=408)),
    ("status 425", err(status=425)),
    ("status_code 503", err(status_code=503)),
    ("status 599", err(status=599)),
    ("isRetryable", err("weird", isRetryable=True)),
    ("is_retryable", err("weird", is_retryable=True)),
    ("numeric code 502 (OpenRouter mid-stream)", err("provider error", code=502)),
    ("numeric code 429 (OpenRouter mid-stream)", err("provider error", code=429)),
    ("ModelUnavailableError", ModelUnavailableError("rate limited", status_code=429)),
    ("IncompleteResponseError", IncompleteResponseError("other")),
    ("TimeoutError", TimeoutError()),
    ("ConnectionResetError", ConnectionResetError(104, "Connection reset by peer")),
    ("ConnectionRefusedError", ConnectionRefusedError()),
    ("BrokenPipeError", BrokenPipeError()),
    ("socket.gaierror", socket.gaierror(-3, "Temporary failure in name resolution")),
    ("dict status", {"status": 429}),
    ("dict message", {"message": "fetch failed"}),
    ("dict nested error (OpenRouter body)", {"error": {"code": 502, "message": "upstream"}}),
]


@pytest.mark.parametrize("error", [e for _, e in TRANSIENT], ids=[i for i, _ in TRANSIENT])
def test_transient(error: object) -> None:
    assert is_transient(error) is True


# --- item 48: not transient -----------------------------------------------------------------

NOT_TRANSIENT: list[tuple[str, object]] = [
    ("numeric code 400", err("bad", code=400)),
    ("numeric code 401", err("bad", code=401)),
    ("AbortError", AbortError("This operation was aborted")),
    ("ABORT_ERR code", err("aborted", code="ABORT_ERR")),
    ("undici aborted", err("Request aborted", code="UND_ERR_ABORTED")),
    ("dict AbortError", {"name": "AbortError", "message": "timeout"}),
    ("CancelledError", asyncio.CancelledError()),
    ("OperationAbortedError", OperationAbortedError()),
    ("status 401", err(status=401)),
    ("status 403", err(status=403)),
    ("status 400", err(status=400)),
    ("status 404", err(status=404)),
    ("status 422", err(status=422)),
    ("statusCode 400", err(statusCode=400)),
    ("invalid api key", err("Invalid API key provided")),
    ("schema validation failed", err("Schema validation failed: timeout must be a number")),
    ("isRetryable false beats message", err("socket hang up", isRetryable=False)),
    ("status 400 beats message", err("timeout is not a valid field", status=400)),
    ("ModelRequestError", ModelRequestError("unknown model", status_code=404)),
    ("MissingCredentialsError", MissingCredentialsError("openai", "OPENAI_API_KEY")),
    ("ModelOutputError", ModelOutputError("empty output")),
    ("DegenerateOutputError", DegenerateOutputError("loop")),
    ("plain error", ValueError("nope")),
    ("status 200 is no opinion", err(status=200)),
    ("None", None),
    ("bare string", "fetch failed"),
    ("number", 42),
    ("empty dict", {}),
]


@pytest.mark.parametrize("error", [e for _, e in NOT_TRANSIENT], ids=[i for i, _ in NOT_TRANSIENT])
def test_not_transient(error: object) -> None:
    assert is_transient(error) is False


# --- chains ---------------------------------------------------------------------------------

CHAINS: list[tuple[str, Callable[[], object], bool]] = [
    ("__cause__", lambda: caused(RuntimeError("wrapped"), err(statusCode=503)), True),
    ("__context__", lambda: _with_context(RuntimeError("during handling"), ConnectionResetError()), True),
    (".cause attribute", lambda: err("failed after retries", cause=err("fetch failed")), True),
    (".error attribute", lambda: err("stream error", error=err(code=429)), True),
    ("deep", lambda: err("a", cause=err("b", error=caused(RuntimeError("c"), err("socket hang up")))), True),
    ("dict inside an exception", lambda: err("sdk error", error={"status": 503}), True),
    ("nothing transient anywhere", lambda: err("a", cause=err("b", error=ValueError("c"))), False),
    # nearest opinion wins: asyncio.timeout() raises TimeoutError from a CancelledError
    ("timeout wrapping a cancellation", lambda: caused(TimeoutError(), asyncio.CancelledError()), True),
    ("wrapper of an abort", lambda: caused(RuntimeError("x"), AbortError()), False),
    ("permanent wrapper of a transient", lambda: caused(ModelRequestError("bad"), TimeoutError()), False),
    ("abort nearer than a transient", lambda: err("x", cause=AbortError(), error=err(status=503)), False),
]


def _with_context(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__context__ = inner
    return outer


@pytest.mark.parametrize(("make", "expected"), [(m, e) for _, m, e in CHAINS], ids=[i for i, _, _ in CHAINS])
def test_chains_are_walked_nearest_first(make: Callable[[], object], expected: bool) -> None:
    assert is_transient(make()) is expected


@pytest.mark.parametrize("tail_transient", [False, True])
def test_cycles_terminate(tail_transient: bool) -> None:
    a, b = err("a"), err("b")
    a.__cause__ = b
    b.cause = a  # type: ignore[attr-defined]
    b.error = err("fetch failed") if tail_transient else b  # type: ignore[attr-defined]
    assert is_transient(a) is tail_transient


def test_dict_cycles_terminate() -> None:
    body: dict[str, object] = {"message": "opaque"}
    body["error"] = body
    assert is_transient(body) is False


# --- item 49: the schedule ------------------------------------------------------------------


def test_default_policy() -> None:
    policy = RetryPolicy()
    assert (policy.max_retries, policy.initial_delay_s, policy.factor, policy.max_delay_s, policy.jitter) == (
        8,
        1.0,
        2.0,
        120.0,
        0.2,
    )


def test_default_schedule_is_247_seconds() -> None:
    delays = RetryPolicy().delays()
    assert delays == [1, 2, 4, 8, 16, 32, 64, 120]
    assert sum(delays) == 247
    assert 3 * 60 < sum(delays) < 8 * 60


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (RetryPolicy(max_retries=0), []),
        (RetryPolicy(max_retries=3, initial_delay_s=0.5, factor=3), [0.5, 1.5, 4.5]),
        (RetryPolicy(max_retries=4, initial_delay_s=10, max_delay_s=25), [10, 20, 25, 25]),
        (RetryPolicy(max_retries=3, factor=1), [1, 1, 1]),
        (RetryPolicy(max_retries=2, initial_delay_s=0, max_delay_s=0), [0, 0]),
    ],
)
def test_other_schedules(policy: RetryPolicy, expected: list[float]) -> None:
    assert policy.delays() == expected


@pytest.mark.parametrize(("attempt", "base"), list(enumerate([1, 2, 4, 8, 16, 32, 64, 120], start=1)))
def test_delay_for_without_jitter_is_the_schedule(attempt: int, base: float) -> None:
    assert NO_JITTER.delay_for(attempt) == base


def test_delay_for_past_the_schedule_stays_at_the_cap() -> None:
    assert NO_JITTER.delay_for(5000) == 120


@pytest.mark.parametrize("seed", range(20))
def test_jitter_stays_within_20_percent_and_under_the_cap(seed: int) -> None:
    policy, rng = RetryPolicy(), random.Random(seed)
    for attempt, base in enumerate(policy.delays(), start=1):
        delay = policy.delay_for(attempt, rng)
        assert base * 0.8 <= delay <= min(base * 1.2, 120)


def test_jitter_actually_varies_and_is_reproducible_with_a_seed() -> None:
    policy = RetryPolicy()
    first = [policy.delay_for(3, random.Random(7)) for _ in range(3)]
    assert len(set(first)) == 1
    assert len({policy.delay_for(3, random.Random(seed)) for seed in range(10)}) > 1
    assert 3.2 <= policy.delay_for(3) <= 4.8  # the module-level generator when no rng is given


@pytest.mark.parametrize(
    ("attempt", "retry_after", "expected"),
    [(1, 30, 30), (5, 3, 16), (1, 500, 120), (8, 0, 120)],
)
def test_retry_after_is_a_floor_capped_at_max_delay(
    attempt: int, retry_after: float, expected: float
) -> None:
    assert NO_JITTER.delay_for(attempt, retry_after=retry_after) == expected


def test_delay_for_counts_attempts_from_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        NO_JITTER.delay_for(0)


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"max_retries": -1}, "retry.max_retries"),
        ({"initial_delay_s": -1}, "retry.initial_delay_s"),
        ({"factor": 0.5}, "retry.factor"),
        ({"max_delay_s": 0.5}, "retry.max_delay_s"),
        ({"jitter": -0.1}, "retry.jitter"),
        ({"jitter": 1.0}, "retry.jitter"),
    ],
)
def test_policy_rejects_nonsense(kwargs: dict[str, float], option: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.option == option


# --- item 50: with_retry --------------------------------------------------------------------


def transient(n: int = 0) -> ModelUnavailableError:
    return ModelUnavailableError(f"rate limited #{n}", status_code=429)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("script", "calls", "sleeps", "outcome"),
    [
        pytest.param(["ok"], 1, [], "ok", id="first success"),
        pytest.param([transient(), transient(), "ok"], 3, [1, 2], "ok", id="transient, transient, ok"),
        pytest.param([ModelRequestError("bad request")], 1, [], ModelRequestError, id="non-transient"),
        pytest.param([transient(), ModelRequestError("bad")], 2, [1], ModelRequestError, id="then permanent"),
        pytest.param([AbortError("aborted")], 1, [], AbortError, id="AbortError"),
        pytest.param([IncompleteResponseError("unknown"), "ok"], 2, [1], "ok", id="incomplete"),
    ],
)
async def test_with_retry_table(script: list[Any], calls: int, sleeps: list[float], outcome: Any) -> None:
    model, clock = ScriptedModel(script), FakeClock()

    async def call() -> str:
        return (await model.request(HELLO)).text

    if isinstance(outcome, str):
        assert await with_retry(call, policy=NO_JITTER, clock=clock) == outcome
    else:
        first_error = next(e for e in script if isinstance(e, outcome))
        with pytest.raises(outcome) as caught:
            await with_retry(call, policy=NO_JITTER, clock=clock)
        assert caught.value is first_error  # re-raised unchanged, not wrapped
    assert model.calls == calls
    assert clock.sleeps == sleeps


@pytest.mark.anyio
async def test_persistent_transient_makes_max_retries_plus_one_calls_and_raises_the_last_error() -> None:
    errors = [transient(n) for n in range(9)]
    model, clock = ScriptedModel(errors), FakeClock()
    with pytest.raises(ModelUnavailableError) as caught:
        await with_retry(lambda: model.request(HELLO), policy=NO_JITTER, clock=clock)
    assert caught.value is errors[-1]
    assert model.calls == 9
    assert clock.sleeps == [1, 2, 4, 8, 16, 32, 64, 120]
    assert clock.monotonic() == 247


@pytest.mark.anyio
async def test_jittered_waits_stay_within_20_percent_of_the_schedule() -> None:
    model, clock = ScriptedModel([transient()], repeat_last=True), FakeClock()
    with pytest.raises(ModelUnavailableError):
        await with_retry(lambda: model.request(HELLO), clock=clock, rng=random.Random(1))
    assert len(clock.sleeps) == 8
    for slept, base in zip(clock.sleeps, RetryPolicy().delays(), strict=True):
        assert base * 0.8 <= slept <= min(base * 1.2, 120)
    assert clock.sleeps != RetryPolicy().delays()


@pytest.mark.anyio
@pytest.mark.parametrize(("max_retries", "calls"), [(0, 1), (1, 2), (3, 4)])
async def test_max_retries_bounds_the_calls(max_retries: int, calls: int) -> None:
    model = ScriptedModel([transient()], repeat_last=True)
    with pytest.raises(ModelUnavailableError):
        await with_retry(
            lambda: model.request(HELLO), policy=RetryPolicy(max_retries=max_retries), clock=FakeClock()
        )
    assert model.calls == calls


@pytest.mark.anyio
async def test_retry_after_from_the_error_is_honoured() -> None:
    script: list[Any] = [
        ModelUnavailableError("slow down", status_code=429, retry_after=30),
        ModelUnavailableError("slow down a lot", status_code=429, retry_after=900),
        "ok",
    ]
    model, clock = ScriptedModel(script), FakeClock()
    # without a deadline a wait is clamped to max_delay_s; with one, a retry-after past it fails
    # at once (tests/models/test_hostile_answers.py)
    no_deadline = dataclasses.replace(NO_JITTER, max_total_s=None)
    await with_retry(lambda: model.request(HELLO), policy=no_deadline, clock=clock)
    assert clock.sleeps == [30, 120]


@pytest.mark.anyio
async def test_on_retry_sees_attempt_error_and_delay(caplog: pytest.LogCaptureFixture) -> None:
    errors = [transient(1), transient(2)]
    model = ScriptedModel([*errors, "ok"])
    seen: list[tuple[int, BaseException, float]] = []
    with caplog.at_level(logging.WARNING, logger="obsmem.models.retry"):
        await with_retry(
            lambda: model.request(HELLO),
            policy=NO_JITTER,
            clock=FakeClock(),
            on_retry=lambda *args: seen.append(args),
        )
    assert seen == [(1, errors[0], 1.0), (2, errors[1], 2.0)]
    assert [r.getMessage() for r in caplog.records] == [
        "Transient model error, retry 1 of 8 in 1.0 s: ModelUnavailableError (HTTP 429)",
        "Transient model error, retry 2 of 8 in 2.0 s: ModelUnavailableError (HTTP 429)",
    ]


@pytest.mark.anyio
async def test_an_already_set_abort_makes_no_call() -> None:
    model, abort = ScriptedModel(["ok"]), asyncio.Event()
    abort.set()
    with pytest.raises(OperationAbortedError, match="aborted"):
        await with_retry(lambda: model.request(HELLO), clock=FakeClock(), abort=abort)
    assert model.calls == 0


@pytest.mark.anyio
async def test_abort_before_the_backoff_stops_after_exactly_one_call() -> None:
    model, clock, abort = ScriptedModel([transient(), "ok"]), FakeClock(), asyncio.Event()
    with pytest.raises(OperationAbortedError, match="aborted") as caught:
        await with_retry(
            lambda: model.request(HELLO), clock=clock, abort=abort, on_retry=lambda *_: abort.set()
        )
    assert model.calls == 1
    assert clock.sleeps == []
    assert isinstance(caught.value.__context__, ModelUnavailableError)  # the error being retried


class BlockingClock(FakeClock):
    """A clock whose sleep never ends by itself: only an abort or a cancellation ends it."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeping = asyncio.Event()
        self.cancelled_sleeps = 0

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.sleeping.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled_sleeps += 1
            raise


@pytest.mark.anyio
async def test_abort_during_the_backoff_interrupts_it_after_exactly_one_call() -> None:
    model, clock, abort = ScriptedModel([transient(), "ok"]), BlockingClock(), asyncio.Event()
    task = asyncio.create_task(with_retry(lambda: model.request(HELLO), clock=clock, abort=abort))
    await clock.sleeping.wait()
    abort.set()
    with pytest.raises(OperationAbortedError, match="aborted"):
        await task
    assert model.calls == 1
    assert len(clock.sleeps) == 1
    await asyncio.sleep(0)  # let the interrupted sleep see its cancellation
    assert clock.cancelled_sleeps == 1


@pytest.mark.anyio
async def test_cancelling_during_the_backoff_cancels_the_sleep() -> None:
    model, clock = ScriptedModel([transient(), "ok"]), BlockingClock()
    task = asyncio.create_task(
        with_retry(lambda: model.request(HELLO), clock=clock, abort=asyncio.Event())
    )
    await clock.sleeping.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert model.calls == 1
    assert clock.cancelled_sleeps == 1


@pytest.mark.anyio
async def test_cancelled_error_from_the_call_propagates_immediately() -> None:
    model, clock = ScriptedModel([asyncio.CancelledError(), "ok"]), FakeClock()
    with pytest.raises(asyncio.CancelledError):
        await with_retry(lambda: model.request(HELLO), clock=clock)
    assert model.calls == 1
    assert clock.sleeps == []


@pytest.mark.anyio
async def test_an_abort_never_set_lets_retries_complete() -> None:
    model, clock = ScriptedModel([transient(), "ok"]), FakeClock()
    response = await with_retry(
        lambda: model.request(HELLO), policy=NO_JITTER, clock=clock, abort=asyncio.Event()
    )
    assert response.text == "ok"
    assert clock.sleeps == [1]


# --- item 51: assert_complete ---------------------------------------------------------------


@pytest.mark.parametrize("reason", ["other", "unknown", "content_filter"])
def test_incomplete_finish_is_a_transient_error(reason: Any) -> None:
    with pytest.raises(IncompleteResponseError) as caught:
        assert_complete(ModelResponse(text="half a sen", finish_reason=reason))
    assert caught.value.finish_reason == reason
    assert is_transient(caught.value)


@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls"])
def test_deliberate_finish_is_returned_unchanged(reason: Any) -> None:
    response = ModelResponse(text="done", finish_reason=reason)
    assert assert_complete(response) is response


# --- RetryingModel --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_retrying_model_retries_errors_and_incomplete_responses() -> None:
    inner = ScriptedModel([transient(), ModelResponse(text="cut", finish_reason="other"), "ok"], name="x:y")
    clock = FakeClock()
    model = RetryingModel(inner, NO_JITTER, clock)
    assert isinstance(model, ChatModel)
    assert model.name == "x:y"
    assert (await model.request(HELLO)).text == "ok"
    assert inner.calls == 3
    assert clock.sleeps == [1, 2]
    assert all(messages == HELLO for messages, _ in inner.requests)


@pytest.mark.anyio
async def test_retrying_model_does_not_retry_permanent_errors() -> None:
    inner = ScriptedModel([ModelRequestError("bad key", status_code=401), "ok"])
    clock = FakeClock()
    with pytest.raises(ModelRequestError):
        await RetryingModel(inner, clock=clock).request(HELLO)
    assert inner.calls == 1
    assert clock.sleeps == []


@pytest.mark.anyio
async def test_retrying_model_gives_up_with_the_last_incomplete_response() -> None:
    inner = ScriptedModel([ModelResponse(text="cut", finish_reason="unknown")], repeat_last=True)
    with pytest.raises(IncompleteResponseError):
        await RetryingModel(inner, RetryPolicy(max_retries=2), FakeClock()).request(HELLO)
    assert inner.calls == 3


@pytest.mark.anyio
async def test_retrying_model_honours_its_abort() -> None:
    abort = asyncio.Event()
    abort.set()
    inner = ScriptedModel(["ok"])
    with pytest.raises(OperationAbortedError):
        await RetryingModel(inner, clock=FakeClock(), abort=abort).request(HELLO)
    assert inner.calls == 0


# --- FailurePolicy --------------------------------------------------------------------------


def test_failure_policy_values() -> None:
    assert get_args(FailurePolicy) == ("throw", "warn", "continue")
