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
    RetryPolicy,
    error_detail,
    is_transient,
    parse_retry_after,
    status_error,
    status_verdict,
    with_retry,
)
from obsmem.clock import FakeClock
from obsmem.errors import ModelRequestError, ModelUnavailableError, OperationAbortedError

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
        ModelUnavailableError("way slower", status_code=429, retry_after=900),
        "ok",
    )
    clock = FakeClock()
    await with_retry(call, policy=NO_JITTER, clock=clock)
    assert clock.sleeps == [1.0, 30.0, 120.0]


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
        ("obsmem.test_http", "Transient embeddings request error, retry 1 of 8 in 1.0 s: rate limited")
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
