"""Open REST turns are bounded per server (``MAX_OPEN_TURNS``); past the bound the oldest was
ended, whoever's it was (found by helper 196). A tenant beginning turns in a loop ended every
other tenant's open turn: their next step or end answered 404, their tool loop cut off. The
turns a bound ends are now the flooding org's own: its oldest past its share
(``MAX_OPEN_TURNS_PER_ORG``), and at the server's bound the oldest of the org holding the most."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from obsmem.server import service as service_module
from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("turn-room"))


def _begin(client: httpx.Client, key: str, thread: str, text: str) -> str:
    begun = client.post(f"/api/threads/{thread}/turns", headers=auth(key),
                        json={"format": "openai", "messages": [{"role": "user", "content": text}]})  # fmt: skip
    assert begun.status_code == 201, begun.text
    turn_id: str = begun.json()["turn_id"]
    return turn_id


def _step(client: httpx.Client, key: str, turn_id: str, call: str) -> httpx.Response:
    return client.post(f"/api/turns/{turn_id}/step", headers=auth(key), json={"format": "openai", "messages": [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": call, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}]})  # fmt: skip


@pytest.mark.parametrize("bound", ["server", "org"])
def test_a_tenant_opening_turns_ends_only_its_own(env: Env, bound: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if bound == "server":
        monkeypatch.setattr(service_module, "MAX_OPEN_TURNS", 12)
    else:
        monkeypatch.setattr(service_module, "MAX_OPEN_TURNS_PER_ORG", 12, raising=False)
    keys = env.keys
    with httpx.Client(base_url=env.url, timeout=60) as client:
        alice_thread, flood_thread = f"loop-{bound}", f"flood-{bound}"
        for key, thread in ((keys.alice, alice_thread), (keys.globex, flood_thread)):
            assert client.post("/api/threads", json={"id": thread}, headers=auth(key)).status_code == 201
        alice_turn = _begin(client, keys.alice, alice_thread, "Look the order up, please.")
        assert _step(client, keys.alice, alice_turn, "call_1").status_code == 200
        flood = [_begin(client, keys.globex, flood_thread, f"turn {n}") for n in range(20)]
        # alice's tool loop goes on: her result and her reply are taken
        stepped = client.post(f"/api/turns/{alice_turn}/step", headers=auth(keys.alice), json={"format": "openai",
                              "messages": [{"role": "tool", "tool_call_id": "call_1", "content": "order 7: shipped"}]})  # fmt: skip
        assert stepped.status_code == 200, stepped.text
        ended = client.post(f"/api/turns/{alice_turn}/end", headers=auth(keys.alice),
                            json={"format": "openai", "messages": [{"role": "assistant", "content": "It shipped."}]})  # fmt: skip
        assert ended.status_code == 200, ended.text
        # the bound still holds: the flooder's oldest turns were ended, its newest are open
        assert _step(client, keys.globex, flood[0], "call_f0").status_code == 404
        assert _step(client, keys.globex, flood[-1], "call_f1").status_code == 200
    saved = env.live.call(env.live.service.memory.list_messages(alice_thread))
    assert saved[-1].text == "It shipped." and "order 7: shipped" in str(saved[-2].tool_results[0].result)
