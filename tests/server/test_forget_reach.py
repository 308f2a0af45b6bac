"""MCP ``forget`` reaches the knowledge its key may change, and no further: a key bound to a
resource forgets a value in that resource's threads and knowledge, while the org's shared records
(which the same key may not edit through the review API either) stay; an org key's forget still
reaches the org's records. Driven through the MCP SDK's client against the live server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.test_mcp import http_client, payload
from tests.server.live import auth

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("forget-reach")):
        with httpx.Client(base_url=env.url, timeout=60) as client:
            for key, thread in ((env.keys.alice, "fr-alice"), (env.keys.bob, "fr-bob")):
                assert client.post("/api/threads", json={"id": thread}, headers=auth(key)).status_code == 201
        yield env


def remember(env: Env, key: str, text: str) -> dict[str, Any]:
    made = httpx.post(env.url + "/api/knowledge", json={"text": text}, headers=auth(key), timeout=60)
    assert made.status_code == 201, made.text
    body: dict[str, Any] = made.json()
    return body


def say(env: Env, key: str, thread: str, text: str) -> None:
    said = httpx.post(env.url + f"/api/threads/{thread}/messages", headers=auth(key), timeout=60,
                      json={"format": "openai", "messages": [{"role": "user", "content": text}]})  # fmt: skip
    assert said.status_code == 201, said.text


def search(env: Env, key: str, query: str) -> list[tuple[str, str]]:
    found = httpx.get(env.url + "/api/knowledge/search", params={"q": query}, headers=auth(key), timeout=60)
    assert found.status_code == 200, found.text
    return [(hit["scope"], hit["text"]) for hit in found.json()["hits"]]


def messages(env: Env, key: str, thread: str) -> str:
    page = httpx.get(env.url + f"/api/threads/{thread}/messages", headers=auth(key), timeout=60)
    assert page.status_code == 200, page.text
    return json.dumps(page.json()["messages"])


async def forget(env: Env, key: str, arguments: dict[str, str]) -> dict[str, int]:
    async with http_client(env, key) as client:
        counts: dict[str, int] = payload(await client.call_tool("forget", arguments))
    return counts


@pytest.mark.parametrize("where", ["thread_id", "resource_id"])
async def test_a_resource_keys_forget_leaves_the_orgs_knowledge(env: Env, where: str) -> None:
    keys, value = env.keys, f"Phoenix-{where}"
    org_fact = f"The company VPN password rotates on the {value} schedule"
    org = remember(env, keys.acme_org, org_fact)
    assert org["scope"] == "org:acme"
    alice_fact = f"Alice owns the {value} budget"
    assert remember(env, keys.alice, alice_fact)["scope"] == "org:acme/resource:alice"
    bob_fact = f"Bob leads the {value} migration"
    assert remember(env, keys.bob, bob_fact)["scope"] == "org:acme/resource:bob"
    say(env, keys.alice, "fr-alice", f"Remind me about {value} tomorrow.")
    assert ("org:acme", org_fact) in search(env, keys.alice, value)
    # the review API already refuses this key changing the org's record
    edit = httpx.post(env.url + f"/api/knowledge/review/{org['id']}/edit", json={"text": "changed"},
                      headers=auth(keys.alice), timeout=60)  # fmt: skip
    assert edit.status_code == 404, edit.text

    target = {"thread_id": "fr-alice"} if where == "thread_id" else {"resource_id": "alice"}
    await forget(env, keys.alice, {"value": value, **target})

    assert value not in messages(env, keys.alice, "fr-alice")
    assert (("org:acme/resource:alice", alice_fact)) not in search(env, keys.alice, value)
    assert ("org:acme", org_fact) in search(env, keys.acme_org, value), "the org's record was deleted"
    assert ("org:acme", org_fact) in search(env, keys.alice, value)
    assert ("org:acme/resource:bob", bob_fact) in search(env, keys.bob, value)


async def test_an_org_keys_forget_still_reaches_the_orgs_knowledge(env: Env) -> None:
    keys, value = env.keys, "Osprey-org"
    org_fact = f"The company VPN password rotates on the {value} schedule"
    assert remember(env, keys.acme_org, org_fact)["scope"] == "org:acme"
    alice_fact = f"Alice owns the {value} budget"
    remember(env, keys.alice, alice_fact)
    say(env, keys.alice, "fr-alice", f"Remind me about {value} tomorrow.")

    await forget(env, keys.acme_org, {"value": value, "thread_id": "fr-alice"})

    assert value not in messages(env, keys.alice, "fr-alice")
    assert search(env, keys.acme_org, value) == []
    assert search(env, keys.alice, value) == []
