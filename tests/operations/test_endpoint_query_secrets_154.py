"""A key in a URL's query never reaches what obsmem raises or prints (helper-154).

Before: ``redact_secrets`` masked ``password=``, ``api_key=``, ``token=`` and ``secret=`` only
when the name stood alone, so a model endpoint given with its key in the query (Google's and
Azure's ``…/v1?key=…``, Azure Functions' ``?code=``, a SAS ``?sig=``, ``?client_secret=``,
``?refresh_token=``, ``?subscription-key=``, ``?X-Amz-Signature=``) had the key quoted whole in
the ModelUnavailableError a failed connection raises (and so in the worker's log and the
status line), and a libpq string's ``db_password=`` or ``PGPASSWORD=`` in any message.
Ordinary ``name=value`` text (``exit code=1``, ``max_tokens=4096``, ``pass=3 fail=0``) is left
as written, before and after.
"""

from __future__ import annotations

import pytest

from obsmem import Message
from obsmem.errors import ModelUnavailableError
from obsmem.models import infer_model
from obsmem.redact import redact_secrets

pytestmark = pytest.mark.anyio

SENTINEL = "Sent1nelKey99"

QUERY_NAMES = ["key", "code", "sig", "client_secret", "refresh_token", "id_token", "subscription-key",
               "X-Amz-Signature", "X-Amz-Security-Token", "auth", "pass"]


@pytest.mark.parametrize("name", QUERY_NAMES)
async def test_a_failed_connection_does_not_quote_the_query_key(name: str) -> None:
    chat = infer_model(f"openai-compatible:m@http://127.0.0.1:1/v1?{name}={SENTINEL}", env={})
    with pytest.raises(ModelUnavailableError) as info:
        await chat.request([Message.user("hi")])
    assert "connection failed at http://127.0.0.1:1/v1?" in str(info.value)  # still says where
    assert SENTINEL not in str(info.value)


@pytest.mark.parametrize("text", [
    f"host=db user=app db_password={SENTINEL} dbname=obsmem",
    f"PGPASSWORD={SENTINEL} psql -h db",
    f"https://store.example/blob?sv=2024-01-01&sig={SENTINEL}&se=2026-01-01",
    f"https://auth.example/token?grant_type=refresh&client_secret={SENTINEL}",
])  # fmt: skip
def test_a_prefixed_secret_name_is_masked(text: str) -> None:
    redacted = redact_secrets(text)
    assert SENTINEL not in redacted
    assert redact_secrets(redacted) == redacted


@pytest.mark.parametrize("text", [
    "the worker exited with code=1",
    "status code=503 from upstream",
    "max_tokens=4096 temperature=0.2",
    "tests pass=3 fail=0",
    "https://example.com/search?page=2&sort=asc&monkey=1&keyboard=us",
    "the key=value form",
    "token_count=5 sslmode=require",
])  # fmt: skip
def test_ordinary_name_value_text_is_left_as_written(text: str) -> None:
    assert redact_secrets(text) == text
