"""The provider-independent pieces: SSE framing, retry-after parsing, error-body details, status mapping."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from obsmem._http import RefusedConnection
from obsmem.errors import ModelRequestError, ModelUnavailableError
from obsmem.models.retry import is_transient
from obsmem.models.sse import ServerSentEvent, parse_sse
from obsmem.models.transport import (
    Endpoint,
    HttpCaller,
    _transport_error,
    error_detail,
    parse_retry_after,
    status_error,
)

ENDPOINT = Endpoint("groq", "https://api.groq.com/openai/v1", {}, "GROQ_API_KEY")


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


@pytest.mark.anyio
async def test_sse_framing() -> None:
    lines = [
        ": keep-alive",
        "",
        "event: delta",
        'data: {"a":',
        "data: 1}\r",
        "id: 7",
        "",
        "data:[DONE]",
        "",
        "data: half",
    ]
    events = [event async for event in parse_sse(_lines(*lines))]
    # the unterminated last event is a cut stream and is not emitted
    assert events == [ServerSentEvent("delta", '{"a":\n1}'), ServerSentEvent("message", "[DONE]")]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "20"}, 20.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(datetime(2026, 1, 1, 12, 0, 45, tzinfo=UTC), usegmt=True)
    assert parse_retry_after({"retry-after": header}, now=now.timestamp()) == 45.0


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"error": {"message": "Rate limit reached for gpt-4o"}}', "Rate limit reached for gpt-4o"),
        (b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}', "Overloaded"),
        (b'{"detail": "Not Found"}', "Not Found"),
        (b'{"error": "model not loaded"}', "model not loaded"),
        (b"<html><body>502 Bad Gateway</body></html>", None),
    ],
)
def test_error_detail_reads_json_bodies_only(body: bytes, detail: str | None) -> None:
    assert error_detail(body) == detail


@pytest.mark.parametrize(
    ("status", "kind", "transient"),
    [
        (400, ModelRequestError, False),
        (401, ModelRequestError, False),
        (404, ModelRequestError, False),
        (408, ModelUnavailableError, True),
        (429, ModelUnavailableError, True),
        (500, ModelUnavailableError, True),
        (529, ModelUnavailableError, True),
    ],
)
def test_status_mapping(status: int, kind: type[Exception], transient: bool) -> None:
    error = status_error(ENDPOINT, status, {"retry-after": "3"}, b"<html>")
    assert type(error) is kind
    assert is_transient(error) is transient
    assert f"HTTP {status}" in str(error) and "<html>" not in str(error)
    if status == 401:
        assert "GROQ_API_KEY" in str(error)
    if isinstance(error, ModelUnavailableError):
        assert error.retry_after == 3.0


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_refused_connection_to_this_machine_is_a_local_refusal(host: str) -> None:
    base_url = f"http://{host}:{_closed_port()}/v1"
    caller = HttpCaller(Endpoint("ollama", base_url, {}, None))
    with pytest.raises(ModelUnavailableError) as caught:
        await caller.post_json("chat/completions", {}, timeout_s=5)
    error = caught.value
    refusal = error.__cause__
    assert isinstance(refusal, RefusedConnection)
    assert (refusal.host, refusal.local) == (host, True)
    assert isinstance(refusal.__cause__, httpx.ConnectError), "the client's own error is kept"
    assert is_transient(error)
    assert f"connection failed at {base_url}" in str(error)
    assert "start the model server" in str(error)


def test_a_refused_remote_connection_is_not_local() -> None:
    refused = httpx.ConnectError("All connection attempts failed")
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    error = _transport_error(ENDPOINT, refused, 5.0)
    assert type(error) is ModelUnavailableError
    assert isinstance(error.__cause__, RefusedConnection)
    assert (error.__cause__.host, error.__cause__.local) == ("api.groq.com", False)
    assert "check that the server is reachable" in str(error)


def test_other_connection_failures_are_caused_by_the_client_error() -> None:
    failure = httpx.ConnectError("Name or service not known")
    error = _transport_error(ENDPOINT, failure, 5.0)
    assert type(error) is ModelUnavailableError and error.__cause__ is failure
    assert "connection failed" in str(error)
