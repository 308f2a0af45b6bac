"""The OpenAI-compatible embedder against a server that redirects to another host (helper-122):
a proxy answering ``307 Location: http://elsewhere/...``, two real local servers.

The chat models were fixed in ff2e828 to never follow a redirect; the embedder was not. With the
``httpx.AsyncClient(follow_redirects=True)`` an application passes as ``http_client=``, httpx
re-sent the request (the user's texts, and any key in a header httpx does not strip) to the other
host; with obsmem's own client the 3xx's empty body was read as a malformed answer and retried.
Now a 3xx is a permanent :class:`~obsmem.errors.ModelRequestError` naming where it points, sent
nowhere else, and tried once.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from obsmem.embeddings import OpenAIEmbedder
from obsmem.errors import ModelRequestError

from .conftest import FakeOpenAI, Reply

pytestmark = pytest.mark.anyio

KEY = "sk-proj-0123456789abcdefSECRETKEY"
PRIVATE = "Dana's diagnosis is confidential"


@pytest.fixture
def elsewhere() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
        fake.thread.join(timeout=5)


@pytest.mark.parametrize("follow", [True, False], ids=["following-client", "own-client"])
async def test_a_redirect_is_never_followed_and_fails_at_once(
    openai_server: FakeOpenAI, elsewhere: FakeOpenAI, follow: bool
) -> None:
    """On main: following-client: the other host received the texts (1 request), and the embedder
    got vectors from it; own-client: ModelOutputError 'not in OpenAI's format' after 3 attempts."""
    location = elsewhere.base_url + "/embeddings"
    openai_server.script(*[Reply(status=307, headers={"Location": location}) for _ in range(3)])
    client = httpx.AsyncClient(follow_redirects=True) if follow else None
    try:
        embedder = OpenAIEmbedder("local-embed", dimensions=8, api_key=KEY, base_url=openai_server.base_url,
                                  backoff_s=0.0, http_client=client)  # fmt: skip
        async with embedder:
            with pytest.raises(ModelRequestError, match="redirect") as raised:
                await embedder.embed([PRIVATE])
    finally:
        if client is not None:
            await client.aclose()
    assert elsewhere.requests == []
    assert len(openai_server.requests) == 1  # permanent: not retried
    assert location in str(raised.value)
    assert KEY not in str(raised.value)
