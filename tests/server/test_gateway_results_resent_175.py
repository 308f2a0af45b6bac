"""The gateway: results of parallel tool calls sent again with the one that was missing
(helper-175).

A client that sent the result of only one of two parallel calls got the upstream's 400 (a call
without its result), but the gateway had saved that result. Sending the request again, corrected
(both results, or the whole history with both), was refused with 400 ("no call with that id is
waiting", the first result being stored already): the client could not finish its tool loop. The
results the failed attempt saved are now taken as stored, as a retried request's input is, and
the others are saved after them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.integrations.agent_model import weather_rule
from tests.integrations.agent_model_extra import ParallelAgentModel
from tests.server.conftest import Env, open_env
from tests.server.live import auth

TOOLS: Any = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}}]  # fmt: skip


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("results-resent-175")):
        env.upstream.responder = ParallelAgentModel(rules=[weather_rule()])
        yield env


@pytest.mark.parametrize("history", [False, True], ids=["new-messages", "whole-history"])
def test_results_sent_again_with_the_missing_one_finish_the_tool_loop(env: Env, history: bool) -> None:
    thread = f"resent-{history}"
    client = openai.OpenAI(base_url=env.url + "/v1", api_key=env.keys.alice,
                           default_headers={"X-Obsmem-Thread": thread}, max_retries=0)
    asked: list[Any] = [{"role": "user", "content": "What is the weather in Paris and Rome?"}]
    calls = client.chat.completions.create(model="m", messages=asked, tools=TOOLS).choices[0].message.tool_calls
    assert calls is not None and len(calls) == 2
    made = [{"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]}]
    results: list[Any] = [{"role": "tool", "tool_call_id": c.id, "content": f"{c.id}: sunny"} for c in calls]

    with pytest.raises(openai.BadRequestError):  # the upstream refuses a call without its result
        client.chat.completions.create(model="m", messages=[*asked, *made, results[0]] if history else results[:1],
                                       tools=TOOLS)
    answer = client.chat.completions.create(model="m", messages=[*asked, *made, *results] if history else results,
                                            tools=TOOLS)
    # before: 400, "holds the result of tool call 'call_…', but no call with that id is waiting"
    assert answer.choices[0].message.content == f"The tool said: {calls[1].id}: sunny"
    sent = env.upstream.requests[-1].body["messages"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == [c.id for c in calls]
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as rest:
        stored = rest.get(f"/api/threads/{thread}/messages").json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]  # each result once
