"""A secret named in camelCase never reaches what obsmem raises or prints (helper-158).

5a327b2 masked ``client_secret=``, ``refresh_token=``, ``db_password=`` (a secret name after up
to three words joined by ``_`` or ``-``), but the same names written in camelCase, as many APIs
spell their query parameters (``?clientSecret=``, ``?refreshToken=``, ``?authToken=``,
``?apiToken=``, ``?sessionToken=``, ``?secretKey=``) or a config's ``dbPassword=``, were quoted
whole in the ModelUnavailableError a failed connection raises (and so in the worker's log).
Ordinary camelCase ``name=value`` text (``maxTokens=4096``) is left as written.
"""

from __future__ import annotations

import pytest

from obsmem import Message
from obsmem.errors import ModelUnavailableError
from obsmem.models import infer_model
from obsmem.redact import redact_secrets

pytestmark = pytest.mark.anyio

SENTINEL = "Sent1nelKey58"

CAMEL_NAMES = ["clientSecret", "refreshToken", "authToken", "apiToken", "sessionToken", "secretKey", "xApiKey",
               "accessToken", "dbPassword"]


@pytest.mark.parametrize("name", CAMEL_NAMES)
async def test_a_failed_connection_does_not_quote_a_camel_case_query_secret(name: str) -> None:
    chat = infer_model(f"openai-compatible:m@http://127.0.0.1:1/v1?{name}={SENTINEL}", env={})
    with pytest.raises(ModelUnavailableError) as info:
        await chat.request([Message.user("hi")])
    assert "connection failed at http://127.0.0.1:1/v1?" in str(info.value)  # still says where
    assert SENTINEL not in str(info.value)


@pytest.mark.parametrize("text", [
    f"host=db user=app dbPassword={SENTINEL} dbname=obsmem",
    f"https://auth.example/oauth?grantType=refresh&refreshToken={SENTINEL}&clientId=app",
    f"https://api.example/v2/items?nextPageToken=abc&authToken={SENTINEL}",
])  # fmt: skip
def test_a_camel_case_secret_name_is_masked(text: str) -> None:
    redacted = redact_secrets(text)
    assert SENTINEL not in redacted
    assert redact_secrets(redacted) == redacted


@pytest.mark.parametrize("text", [
    "maxTokens=4096 temperature=0.2",
    "inputTokens=12 outputTokens=34 totalTokens=46",
    "https://example.com/search?pageSize=20&sortKey=name&keyboardLayout=us",
    "retryCount=3 exitCode=1",
])  # fmt: skip
def test_ordinary_camel_case_text_is_left_as_written(text: str) -> None:
    assert redact_secrets(text) == text
