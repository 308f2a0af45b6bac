"""The MCP resource ``obsmem://threads/{thread_id}/observations`` reads a thread whatever its id
holds, its '/' sent as ``%2F`` (the gateway takes any thread id a client names: 'user/1/chat',
'/lead', 'a/../b', '..'). The SDK's resource templates refuse a parameter that looks like a
filesystem path ('..' as a component, a leading '/'); a thread id is no path (obsmem reads it
from its store, checked against the key), so such a thread's observations could not be read."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth
from tests.server.test_mcp import http_client

pytestmark = pytest.mark.anyio

IDS = ["user/1/chat", "/lead", "a/../b", ".."]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("mcp-odd-147")):
        with httpx.Client(base_url=env.url, timeout=60) as client:
            for thread_id in IDS:
                answer = client.post(
                    "/v1/chat/completions", headers={**auth(env.keys.alice), "X-Obsmem-Thread": thread_id},
                    json={"model": "m", "messages": [{"role": "user", "content": "hello"}]},
                )  # fmt: skip
                assert answer.status_code == 200, answer.text
        for thread_id in IDS:
            env.live.call(env.live.service.memory.observe(thread_id))
        yield env


@pytest.mark.parametrize("thread_id", IDS)
async def test_a_threads_observations_resource_reads_an_odd_id(env: Env, thread_id: str) -> None:
    uri = f"obsmem://threads/{quote(thread_id, safe='')}/observations"
    expected = await _observations(env, thread_id)
    async with http_client(env, env.keys.alice) as client:
        read = await client.read_resource(uri)  # was refused: 'failed security validation' or no match
    assert read.contents[0].text == expected
    async with http_client(env, env.keys.bob) as client:
        with pytest.raises(Exception) as raised:
            await client.read_resource(uri)
    assert "does not exist" in str(raised.value) or "not visible" in str(raised.value)


async def _observations(env: Env, thread_id: str) -> str:
    text: str = env.live.call(env.live.service.memory.get_observations(thread_id))
    return text
