"""A trailing slash on a REST path is still redirected to the route without it (helper-142).

b856066 made ``GET``/``DELETE /api/threads/{thread_id:path}`` the last routes under /threads, so
that a gateway thread named 'user/1/chat' can be read and deleted as ``/api/threads/user%2F1%2Fchat``.
That route also matched every path under /api/threads/ that no other route took, which Starlette
used to redirect without its trailing slash (307): ``POST /api/threads/`` (create) answered 405,
``GET /api/threads/`` (list) 400, ``GET``/``DELETE /api/threads/t1/`` 404 for a thread that
exists (the delete erased nothing), and ``POST /api/threads/t1/messages/`` 405. A slash the
client wrote is the path's; only an encoded one (``%2F``) is part of an id."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("trailing-slash-142"))


def test_a_trailing_slash_reaches_the_route_without_it(env: Env) -> None:
    alice = auth(env.keys.alice)
    with httpx.Client(base_url=env.url, timeout=60, follow_redirects=True) as client:
        created = client.post("/api/threads/", headers=alice, json={"id": "ts-1", "resource_id": "alice"})
        assert created.status_code == 201, created.text  # was 405
        listed = client.get("/api/threads/", headers=alice)
        assert listed.status_code == 200, listed.text  # was 400 ("thread_id ''")
        assert "ts-1" in [t["id"] for t in listed.json()["threads"]]
        read = client.get("/api/threads/ts-1/", headers=alice)
        assert read.status_code == 200, read.text  # was 404 (thread 'ts-1/')
        assert read.json()["id"] == "ts-1"
        saved = client.post(
            "/api/threads/ts-1/messages/", headers=alice,
            json={"format": "openai", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert saved.status_code == 201, saved.text  # was 405
        assert len(client.get("/api/threads/ts-1/messages/", headers=alice).json()["messages"]) == 1
        deleted = client.delete("/api/threads/ts-1/", headers=alice)
        assert deleted.status_code == 200, deleted.text  # was 404, and the thread stayed
        assert client.get("/api/threads/ts-1", headers=alice).status_code == 404


def test_an_encoded_slash_is_still_part_of_the_id(env: Env) -> None:
    """What b856066 made reachable stays reachable: an id ending in '/' is named with '%2F'."""
    alice = auth(env.keys.alice)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        answer = client.post(
            "/v1/chat/completions", headers={**alice, "X-Obsmem-Thread": "ts-2/"},
            json={"model": "m", "messages": [{"role": "user", "content": "hello"}]},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        path = "/api/threads/" + quote("ts-2/", safe="")
        assert client.get(path, headers=alice).json()["id"] == "ts-2/"
        assert client.get(path, headers=auth(env.keys.bob)).status_code == 404
        assert client.delete(path, headers=alice).json() == {"deleted": True}
        assert client.get(path, headers=alice).status_code == 404
