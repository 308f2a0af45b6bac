"""A rolling restart of ``obsmem serve`` replicas: a replica stopping must not end the REST turns
a client is still using. A turn is open in the store (a lease its steps renew) and any replica
continues it; before, ``Service.stop`` ended every turn the stopping replica held and released
its lease, so the client's next step, sent to a replica still up, got 404 and the turn was lost
(its question saved, its tool loop cut off)."""

from __future__ import annotations

from pathlib import Path

import httpx

from obsmem.server import ServerSettings, Service
from tests.integrations.agent_model import small_memory_config
from tests.server.live import auth, live_server, make_keys

QUESTION = {"role": "user", "content": "What's the weather in Oslo?"}
CALL = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
    "name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}  # fmt: skip
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 14 °C"}
ANSWER = {"role": "assistant", "content": "Sunny in Oslo, 14 °C."}


def _service(url: str) -> Service:
    return Service.open(url, settings=ServerSettings(), config=small_memory_config(), max_turn_wait=None)


def test_a_turn_survives_the_restart_of_the_replica_that_began_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    staying = _service(url)
    keys = make_keys(staying)
    with live_server(staying) as a:
        with httpx.Client(base_url=a.url, headers=auth(keys.alice), timeout=60) as on_a:
            assert on_a.post("/api/threads", json={"id": "trip"}).status_code == 201
            with live_server(_service(url)) as b, \
                    httpx.Client(base_url=b.url, headers=auth(keys.alice), timeout=60) as on_b:  # fmt: skip
                begun = on_b.post("/api/threads/trip/turns", json={"format": "openai", "messages": [QUESTION]})
                assert begun.status_code == 201, begun.text
                turn_id = begun.json()["turn_id"]
                stepped = on_b.post(f"/api/turns/{turn_id}/step", json={"format": "openai", "messages": [CALL]})
                assert stepped.status_code == 200, stepped.text
            # replica b stopped (a rolling restart); the client goes on through a
            stepped = on_a.post(f"/api/turns/{turn_id}/step", json={"format": "openai", "messages": [RESULT]})
            assert stepped.status_code == 200, stepped.text  # before: 404, the turn ended by b's stop
            wire = stepped.json()["context"]["openai"]
            assert wire[-1] == {**RESULT, "content": wire[-1]["content"]} and "14" in wire[-1]["content"]
            assert any(m["role"] == "user" and m["content"] == QUESTION["content"] for m in wire)
            ended = on_a.post(f"/api/turns/{turn_id}/end", json={"format": "openai", "messages": [ANSWER]})
            assert ended.status_code == 200, ended.text
            stored = on_a.get("/api/threads/trip/messages").json()["messages"]
            assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
            gone = on_a.post(f"/api/turns/{turn_id}/step", json={"messages": []})
            assert gone.status_code == 404  # ended means ended


def test_a_stop_ends_the_turns_no_replica_holds_open_any_more(tmp_path: Path) -> None:
    """What a stop still ends: a turn whose lease is gone (expired, or ended elsewhere), so its
    memory work starts as an end starts it. One still open is only left to the other replicas."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    service = _service(url)
    keys = make_keys(service)
    with live_server(service) as a, httpx.Client(base_url=a.url, headers=auth(keys.alice), timeout=60) as on_a:
        assert on_a.post("/api/threads", json={"id": "trip"}).status_code == 201
        ids = [
            on_a.post("/api/threads/trip/turns", json={"format": "openai", "messages": [QUESTION]}).json()["turn_id"]
            for _ in range(2)
        ]
        lapsed, open_ = (service.turns[turn_id].turn for turn_id in ids)
        store = service.memory.store
        lease = a.call(store.get_lease(f"rest-turn:{ids[0]}"))
        a.call(store.release_lease(lease.key, lease.owner))  # as when its TTL ran out and its row went
    assert lapsed.ended and not open_.ended
    assert service.turns == {}

