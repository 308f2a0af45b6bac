"""A memory-model server that redirects to another host (helper-121's hostile review): a
compromised or misconfigured proxy answering ``307 Location: http://elsewhere/...``, against real
local servers, with the ``httpx.AsyncClient(follow_redirects=True)`` an application commonly
passes as ``client=``.

httpx drops ``Authorization`` on a redirect to another origin, but not ``x-api-key``: on main the
Anthropic key (and any key in a custom header) went to the other host with the re-sent request.
obsmem now never follows a redirect, whatever the client: a 3xx is a permanent
:class:`~obsmem.errors.ModelRequestError` that says where the server points, so the base URL is
fixed instead of the key sent on.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from obsmem.errors import ModelRequestError
from obsmem.models.anthropic import AnthropicModel
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.transport import Endpoint
from obsmem.types import Message

from .wire_server import Reply, WireServer

pytestmark = pytest.mark.anyio

KEY = "sk-ant-0123456789abcdefghijSECRET"


@pytest.fixture
def servers() -> Iterator[tuple[WireServer, WireServer]]:
    with WireServer() as proxy, WireServer() as elsewhere:
        yield proxy, elsewhere


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_redirect_to_another_host_never_carries_the_key(
    servers: tuple[WireServer, WireServer], provider: str, stream: bool
) -> None:
    """On main (anthropic): the other host received the request with x-api-key: <the key>."""
    proxy, elsewhere = servers
    proxy.responder = lambda request: Reply(status=307, headers={"location": elsewhere.url + request.path},
                                            body=b"")  # fmt: skip
    elsewhere.responder = lambda request: Reply(json={"error": {"message": "not here"}}, status=404)
    async with httpx.AsyncClient(follow_redirects=True) as client:
        if provider == "anthropic":
            endpoint = Endpoint("anthropic", proxy.url, headers={"x-api-key": KEY}, key_env="ANTHROPIC_API_KEY")
            model: AnthropicModel | OpenAIChatModel = AnthropicModel("m", endpoint, stream=stream, client=client,
                                                                     timeout_s=5)  # fmt: skip
        else:
            endpoint = Endpoint("openai", proxy.url, headers={"Authorization": f"Bearer {KEY}", "api-key": KEY},
                                key_env="OPENAI_API_KEY")  # fmt: skip
            model = OpenAIChatModel("m", endpoint, stream=stream, client=client, timeout_s=5)
        with pytest.raises(ModelRequestError, match="redirect") as raised:
            await model.request([Message.user("hi")])
    assert elsewhere.requests == []
    assert elsewhere.url in str(raised.value)
    assert KEY not in str(raised.value)
