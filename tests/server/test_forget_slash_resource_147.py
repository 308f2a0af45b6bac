"""A user the gateway named from a request's ``user`` holding '/' ('tenant/42') can have a value
forgotten everywhere in their threads over MCP (``forget`` with ``resource_id``) and over
REST be deleted, on a server with a knowledge store. Before fe5ad2e both failed with
InvalidScopeError ("Invalid resource id 'tenant/42'"): the knowledge erasure read the id as a
knowledge scope segment, which it cannot be, and nothing was forgotten or deleted."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth
from tests.server.test_mcp import http_client, payload

pytestmark = pytest.mark.anyio
SECRET = "FORGET-SLASH-9931"
USER = "tenant/42"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("forget-slash-147"))


async def test_a_value_is_forgotten_and_the_user_deleted(env: Env) -> None:
    org = auth(env.keys.acme_org)
    async with httpx.AsyncClient(base_url=env.url, timeout=60) as client:
        answer = await client.post(
            "/v1/chat/completions", headers={**org, "X-Obsmem-Thread": "fs-1"},
            json={"model": "m", "user": USER, "messages": [{"role": "user", "content": f"My pin is {SECRET}."}]},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        base = "/api/resources/" + quote(USER, safe="")
        assert SECRET in (await client.get(base + "/export", headers=org)).text
        async with http_client(env, env.keys.acme_org) as mcp:
            forgotten = payload(await mcp.call_tool("forget", {"value": SECRET, "resource_id": USER}))
        assert forgotten["messages"] >= 1
        exported = await client.get(base + "/export", headers=org)
        assert exported.status_code == 200 and SECRET not in exported.text
        deleted = await client.delete(base, headers=org)
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["deleted"]["threads"] == 1
        assert (await client.get(base + "/export", headers=org)).status_code == 404
