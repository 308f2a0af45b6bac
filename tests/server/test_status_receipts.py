"""The status feed and receipts over REST (issue 21), against a live uvicorn server with httpx:
``GET /api/threads/{id}/status`` is ``Memory.status``, ``…/status/stream`` streams
``Memory.watch`` as server-sent events (bounded by ``max_s``, ended when the client leaves) and
``GET /api/messages/{id}/receipt`` is ``Memory.receipt`` (resolved: ``Memory.receipt_sources``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem.om.receipts import RECEIPT_KEY
from tests.server.conftest import Env, open_env
from tests.server.live import auth

THREAD = "sr-1"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("status")):
        with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
            assert client.post("/api/threads", json={"id": THREAD}).status_code == 201
            for number in range(45):
                text = f"Note {number}: the Heron survey station {number} reads {number * 3} birds on day {number}."
                turn = client.post(f"/api/threads/{THREAD}/turns", json={
                    "format": "openai", "messages": [{"role": "user", "content": text}]}).json()  # fmt: skip
                client.post(f"/api/turns/{turn['turn_id']}/end", json={
                    "format": "openai", "messages": [{"role": "assistant", "content": f"Logged station {number}."}],
                })  # fmt: skip
        env.live.call(env.live.service.settled())
        yield env


def _events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) of each server-sent event (comments skipped)."""
    event, data = "message", ""
    for line in lines:
        if line.startswith(":"):
            continue
        if not line:
            if data:
                yield event, json.loads(data)
            event, data = "message", ""
        elif line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data += line.removeprefix("data: ")


def _without_time(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "checked_at"}


def test_status_is_memory_status(env: Env) -> None:
    memory = env.live.service.memory
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        got = client.get(f"/api/threads/{THREAD}/status")
        assert got.status_code == 200, got.text
        expected = env.live.call(memory.status(THREAD)).data()
        assert _without_time(got.json()) == _without_time(expected)
        body = got.json()
        assert body["phase"] in ("idle", "observation-due") and body["record_id"] is not None
        assert body["message_threshold"] == 400 and body["window_tokens"] >= 0
        missing = client.get("/api/threads/no-such/status")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "ThreadNotFoundError"


def test_status_stream_sends_the_status_and_each_change(env: Env) -> None:
    memory = env.live.service.memory
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        params = {"max_s": 120, "interval_s": 0.05}
        with client.stream("GET", f"/api/threads/{THREAD}/status/stream", params=params) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = _events(stream.iter_lines())
            kind, first = next(events)
            assert kind == "status"
            assert _without_time(first) == _without_time(env.live.call(memory.status(THREAD)).data())
            said = client.post(f"/api/threads/{THREAD}/messages", json={
                "format": "openai", "messages": [{"role": "user", "content": "One more heron note for the window."}]})  # fmt: skip
            assert said.status_code == 201
            kind, second = next(events)
            assert kind == "status" and second["window_tokens"] > first["window_tokens"]
            assert second["unobserved_messages"] == first["unobserved_messages"] + 1
        # the client went away: the server stops watching the thread (its watch loop ends)
        assert env.live.call(_watchers_gone(memory, THREAD))


async def _watchers_gone(memory: Any, thread_id: str) -> bool:
    for _ in range(2000):  # bounded wait for the server to notice the closed connection
        if not memory._watchers.get(thread_id):
            return True
        await asyncio.sleep(0.005)
    return False


def test_status_stream_ends_after_max_s(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        response = client.get(f"/api/threads/{THREAD}/status/stream", params={"max_s": 0.3})
        assert response.status_code == 200
        events = list(_events(iter(response.text.splitlines())))
        kinds = [kind for kind, _ in events]
        assert kinds[0] == "status" and kinds[-1] == "end" and set(kinds[:-1]) == {"status"}
        assert events[-1][1] == {"reason": "max_s", "events": len(kinds) - 1}
        for bad in ({"max_s": 0}, {"max_s": 99_999}, {"interval_s": 0}):
            refused = client.get(f"/api/threads/{THREAD}/status/stream", params=bad)
            assert refused.status_code == 422 and set(refused.json()) == {"error"}, refused.text


def _last_reply_with_groups(env: Env) -> Any:
    messages = env.live.call(env.live.service.memory.list_messages(THREAD))
    replies = [m for m in messages if m.role == "assistant" and RECEIPT_KEY in m.metadata]
    assert replies, "a reply saved through a turn keeps its receipt"
    with_groups = [m for m in replies if m.metadata[RECEIPT_KEY]["groups"]]
    assert with_groups, "a reply made after the first observation shows groups"
    return with_groups[-1]


def test_receipt_is_memory_receipt_and_resolves_to_receipt_sources(env: Env) -> None:
    memory = env.live.service.memory
    reply = _last_reply_with_groups(env)
    receipt = env.live.call(memory.receipt(reply.id))
    sources = env.live.call(memory.receipt_sources(receipt))
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        plain = client.get(f"/api/messages/{reply.id}/receipt")
        assert plain.status_code == 200, plain.text
        body = plain.json()
        assert body["receipt"] == receipt.data() and body["message_id"] == reply.id and body["thread_id"] == THREAD
        assert body["total_tokens"] == receipt.total_tokens and "groups" not in body
        resolved = client.get(f"/api/messages/{reply.id}/receipt", params={"resolve": "true"}).json()
        assert [g["id"] for g in resolved["groups"]] == [g.id for g in receipt.groups]
        for group in resolved["groups"]:
            expected = sources[group["id"]]
            assert [m["id"] for m in group["messages"]] == [m.id for m in expected] != []
            assert [m["seq"] for m in group["messages"]] == [m.seq for m in expected]
            assert all("text" not in m for m in group["messages"])
        assert [m["id"] for m in resolved["raw"]] == [m.id for m in sources["raw"]]
        texts = client.get(f"/api/messages/{reply.id}/receipt", params={"resolve": "true", "text": "true"}).json()
        first = texts["groups"][0]["messages"][0]
        assert first["text"] == sources[receipt.groups[0].id][0].text and "Heron" in first["text"]

        user = next(m for m in env.live.call(memory.list_messages(THREAD)) if m.role == "user")
        none = client.get(f"/api/messages/{user.id}/receipt")
        assert none.status_code == 404 and none.json()["error"]["type"] == "NotFoundError"
        missing = client.get("/api/messages/no-such-message/receipt")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "MessageNotFoundError"
        # another tenant's message reads exactly like a missing one
        for key in (env.keys.bob, env.keys.globex):
            other = client.get(f"/api/messages/{reply.id}/receipt", headers=auth(key))
            assert other.status_code == 404 and other.json()["error"] == {
                **missing.json()["error"], "message": missing.json()["error"]["message"].replace("no-such-message", reply.id)}


def test_the_openapi_document_lists_the_new_endpoints(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        paths = client.get("/openapi.json").json()["paths"]
    assert "get" in paths["/api/threads/{thread_id}/status"]
    stream = paths["/api/threads/{thread_id}/status/stream"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    assert {p["name"] for p in stream["parameters"]} >= {"thread_id", "max_s", "interval_s"}
    receipt = paths["/api/messages/{message_id}/receipt"]["get"]
    assert {p["name"] for p in receipt["parameters"]} >= {"message_id", "resolve", "text"}
