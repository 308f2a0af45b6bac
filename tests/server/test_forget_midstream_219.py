"""A forget while the gateway's upstream model is answering (found by helper 218): the forget
answered 200 and removed the value, then the model's answer ("You said: My PIN is …") was stored
after it and the thread held the value again, streamed or not. The answer is now stored with the
forget applied (a thread's forget or its resource's); a request after the forget is stored as
the user says it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth

SECRET = "SECRET-4417"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("forget-midstream-219"))


def _ask(env: Env, thread: str, stream: bool, text: str) -> httpx.Response:
    with httpx.Client(base_url=env.url, timeout=120) as client:
        return client.post("/v1/chat/completions", headers={**auth(env.keys.alice), "X-Obsmem-Thread": thread},
                           json={"model": "m", "user": "alice", "stream": stream,
                                 "messages": [{"role": "user", "content": text}]})  # fmt: skip


def _stored(env: Env, thread: str) -> str:
    page = httpx.get(env.url + f"/api/threads/{thread}/messages", headers=auth(env.keys.alice), timeout=60)
    assert page.status_code == 200, page.text
    return json.dumps(page.json()["messages"])


@pytest.mark.parametrize("scope", ["thread", "resource"])
@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_in_flight_during_a_forget(env: Env, stream: bool, scope: str) -> None:
    thread = f"fm-{stream}-{scope}"
    real = env.upstream.responder
    reached, go = threading.Event(), threading.Event()

    def held(recorded: Any) -> Any:  # the model answers once the forget is done
        reached.set()
        go.wait(60)
        return real(recorded)  # type: ignore[misc]

    env.upstream.responder = held
    out: list[httpx.Response] = []
    asking = threading.Thread(target=lambda: out.append(_ask(env, thread, stream, f"My PIN is {SECRET}, note it")))
    asking.start()
    try:
        assert reached.wait(60)
        path = f"threads/{thread}" if scope == "thread" else "resources/alice"
        forgot = httpx.post(env.url + f"/api/{path}/forget", json={"value": SECRET}, headers=auth(env.keys.alice),
                            timeout=60)  # fmt: skip
        assert forgot.status_code == 200, forgot.text
    finally:
        go.set()
        asking.join(60)
        env.upstream.responder = real
    assert out and out[0].status_code == 200, out and out[0].text
    assert SECRET in out[0].text  # the model said it (its answer went to the user as it came)
    assert SECRET not in _stored(env, thread)


def test_a_request_after_the_forget_is_stored_as_said(env: Env) -> None:
    thread = "fm-after"
    assert _ask(env, thread, False, "hello").status_code == 200
    forgot = httpx.post(env.url + f"/api/threads/{thread}/forget", json={"value": SECRET}, headers=auth(env.keys.alice),
                        timeout=60)  # fmt: skip
    assert forgot.status_code == 200, forgot.text
    assert _ask(env, thread, False, f"My PIN is {SECRET} again").status_code == 200
    assert SECRET in _stored(env, thread)
