"""_http: the status table, retry-after, error bodies and the one retry loop (models and embeddings)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from obsmem import _http
from obsmem._http import (
    RefusedConnection,
    RetryPolicy,
    error_detail,
    is_loopback_host,
    is_transient,
    parse_retry_after,
    refused_connection,
    status_error,
    status_verdict,
    with_retry,
)
from obsmem.clock import FakeClock
from obsmem.errors import ConfigError, ModelRequestError, ModelUnavailableError, OperationAbortedError

NO_JITTER = RetryPolicy(jitter=0.0)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, None),
        (304, None),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (408, True),
        (409, True),
        (422, False),
        (425, True),
        (429, True),
        (499, False),
        (500, True),
        (503, True),
        (599, True),
        (600, None),
    ],
)
def test_status_verdict(status: int, verdict: bool | None) -> None:
    assert status_verdict(status) is verdict


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (401, ModelRequestError, "key"),
        (403, ModelRequestError, "key"),
        (400, ModelRequestError, "refused"),
        (404, ModelRequestError, "refused"),
        (408, ModelUnavailableError, "transient"),
        (409, ModelUnavailableError, "transient"),
        (425, ModelUnavailableError, "transient"),
        (429, ModelUnavailableError, "transient"),
        (500, ModelUnavailableError, "transient"),
        (529, ModelUnavailableError, "transient"),
        (600, ModelUnavailableError, "transient"),  # anything from 500 up is the server's trouble
    ],
)
def test_status_error_table(status: int, kind: type[Exception], message: str) -> None:
    error = status_error(
        status, {"retry-after": "7"}, transient="transient", key_refused="key", refused="refused"
    )
    assert type(error) is kind
    assert str(error) == message
    assert error.status_code == status  # type: ignore[attr-defined]
    assert is_transient(error) is (kind is ModelUnavailableError)
    if isinstance(error, ModelUnavailableError):
        assert error.retry_after == 7.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "20"}, 20.0),
        ({"Retry-After": "3"}, 3.0),  # a plain dict is read without regard to case
        ({"RETRY-AFTER-MS": "250"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "-5", "retry-after": "9"}, 9.0),  # a nonsense ms value falls back
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past: no wait
        ({"retry-after": "-3"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(datetime(2026, 1, 1, 12, 0, 45, tzinfo=UTC), usegmt=True)
    assert parse_retry_after({"Retry-After": header}, now=now.timestamp()) == 45.0


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"error": {"message": "Rate limit reached"}}', "Rate limit reached"),
        (b'{"detail": "Not Found"}', "Not Found"),
        (b'{"error": "model not loaded"}', "model not loaded"),
        (b'{"error": {"error": {"message": "deep"}}}', "deep"),
        (b'{"error": {"code": 5}}', None),
        (b"<html>502 Bad Gateway</html>", None),
        (b'"just a string"', "just a string"),
        (b"[1, 2]", None),
        ('{"message": "' + "x" * 400 + '"}', "x" * 300),
    ],
)
def test_error_detail(body: str | bytes, detail: str | None) -> None:
    assert error_detail(body) == detail


def scripted(*outcomes: object) -> tuple[Callable[[], Awaitable[str]], list[int]]:
    """A call that raises or returns each outcome in turn, and a counter of calls."""
    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return str(outcome)

    return call, calls


@pytest.mark.anyio
async def test_the_loop_retries_transient_errors_on_the_schedule() -> None:
    call, calls = scripted(ModelUnavailableError("a"), TimeoutError(), ConnectionRefusedError(), "ok")
    clock = FakeClock()
    assert await with_retry(call, policy=NO_JITTER, clock=clock) == "ok"
    assert clock.sleeps == [1.0, 2.0, 4.0]
    assert len(calls) == 4


@pytest.mark.anyio
async def test_the_loop_honours_retry_after_as_a_floor_within_the_cap() -> None:
    call, _ = scripted(
        ModelUnavailableError("slow", status_code=429, retry_after=0.1),
        ModelUnavailableError("slower", status_code=429, retry_after=30),
        ModelUnavailableError("way slower", status_code=429, retry_after=200),
        "ok",
    )
    clock = FakeClock()
    await with_retry(call, policy=NO_JITTER, clock=clock)
    assert clock.sleeps == [1.0, 30.0, 120.0]  # 200 s fits the 300 s deadline: capped at max_delay_s


@pytest.mark.anyio
async def test_a_retry_after_past_the_deadline_fails_at_once_without_waiting() -> None:
    call, calls = scripted(ModelUnavailableError("way slower", status_code=429, retry_after=900), "ok")
    clock = FakeClock()
    with pytest.raises(ModelUnavailableError, match="asked to wait 900 s"):
        await with_retry(call, policy=NO_JITTER, clock=clock)
    assert clock.sleeps == [] and len(calls) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_the_loop_does_not_retry_a_refused_request(status: int) -> None:
    refused = ModelRequestError("no", status_code=status)
    call, calls = scripted(refused, "ok")
    clock = FakeClock()
    with pytest.raises(ModelRequestError) as caught:
        await with_retry(call, clock=clock)
    assert caught.value is refused
    assert len(calls) == 1 and clock.sleeps == []


@pytest.mark.anyio
async def test_the_loop_reraises_the_last_error_when_retries_run_out() -> None:
    errors = [ModelUnavailableError(f"#{i}", status_code=503) for i in range(3)]
    call, calls = scripted(*errors)
    with pytest.raises(ModelUnavailableError) as caught:
        await with_retry(call, policy=RetryPolicy(max_retries=2, jitter=0.0), clock=FakeClock())
    assert caught.value is errors[2]
    assert len(calls) == 3


@pytest.mark.anyio
async def test_the_loop_logs_on_the_given_logger_and_names_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    call, _ = scripted(ModelUnavailableError("rate limited"), "ok")
    log = logging.getLogger("obsmem.test_http")
    with caplog.at_level(logging.WARNING, logger="obsmem.test_http"):
        await with_retry(call, policy=NO_JITTER, clock=FakeClock(), what="embeddings request", logger=log)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("obsmem.test_http", "Transient embeddings request error, retry 1 of 8 in 1.0 s: ModelUnavailableError")
    ]


@pytest.mark.anyio
async def test_the_loop_logs_on_its_own_logger_by_default(caplog: pytest.LogCaptureFixture) -> None:
    call, _ = scripted(ModelUnavailableError("rate limited"), "ok")
    with caplog.at_level(logging.WARNING, logger="obsmem._http"):
        await with_retry(call, policy=NO_JITTER, clock=FakeClock())
    assert [r.name for r in caplog.records] == ["obsmem._http"]
    assert caplog.records[0].getMessage().startswith("Transient model error, retry 1 of 8")


@pytest.mark.anyio
async def test_an_abort_names_what_was_retried() -> None:
    abort = asyncio.Event()
    abort.set()
    call, calls = scripted("ok")
    with pytest.raises(OperationAbortedError, match="retrying embeddings request"):
        await with_retry(call, clock=FakeClock(), abort=abort, what="embeddings request")
    assert calls == []


# --- the deadline: no wait ends past RetryPolicy.max_total_s (issue 12, item 6) -----------------


def rate_limited(retry_after: float | None = None) -> ModelUnavailableError:
    return ModelUnavailableError("rate limited", status_code=429, retry_after=retry_after)


def test_the_default_policy_has_a_deadline_and_refused_connection_allowances() -> None:
    policy = RetryPolicy()
    assert (policy.max_total_s, policy.local_refused_retries, policy.remote_refused_retries) == (300.0, 1, 3)
    # the default schedule fits inside the deadline even at the top of its jitter
    assert sum(min(d * 1.2, policy.max_delay_s) for d in policy.delays()) < 300


@pytest.mark.anyio
async def test_a_retry_after_longer_than_the_budget_left_fails_at_once() -> None:
    first, second = rate_limited(20), rate_limited(20)
    call, calls = scripted(first, second, "ok")
    clock = FakeClock()
    with pytest.raises(ModelUnavailableError) as caught:
        await with_retry(call, policy=RetryPolicy(max_total_s=30, jitter=0.0), clock=clock)
    assert clock.sleeps == [20.0], "the second 20 s wait would end at 40 s: never started"
    assert len(calls) == 2
    error = caught.value
    assert error.__cause__ is second
    assert (error.status_code, error.retry_after) == (429, 20)
    assert "asked to wait 20 s" in str(error) and "deadline of 30 s" in str(error)


@pytest.mark.anyio
async def test_the_backoff_schedule_stops_at_the_deadline() -> None:
    call, calls = scripted(*[rate_limited() for _ in range(9)])
    clock = FakeClock()
    with pytest.raises(ModelUnavailableError, match="next wait is 16 s"):
        await with_retry(call, policy=RetryPolicy(max_total_s=20, jitter=0.0), clock=clock)
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0]  # 15 s; 16 more would end at 31 s
    assert len(calls) == 5


@pytest.mark.anyio
async def test_time_spent_in_the_attempts_counts_against_the_deadline() -> None:
    clock = FakeClock()
    calls = 0

    async def slow_call() -> str:
        nonlocal calls
        calls += 1
        clock.advance(25)  # the attempt itself ran 25 s before failing
        raise rate_limited()

    with pytest.raises(ModelUnavailableError, match="Gave up"):
        await with_retry(slow_call, policy=RetryPolicy(max_total_s=60, jitter=0.0), clock=clock)
    # attempt 0-25 s, wait to 26 s, attempt 26-51 s, wait to 53 s, attempt 53-78 s: past the
    # deadline, so the next wait is not started; the last attempt began before it
    assert calls == 3 and clock.sleeps == [1.0, 2.0]
    assert clock.monotonic() <= 60 + 25


@pytest.mark.anyio
async def test_no_deadline_keeps_the_whole_schedule() -> None:
    call, calls = scripted(*[rate_limited(100) for _ in range(4)])
    clock = FakeClock()
    with pytest.raises(ModelUnavailableError) as caught:
        await with_retry(call, policy=RetryPolicy(max_retries=3, max_total_s=None, jitter=0.0), clock=clock)
    assert clock.sleeps == [100.0, 100.0, 100.0]
    assert str(caught.value) == "rate limited", "running out of retries re-raises the last error"


@pytest.mark.parametrize(
    ("policy", "timeout", "bound"),
    [
        (RetryPolicy(), 0.0, 300.0),
        (RetryPolicy(), 600.0, 900.0),
        (RetryPolicy(max_total_s=None), 0.0, 8 * 120.0),
        (RetryPolicy(max_total_s=None), 10.0, 8 * 120.0 + 9 * 10.0),
        (RetryPolicy(max_retries=2, max_total_s=1000), 5.0, 2 * 120.0 + 3 * 5.0),
        (RetryPolicy(max_retries=0), 7.0, 7.0),
    ],
)
def test_worst_case_is_the_documented_bound(policy: RetryPolicy, timeout: float, bound: float) -> None:
    assert policy.worst_case_s(timeout) == bound


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"max_total_s": -1.0}, "retry.max_total_s"),
        ({"max_total_s": float("nan")}, "retry.max_total_s"),
        ({"local_refused_retries": -1}, "retry.local_refused_retries"),
        ({"remote_refused_retries": -2}, "retry.remote_refused_retries"),
    ],
)
def test_the_new_options_refuse_nonsense(kwargs: dict[str, float], option: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.option == option


# --- refused connections ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("localhost", True),
        ("LOCALHOST.", True),
        ("ollama.localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", True),
        ("api.openai.com", False),
        ("10.0.0.5", False),
        ("192.168.1.20", False),
        ("localhost.example.com", False),
        ("", False),
    ],
)
def test_is_loopback_host(host: str, local: bool) -> None:
    assert is_loopback_host(host) is local


def test_refused_connection_is_found_anywhere_in_the_chain() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")
        except OSError as os_error:
            raise OSError("All connection attempts failed") from os_error
    except OSError as wrapped:
        outer = ModelUnavailableError("connection failed")
        outer.__cause__ = wrapped
    assert refused_connection(outer)
    assert not refused_connection(ModelUnavailableError("connection reset"))
    assert not refused_connection(TimeoutError())


def refused(local: bool) -> ModelUnavailableError:
    """What a transport raises for a refused connection: unavailable, from a RefusedConnection."""
    error = ModelUnavailableError("connection failed (connection refused)")
    error.__cause__ = RefusedConnection("127.0.0.1" if local else "api.example.com", local=local)
    return error


def test_a_refused_connection_is_an_os_error_naming_the_host() -> None:
    refusal = RefusedConnection("127.0.0.1", local=True)
    assert isinstance(refusal, ConnectionRefusedError) and refused_connection(refusal)
    assert "127.0.0.1" in str(refusal) and "this machine" in str(refusal)


@pytest.mark.anyio
@pytest.mark.parametrize(("local", "calls_made", "sleeps"), [(True, 2, [1.0]), (False, 4, [1.0, 2.0, 4.0])])
async def test_a_refused_connection_has_its_own_small_allowance(
    local: bool, calls_made: int, sleeps: list[float]
) -> None:
    errors = [refused(local) for _ in range(9)]
    call, calls = scripted(*errors)
    clock = FakeClock()
    with pytest.raises(ModelUnavailableError) as caught:
        await with_retry(call, policy=NO_JITTER, clock=clock)
    assert caught.value is errors[calls_made - 1], "the last refusal is re-raised unchanged"
    assert is_transient(caught.value)
    assert len(calls) == calls_made and clock.sleeps == sleeps


@pytest.mark.anyio
async def test_a_server_that_comes_up_after_one_refusal_is_reached() -> None:
    call, calls = scripted(refused(True), "ok")
    assert await with_retry(call, policy=NO_JITTER, clock=FakeClock()) == "ok"
    assert len(calls) == 2


@pytest.mark.anyio
async def test_a_refusal_wrapped_once_more_is_still_a_refusal() -> None:
    def wrapped() -> RuntimeError:
        outer = RuntimeError("the SDK failed")
        outer.__cause__ = refused(True)
        return outer

    call, calls = scripted(*[wrapped() for _ in range(5)])
    with pytest.raises(RuntimeError):
        await with_retry(call, policy=NO_JITTER, clock=FakeClock())
    assert len(calls) == 2


@pytest.mark.anyio
async def test_refusals_never_exceed_max_retries() -> None:
    call, calls = scripted(*[refused(False) for _ in range(5)])
    with pytest.raises(ModelUnavailableError):
        await with_retry(call, policy=RetryPolicy(max_retries=1, jitter=0.0), clock=FakeClock())
    assert len(calls) == 2


def test_models_retry_names_are_the_shared_ones() -> None:
    from obsmem.models import retry

    assert retry.RetryPolicy is _http.RetryPolicy
    assert retry.is_transient is _http.is_transient


def test_the_shared_pieces_load_no_http_client_and_no_numpy() -> None:
    """Importing obsmem (and the foundation modules models and embeddings share) stays light."""
    code = (
        "import sys, obsmem, obsmem._http, obsmem.profiles, obsmem.models.retry, obsmem.tokens; "
        "print(sorted(m for m in ('httpx', 'numpy') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
