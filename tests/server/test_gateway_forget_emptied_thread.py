"""The gateway after memory.forget: a client (the openai SDK) keeps its own history and sends it
whole with each request. When forget deleted every message of the thread (the value said in the
question and repeated in the answer), the gateway took the thread for one that "holds nothing
yet" (a client moving onto the gateway) and saved the client's whole history again, under new
ids: the value was back in the thread and in the context sent upstream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from obsmem import Memory
from tests.server.conftest import Env, open_env
from tests.server.live import auth

SECRET = "4242-9191"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("gw-forget-177"))


def test_a_whole_history_sent_after_forget_emptied_the_thread(env: Env) -> None:
    thread = "gw-forget"
    client = openai.OpenAI(base_url=env.url + "/v1", api_key=env.keys.alice,
                           default_headers={"X-Obsmem-Thread": thread}, max_retries=0)
    asked: list[Any] = [{"role": "user", "content": SECRET}]
    answer = client.chat.completions.create(model="m", messages=asked).choices[0].message.content

    async def forget() -> dict[str, int]:
        async with Memory(f"sqlite:///{env.store_path}") as memory:
            return await memory.forget(SECRET, thread_id=thread)

    counts = asyncio.run(forget())
    assert counts["messages"] >= 1, counts
    client.chat.completions.create(model="m", messages=[*asked, {"role": "assistant", "content": answer},
                                                        {"role": "user", "content": "thanks"}])
    sent = json.dumps(env.upstream.requests[-1].body["messages"])
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as rest:
        stored = json.dumps(rest.get(f"/api/threads/{thread}/messages").json()["messages"])
    assert SECRET not in stored
    assert SECRET not in sent
