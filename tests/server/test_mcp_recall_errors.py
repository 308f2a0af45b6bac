"""An MCP ``recall`` that fails (a cursor or group id that is not there, a thread outside the
recall's reach) is a tool error: the result's ``isError`` is set and its text says why, as for
every other failing obsmem tool. It was a successful result holding ``{"error": "..."}``, the
library recall tool's answer to a model, so an MCP client (and the agent framework driving it)
counted the failed call as a success."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth
from tests.server.test_mcp import failed, http_client, payload

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("mcp-recall-errors")):
        with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
            for thread in ("mre-1", "mre-elsewhere"):
                assert client.post("/api/threads", json={"id": thread}).status_code == 201
            said = client.post("/api/threads/mre-1/messages", json={
                "format": "openai", "messages": [{"role": "user", "content": "My locker is 42."}],
            })  # fmt: skip
            assert said.status_code == 201, said.text
        yield env


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"cursor": "no-such-message"}, "no-such-message"),
        ({"group_id": "no-such-group"}, "no-such-group"),
    ],
    ids=["cursor", "group_id"],
)
async def test_a_recall_of_something_not_there_is_a_tool_error(env: Env, arguments: dict[str, str], needle: str) -> None:
    async with http_client(env, env.keys.alice) as client:
        text = failed(await client.call_tool("recall", {"thread_id": "mre-1", **arguments}))
    assert needle in text, text


async def test_a_recall_that_succeeds_is_still_a_result(env: Env) -> None:
    async with http_client(env, env.keys.alice) as client:
        answer = payload(await client.call_tool("recall", {"thread_id": "mre-1", "limit": 5}))
    assert "error" not in answer and "My locker is 42." in str(answer)
