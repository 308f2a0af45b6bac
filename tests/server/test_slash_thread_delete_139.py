"""A thread the gateway made under an id holding '/' (which it takes on purpose: a client names its
thread 'user/1/chat' and never reads it through ``/api/threads/{id}``) can be deleted, and read,
by its id over REST like any other: ``DELETE /api/threads/user%2F1%2Fchat``. Delete means gone:
its text is in no export afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth

SECRET = "SLASH-SECRET-7731"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("slash-thread-139"))


def said(client: httpx.Client, key: str, thread_id: str, text: str) -> None:
    answer = client.post(
        "/v1/chat/completions", headers={**auth(key), "X-Obsmem-Thread": thread_id},
        json={"model": "m", "messages": [{"role": "user", "content": text}]},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("thread_id", ["user/1/chat", "a/b", "trailing/"])
def test_a_gateway_thread_with_a_slash_is_deleted_over_rest(env: Env, thread_id: str) -> None:
    alice = auth(env.keys.alice)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        said(client, env.keys.alice, thread_id, f"My code is {SECRET}.")
        assert SECRET in client.get("/api/resources/alice/export", headers=alice).text
        path = "/api/threads/" + quote(thread_id, safe="")
        # before: both answered 404 NotFoundError "Not Found" (no route: the decoded '/' split the id)
        read = client.get(path, headers=alice)
        assert read.status_code == 200, read.text
        assert read.json()["id"] == thread_id
        # another key gets the 404 any other thread it may not see gets
        for other in (env.keys.bob, env.keys.globex):
            for method in ("GET", "DELETE"):
                hidden = client.request(method, path, headers=auth(other))
                assert hidden.status_code == 404, hidden.text
                assert hidden.json()["error"]["type"] == "ThreadNotFoundError"
        deleted = client.delete(path, headers=alice)
        assert deleted.status_code == 200, deleted.text
        assert deleted.json() == {"deleted": True}
        assert client.get(path, headers=alice).status_code == 404
        listed = client.get("/api/threads", headers=alice).json()["threads"]
        assert thread_id not in [t["id"] for t in listed]
        exported = client.get("/api/resources/alice/export", headers=alice)
        assert SECRET not in exported.text


def test_unknown_paths_under_a_thread_stay_typed_json_errors(env: Env) -> None:
    alice = auth(env.keys.alice)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        for method, path in (("GET", "/api/threads/nope/nothing/here"), ("DELETE", "/api/threads/nope/x"),
                             ("POST", "/api/threads/nope/x/y")):  # fmt: skip
            answer = client.request(method, path, headers=alice)
            assert answer.status_code in (404, 405), answer.text
            assert answer.json()["error"]["type"] in ("ThreadNotFoundError", "NotFoundError", "MethodNotAllowedError")
