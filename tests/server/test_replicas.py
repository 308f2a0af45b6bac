"""A REST turn is not pinned to the replica that began it (issue 19): two ``obsmem serve``
replicas on one store, a turn begun on one, stepped on the other, ended on the first, and the
tenancy and "ended means ended" rules on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from obsmem.server import ServerSettings, Service
from tests.integrations.agent_model import small_memory_config
from tests.server.live import Keys, LiveServer, auth, live_server, make_keys


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, LiveServer, Keys]]:
    path: Path = tmp_path_factory.mktemp("replicas")
    url = f"sqlite:///{path / 'memory.db'}"
    first = Service.open(url, settings=ServerSettings(), config=small_memory_config(), max_turn_wait=None)
    keys = make_keys(first)
    second = Service.open(url, settings=ServerSettings(), config=small_memory_config(), max_turn_wait=None)
    with live_server(first) as a, live_server(second) as b:
        yield a, b, keys


def test_a_turn_begun_on_one_replica_is_stepped_and_ended_on_another(
    replicas: tuple[LiveServer, LiveServer, Keys],
) -> None:
    a, b, keys = replicas
    with httpx.Client(base_url=a.url, headers=auth(keys.alice), timeout=60) as on_a, \
            httpx.Client(base_url=b.url, headers=auth(keys.alice), timeout=60) as on_b:  # fmt: skip
        assert on_a.post("/api/threads", json={"id": "r-1"}).status_code == 201
        begun = on_a.post("/api/threads/r-1/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "What's the weather in Oslo?"}]})  # fmt: skip
        assert begun.status_code == 201, begun.text
        turn_id = begun.json()["turn_id"]
        assert turn_id not in b.service.turns

        call = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}  # fmt: skip
        stepped = on_b.post(f"/api/turns/{turn_id}/step", json={"format": "openai", "messages": [call]})
        assert stepped.status_code == 200, stepped.text
        wire = stepped.json()["context"]["openai"]
        assert wire[-1]["tool_calls"][0]["id"] == "call_1"
        assert any(m["role"] == "user" and m["content"] == "What's the weather in Oslo?" for m in wire)

        result = {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 14 °C"}
        assert on_b.post(f"/api/turns/{turn_id}/step", json={"format": "openai", "messages": [result]}).status_code == 200
        ended = on_a.post(f"/api/turns/{turn_id}/end", json={
            "format": "openai", "messages": [{"role": "assistant", "content": "Sunny in Oslo, 14 °C."}]})  # fmt: skip
        assert ended.status_code == 200, ended.text

        stored = on_b.get("/api/threads/r-1/messages").json()["messages"]
        assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
        assert [m["seq"] for m in stored] == sorted(m["seq"] for m in stored)

        # ended means ended, on every replica (b still holds the turn object it resumed)
        assert turn_id in b.service.turns
        for client in (on_a, on_b):
            gone = client.post(f"/api/turns/{turn_id}/step", json={"messages": []})
            assert gone.status_code == 404 and gone.json()["error"]["type"] == "TurnNotFoundError"
        assert turn_id not in b.service.turns


def test_another_tenant_cannot_continue_a_turn_on_any_replica(replicas: tuple[LiveServer, LiveServer, Keys]) -> None:
    a, b, keys = replicas
    with httpx.Client(base_url=a.url, headers=auth(keys.alice), timeout=60) as alice:
        assert alice.post("/api/threads", json={"id": "r-2"}).status_code == 201
        turn_id = alice.post("/api/threads/r-2/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "hello"}]}).json()["turn_id"]  # fmt: skip
    for server in (a, b):
        for key in (keys.bob, keys.globex):
            with httpx.Client(base_url=server.url, headers=auth(key), timeout=60) as other:
                refused = other.post(f"/api/turns/{turn_id}/step", json={"messages": []})
                assert refused.status_code == 404, refused.text
    # a forged id naming alice's thread resumes nothing
    forged = turn_id.split(".")[0] + "x." + turn_id.split(".")[1]
    with httpx.Client(base_url=b.url, headers=auth(keys.alice), timeout=60) as alice_b:
        assert alice_b.post(f"/api/turns/{forged}/step", json={"messages": []}).status_code == 404
        assert alice_b.post(f"/api/turns/{turn_id}/end", json={"messages": []}).status_code == 200


def test_two_tabs_tool_loops_a_turn_continued_on_another_replica_keeps_its_own_calls(
    replicas: tuple[LiveServer, LiveServer, Keys],
) -> None:
    """Two tabs of one chat on a load-balanced server: tab A's tool call is still running when
    tab B's turn begins (closing A's call as unanswered) and makes its own call. A's result and
    answer then reach the other replica, which continues A's turn from the store.

    On main (64264f1) the continued turn took every call waiting at that moment for its own:
    its context showed B's call with no result (every provider refuses that), and A's answer was
    refused with 400 ("still wait for their results") while B's tool ran."""
    a, b, keys = replicas

    def call(call_id: str, city: str) -> dict[str, object]:
        return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
            "name": "get_weather", "arguments": f'{{"city": "{city}"}}'}}]}  # fmt: skip

    with httpx.Client(base_url=a.url, headers=auth(keys.alice), timeout=60) as on_a, \
            httpx.Client(base_url=b.url, headers=auth(keys.alice), timeout=60) as on_b:  # fmt: skip
        assert on_a.post("/api/threads", json={"id": "tabs"}).status_code == 201
        tab_a = on_a.post("/api/threads/tabs/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "Weather in Oslo?"}]}).json()["turn_id"]  # fmt: skip
        assert on_a.post(f"/api/turns/{tab_a}/step", json={"format": "openai", "messages": [call("a1", "Oslo")]}).status_code == 200
        tab_b = on_a.post("/api/threads/tabs/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "Weather in Rome?"}]}).json()["turn_id"]  # fmt: skip
        assert on_a.post(f"/api/turns/{tab_b}/step", json={"format": "openai", "messages": [call("b1", "Rome")]}).status_code == 200

        # A's tool returns; the load balancer sends it to replica b, which never saw turn A
        late = {"role": "tool", "tool_call_id": "a1", "content": "4 C, rain"}
        stepped = on_b.post(f"/api/turns/{tab_a}/step", json={"format": "openai", "messages": [late]})
        assert stepped.status_code == 200, stepped.text
        wire = stepped.json()["context"]["openai"]
        shown_calls = [c["id"] for m in wire for c in (m.get("tool_calls") or [])]
        assert "b1" not in shown_calls  # B's call is still running: not shown without its result
        ended = on_b.post(f"/api/turns/{tab_a}/end", json={
            "format": "openai", "messages": [{"role": "assistant", "content": "Oslo: 4 C and rain."}]})  # fmt: skip
        assert ended.status_code == 200, ended.text

        # B's tool returns too; B's turn goes on where it began
        done = on_a.post(f"/api/turns/{tab_b}/step", json={"format": "openai", "messages": [
            {"role": "tool", "tool_call_id": "b1", "content": "19 C, sun"}]})  # fmt: skip
        assert done.status_code == 200, done.text
        stored = on_b.get("/api/threads/tabs/messages").json()["messages"]
        texts = [m for m in stored if m["role"] == "assistant"]
        assert any("Oslo: 4 C and rain." in str(m) for m in texts)
        results = {p["tool_call_id"]: p["result"] for m in stored for p in m["parts"] if p["type"] == "tool-result"}
        assert results == {"a1": "4 C, rain", "b1": "19 C, sun"}
