"""``GET /api/threads`` pages with a cursor: ``next`` in each answer is the ``after`` of the next
page. With ``offset`` alone a client walking 3,000 threads made every page read (and skip) every
thread before it, and a thread deleted between two pages made the next page skip a thread that
was never deleted: the client never saw it. Following ``next``, every thread still there is seen
once, and a key still sees only its own resource's threads whatever cursor it sends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem.storage.paging import all_threads
from tests.server.conftest import Env, open_env
from tests.server.live import auth

MANY = 3000


async def _seed(env: Env) -> None:
    memory = env.live.service.memory
    for n in range(MANY):
        await memory.create_thread(f"p160-{n:04d}", "alice", org_id="acme")
    await memory.create_thread("p160-bob", "bob", org_id="acme")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("thread-pages-160")):
        env.live.call(_seed(env))
        yield env


def _walk(client: httpx.Client, key: str, limit: int, deleting: list[str]) -> list[str]:
    """Every thread id the listing gives, following ``next``; after the first page, the threads in
    ``deleting`` (already read) are deleted."""
    seen: list[str] = []
    params: dict[str, Any] = {"limit": limit}
    for page in range(100):
        answer = client.get("/api/threads", params=params, headers=auth(key))
        assert answer.status_code == 200, answer.text
        body = answer.json()
        seen += [t["id"] for t in body["threads"]]
        if page == 0:
            for thread in deleting:
                assert client.delete(f"/api/threads/{thread}", headers=auth(key)).status_code == 200
        if "next" not in body:  # (a full page has one; the next page may be empty)
            assert len(body["threads"]) < limit
            return seen
        params["after"] = body["next"]
    raise AssertionError("the listing did not end")


def test_following_next_sees_every_thread_once_though_some_are_deleted(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=120) as client:
        seen = _walk(client, env.keys.alice, 500, deleting=["p160-0003", "p160-0499"])
    assert seen == [f"p160-{n:04d}" for n in range(MANY)]  # every one, once, in order
    assert "p160-bob" not in seen


def test_a_cursor_whose_thread_is_gone_goes_on_after_it(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=120) as client:
        first = client.get("/api/threads", params={"limit": 3, "offset": 1000}, headers=auth(env.keys.alice)).json()
        gone = first["threads"][-1]["id"]
        assert client.delete(f"/api/threads/{gone}", headers=auth(env.keys.alice)).status_code == 200
        second = client.get("/api/threads", params={"limit": 3, "after": first["next"]}, headers=auth(env.keys.alice))
    assert second.status_code == 200, second.text
    left = [t.id for t in env.live.call(all_threads(env.live.service.memory.store, "alice"))]
    assert [t["id"] for t in second.json()["threads"]] == [t for t in left if t > gone][:3]


def test_cursors_reach_no_further_than_the_key(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=120) as client:
        alices = client.get("/api/threads", params={"limit": 2, "offset": 2000}, headers=auth(env.keys.alice)).json()
        cursor = alices["next"]
        assert cursor is not None
        bobs = client.get("/api/threads", params={"after": cursor}, headers=auth(env.keys.bob))
        # alice's thread is no cursor bob's key may use: as a missing one, the listing goes on from
        # the instant the cursor names (bob's thread is newer than alice's)
        assert bobs.status_code == 200 and [t["id"] for t in bobs.json()["threads"]] == ["p160-bob"]
        assert "p160-0" not in bobs.text
        refused = client.get("/api/threads", params={"resource_id": "alice", "after": cursor}, headers=auth(env.keys.globex))
        assert refused.status_code == 404 and "p160-" not in refused.text
        org = client.get("/api/threads", params={"resource_id": "alice", "after": cursor, "limit": 2},
                         headers=auth(env.keys.acme_org))  # fmt: skip
        last = alices["threads"][-1]["id"]
        left = [t.id for t in env.live.call(all_threads(env.live.service.memory.store, "alice"))]
        assert [t["id"] for t in org.json()["threads"]] == [t for t in left if t > last][:2]
        for bad in ("nope", "W10", "e30", "!!"):
            answer = client.get("/api/threads", params={"after": bad}, headers=auth(env.keys.alice))
            assert answer.status_code == 400 and answer.json()["error"]["argument"] == "after", bad
        both = client.get("/api/threads", params={"after": cursor, "offset": 5}, headers=auth(env.keys.alice))
        assert both.status_code == 400 and both.json()["error"]["argument"] == "offset"
