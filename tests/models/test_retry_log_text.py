"""A retry's WARNING names the error's type and status, never its text.

Found by a hostile review: the retry loop logged ``redact_secrets(error)`` at WARNING. A
provider's error message often quotes the request (gateways, content filters: "upstream
overloaded while processing: <the user's message>") or the key ("Incorrect API key provided:
sk-proj-…"), and ``redact_secrets`` masks URL passwords and ``key=value`` pairs only. The README
("Logging"): a record at INFO or above holds ids, counts and error types, never a message's text;
the full error text is logged at DEBUG. On main the WARNING carried both the user's PIN and the key.
"""

from __future__ import annotations

import logging

import pytest

from obsmem.clock import FakeClock
from obsmem.errors import ModelUnavailableError
from obsmem.models.retry import RetryPolicy, with_retry

pytestmark = pytest.mark.anyio

TEXT = "upstream overloaded while processing: my bank PIN is 4417-QUOKKA; Incorrect API key provided: sk-proj-AbC123xyz"


async def test_a_retry_warning_holds_no_error_text(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ModelUnavailableError(TEXT, status_code=503)
        return "ok"

    with caplog.at_level(logging.DEBUG, logger="obsmem.models.retry"):  # its own level, whatever another test set
        assert await with_retry(call, policy=RetryPolicy(jitter=0.0), clock=FakeClock()) == "ok"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ["Transient model error, retry 1 of 8 in 1.0 s: ModelUnavailableError (HTTP 503)"]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("4417-QUOKKA" in m for m in debug), "the full text stays at DEBUG, for whoever turns it on"
