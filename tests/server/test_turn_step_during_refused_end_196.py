"""A step sent while an end of the same REST turn is under way, the end then refused (found by
helper 196): the end lets go of the turn's lease before ending it and holds it again when the
end is refused, so the step, arriving in between, answered 404 ("it ended, expired or never
began") for a turn that stayed open; a client takes that for its turn gone. A step or an end
that finds the turn let go of by an end under way on this server now waits for that end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem import Turn
from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("turn-lock"))


def _openai(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"format": "openai", "messages": list(messages)}


def test_a_step_during_a_refused_end_finds_the_turn_open(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    key = env.keys.alice
    entered, go_on = threading.Event(), threading.Event()
    original = Turn.end

    async def end_held_open(self: Turn, *args: Any, **kwargs: Any) -> None:
        entered.set()  # the end request is past its lease release: hold it here until the step is sent
        while not go_on.is_set():
            await asyncio.sleep(0.01)
        await original(self, *args, **kwargs)

    monkeypatch.setattr(Turn, "end", end_held_open)
    with httpx.Client(base_url=env.url, timeout=60, headers=auth(key)) as client:
        assert client.post("/api/threads", json={"id": "lock-1"}).status_code == 201
        begun = client.post("/api/threads/lock-1/turns", json=_openai({"role": "user", "content": "Find order 7."}))
        turn_id = begun.json()["turn_id"]
        call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        assert client.post(f"/api/turns/{turn_id}/step",
                           json=_openai({"role": "assistant", "content": None, "tool_calls": [call]})).status_code == 200

        answers: dict[str, httpx.Response] = {}

        def send(name: str, path: str, body: dict[str, Any]) -> None:
            with httpx.Client(base_url=env.url, timeout=60, headers=auth(key)) as own:
                answers[name] = own.post(path, json=body)

        # the end comes too early (the call still waits for its result): refused, the turn stays open
        ending = threading.Thread(target=send, args=("end", f"/api/turns/{turn_id}/end",
                                                     _openai({"role": "assistant", "content": "Done."})))
        ending.start()
        assert entered.wait(60)
        stepping = threading.Thread(target=send, args=("step", f"/api/turns/{turn_id}/step",
                                                       _openai({"role": "tool", "tool_call_id": "call_1",
                                                                "content": "order 7: shipped"})))  # fmt: skip
        stepping.start()
        stepping.join(2)  # (before the fix it was answered at once, 404; now it waits for the end)
        go_on.set()
        ending.join(60)
        stepping.join(60)
    assert answers["end"].status_code == 400, answers["end"].text
    assert answers["step"].status_code == 200, answers["step"].text
    monkeypatch.setattr(Turn, "end", original)
    with httpx.Client(base_url=env.url, timeout=60, headers=auth(key)) as client:
        ended = client.post(f"/api/turns/{turn_id}/end", json=_openai({"role": "assistant", "content": "It shipped."}))
        assert ended.status_code == 200, ended.text
