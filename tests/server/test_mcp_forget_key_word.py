"""MCP forget: the audit actor is obsmem's own word for the key ('key:<key id>', 'dev' under --dev),
not one the caller chose; a value it held by chance (a user surnamed Key, 'Dev', letters of the key
id) was refused and nothing forgotten (found by helper 209). Audited as the service then."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth
from tests.server.test_mcp import http_client, payload

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("mcp-forget-key-209"))


async def test_mcp_forget_of_a_name_in_the_keys_audit_word(env: Env) -> None:
    keys = env.keys
    headers = auth(keys.alice)
    assert httpx.post(env.url + "/api/threads", json={"id": "k209"}, headers=headers, timeout=60).status_code == 201
    said = httpx.post(env.url + "/api/threads/k209/messages", headers=headers, timeout=60, json={
        "format": "openai", "messages": [{"role": "user", "content": "Ask Mr Key about the lease."}]})
    assert said.status_code == 201, said.text
    async with http_client(env, keys.alice) as client:
        result = await client.call_tool("forget", {"value": "Key", "thread_id": "k209"})
    counts = payload(result)
    assert sum(counts.values()) >= 1, counts
    listed = httpx.get(env.url + "/api/threads/k209/messages", headers=headers, timeout=60)
    assert "Mr Key" not in listed.text, listed.text
