"""Gateway, Responses API: a reasoning model's tool loop (helper-179).

A reasoning model (o3, gpt-5) answers a tool call with a ``reasoning`` item and the
``function_call`` items after it, each with its item id (``rs_…``, ``fc_…``). OpenAI pairs them by
those ids: a reasoning item sent back without the item that followed it ("Item 'rs_…' of type
'reasoning' was provided without its required following item") or a call item without its
reasoning is a 400. The gateway saved the answer through the converters, which keep the
reasoning's id (its replay) but not the calls', so the request carrying the tools' results sent
``rs_1`` and the calls without ids: the upstream refused every second step of such a loop. The
call items now carry their ids again where they follow a reasoning item sent with its id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.models.wire_server import Recorded, Reply
from tests.server.conftest import Env, open_env
from tests.server.live import auth


def _response(output: list[dict[str, Any]]) -> Reply:
    return Reply(json={
        "id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": output,
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    })  # fmt: skip


def _call(n: int) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "lookup",
            "arguments": "{}", "status": "completed"}  # fmt: skip


def reasoning_model(recorded: Recorded) -> Reply:
    """Tool calls after its reasoning for a question; a text answer to the tools' results."""
    items = recorded.body.get("input")
    last = items[-1] if isinstance(items, list) and items else {}
    if last.get("type") == "function_call_output":
        return _response([{"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": "done", "annotations": []}]}])
    if "plain" in str(last.get("content")):  # a model without reasoning items
        return _response([_call(3)])
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"}
    return _response([reasoning, _call(1), _call(2)])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for opened in open_env(tmp_path_factory.mktemp("reasoning-pairs-179")):
        opened.upstream.responder = reasoning_model
        yield opened


def _loop(env: Env, thread: str, question: str, calls: list[str]) -> list[dict[str, Any]]:
    """The question, then the tools' results: the input the upstream got with the results."""
    headers = {**auth(env.keys.alice), "X-Obsmem-Thread": thread}
    with httpx.Client(base_url=env.url, timeout=60, headers=headers) as client:
        asked = client.post("/v1/responses", json={"model": "m", "input": question, "store": False})
        assert asked.status_code == 200, asked.text
        results = [{"type": "function_call_output", "call_id": c, "output": "found"} for c in calls]
        answered = client.post("/v1/responses", json={"model": "m", "input": results, "store": False})
        assert answered.status_code == 200, answered.text
    sent: list[dict[str, Any]] = env.upstream.requests[-1].body["input"]
    return sent


def test_the_calls_after_a_reasoning_item_are_sent_back_with_their_ids(env: Env) -> None:
    sent = _loop(env, "rp-1", "look it up", ["call_1", "call_2"])
    paired = [("reasoning", "rs_1"), ("function_call", "fc_1"), ("function_call", "fc_2")]
    loop = [(i.get("type"), i.get("id")) for i in sent if i.get("type") in ("reasoning", "function_call")]
    assert loop == paired
    headers = {**auth(env.keys.alice), "X-Obsmem-Thread": "rp-1"}
    with httpx.Client(base_url=env.url, timeout=60, headers=headers) as client:  # the next question
        thanked = client.post("/v1/responses", json={"model": "m", "input": "thanks", "store": False})
        assert thanked.status_code == 200
    later = env.upstream.requests[-1].body["input"]
    again = [(i.get("type"), i.get("id")) for i in later if i.get("type") in ("reasoning", "function_call")]
    assert again[:3] == paired


def test_calls_without_a_reasoning_item_are_sent_as_before(env: Env) -> None:
    sent = _loop(env, "rp-2", "a plain question", ["call_3"])
    calls = [i for i in sent if i.get("type") == "function_call"]
    assert [(c["call_id"], "id" in c) for c in calls] == [("call_3", False)]
