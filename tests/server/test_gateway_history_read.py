"""The gateway read the thread's whole history for every request holding a tool result (each
request of a tool loop after its first), to name the tool the result answers: on a long thread
each such request read every stored message. It now reads the thread's newest messages, which
hold the call (the gateway saved it with the answer before), and the whole thread only when the
call is older than them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth
from tests.server.test_gateway import client_for
from tests.rows_read import RowsRead
from tests.server.test_rest_openai_history_read import LONG, _long_thread


TOOLS: list = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("gateway-history"))


def test_a_tool_loop_on_a_long_thread_does_not_read_the_whole_thread(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=120) as client:
        _long_thread(client, "gh-1")
    env.live.call(env.live.service.memory.observe("gh-1"))
    # the memory work that observation started (knowledge capture may read the whole thread) done
    env.live.call(env.live.service.memory.settled())
    openai = client_for(env, "gh-1")
    asked = openai.chat.completions.create(model="m", tools=TOOLS, messages=[
        {"role": "user", "content": "What is the weather in Oslo today?"}])
    calls = asked.choices[0].message.tool_calls
    assert calls, asked
    with RowsRead(env.live.service.memory.store, whole_thread_only=True) as read:
        answered = openai.chat.completions.create(model="m", tools=TOOLS, messages=[
            {"role": "tool", "tool_call_id": calls[0].id, "content": "Oslo: 4 degrees and snow"}])
    assert answered.choices[0].message.content
    assert read.rows == 0, (read.rows, LONG)
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=120) as client:
        newest = client.get("/api/threads/gh-1/messages", params={"after_seq": LONG}).json()["messages"]
    results = [p for m in newest for p in m["parts"] if p["type"] == "tool-result"]
    assert [r["tool_name"] for r in results] == [calls[0].function.name]
