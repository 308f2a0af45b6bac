"""``GET /api/threads?order=newest``: a resource's threads most recently active first, paged with
``next``; only the caller's resource and org, as the default listing (which stays oldest first)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem import Message
from tests.server.conftest import Env, open_env
from tests.server.live import auth


async def _seed(env: Env) -> None:
    memory = env.live.service.memory
    for n in range(6):
        await memory.create_thread(f"n170-{n}", "alice", org_id="acme")
    await memory.create_thread("n170-bob", "bob", org_id="acme")
    await memory.create_thread("n170-carol", "carol", org_id="globex")
    await memory.save_messages("n170-2", [Message.user("back to this one")])
    await memory.save_messages("n170-carol", [Message.user("the newest of all, elsewhere")])
    # a resource one org's thread holds, and another org's thread joined
    await memory.create_thread("n170-mixed-a", "mixed", org_id="acme")
    await memory.create_thread("n170-mixed-g", "mixed", org_id="globex")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("threads-newest-170")):
        env.live.call(_seed(env))
        yield env


def _listed(client: httpx.Client, key: str, **params: Any) -> dict[str, Any]:
    answer = client.get("/api/threads", params=params, headers=auth(key))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _ids(body: dict[str, Any]) -> list[str]:
    return [t["id"] for t in body["threads"]]


def test_newest_first_paged_with_next(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        whole = _listed(client, env.keys.alice, order="newest")
        assert _ids(whole) == ["n170-2", "n170-5", "n170-4", "n170-3", "n170-1", "n170-0"]
        assert "next" not in whole
        seen: list[str] = []
        params: dict[str, Any] = {"order": "newest", "limit": 2}
        for page in range(10):
            body = _listed(client, env.keys.alice, **params)
            seen += _ids(body)
            if page == 0:  # a thread already shown and one not shown yet get a message
                for thread in ("n170-5", "n170-1"):
                    sent = client.post(
                        f"/api/threads/{thread}/messages", headers=auth(env.keys.alice),
                        json={"messages": [{"role": "user", "parts": [{"type": "text", "text": "more"}]}]},
                    )
                    assert sent.status_code == 201, sent.text
            if "next" not in body:
                break
            params["after"] = body["next"]
        # each thread whose activity did not change once, in order; the two that moved went to the top
        assert seen == ["n170-2", "n170-5", "n170-4", "n170-3", "n170-0"]
        assert _ids(_listed(client, env.keys.alice, order="newest", limit=3)) == ["n170-1", "n170-5", "n170-2"]
        # the default order is unchanged
        assert _ids(_listed(client, env.keys.alice)) == [f"n170-{n}" for n in range(6)]


def test_only_the_callers_resource_and_org(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        assert _ids(_listed(client, env.keys.bob, order="newest")) == ["n170-bob"]
        assert _ids(_listed(client, env.keys.globex, order="newest")) == ["n170-carol"]
        org = _listed(client, env.keys.acme_org, order="newest", resource_id="alice")
        assert "n170-carol" not in _ids(org) and len(_ids(org)) == 6
        assert _ids(org) == _ids(_listed(client, env.keys.alice, order="newest"))
        assert _ids(org) != _ids(_listed(client, env.keys.alice))  # (n170-2 has a message: not oldest first)
        for key, resource in ((env.keys.globex, "alice"), (env.keys.bob, "alice"), (env.keys.acme_org, "carol"),
                              (env.keys.acme_org, "mixed"), (env.keys.globex, "mixed")):  # fmt: skip
            refused = client.get("/api/threads", params={"order": "newest", "resource_id": resource}, headers=auth(key))
            assert refused.status_code == 404, (resource, refused.text)
        # alice's cursor sent with bob's key lists bob's resource from that position, nothing of alice's
        cursor = _listed(client, env.keys.alice, order="newest", limit=1)["next"]
        assert set(_ids(_listed(client, env.keys.bob, order="newest", after=cursor))) <= {"n170-bob"}


def test_cursors_and_offsets_that_do_not_fit(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        oldest = _listed(client, env.keys.alice, limit=1)["next"]
        for params in ({"order": "newest", "after": oldest}, {"order": "newest", "after": "bm9wZQ"},
                       {"order": "newest", "offset": 2}, {"order": "sideways"}):  # fmt: skip
            answer = client.get("/api/threads", params=params, headers=auth(env.keys.alice))
            assert answer.status_code in (400, 422), (params, answer.text)
