"""An error answer whose JSON body is nested too deeply to decode (helper-121's hostile review),
from a real local server.

On main the explanation was looked for with ``json.loads``, whose ``RecursionError`` escaped the
status table: a 401 (the key refused, permanent: "check that OPENAI_API_KEY holds a valid key")
became a retryable "answer of an unexpected shape", retried for minutes against a refused key, and
a 400 the same. The body now simply has no readable explanation, and the status decides.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from obsmem.errors import ModelRequestError, ModelUnavailableError
from obsmem.models.anthropic import AnthropicModel
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.transport import Endpoint
from obsmem.types import Message

from .wire_server import Reply, WireServer

pytestmark = pytest.mark.anyio

DEEP = b'{"error": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as wire:
        yield wire


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(("status", "kind"), [(401, ModelRequestError), (400, ModelRequestError),
                                              (429, ModelUnavailableError)])  # fmt: skip
async def test_an_error_body_nested_too_deep_keeps_its_status_meaning(
    server: WireServer, provider: str, status: int, kind: type[Exception]
) -> None:
    server.script(Reply(status=status, body=DEEP))
    endpoint = Endpoint(provider, server.url, key_env="OPENAI_API_KEY")
    model = (OpenAIChatModel("m", endpoint, timeout_s=5) if provider == "openai"
             else AnthropicModel("m", endpoint, timeout_s=5))  # fmt: skip
    with pytest.raises(kind) as raised:
        await model.request([Message.user("hi")])
    assert getattr(raised.value, "status_code", None) == status
    assert f"HTTP {status}" in str(raised.value)
