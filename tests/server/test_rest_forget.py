"""REST forget: ``POST /api/threads/{id}/forget`` and ``POST /api/resources/{id}/forget`` remove a
value (a card number a user pasted, a name) as :meth:`obsmem.Memory.forget` does, confined to what
the key may reach. Before, only MCP, the CLI and the Python API could forget: a service's client
could delete a whole thread but not erase one value from it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("rest-forget")):
        with httpx.Client(base_url=env.url, timeout=60) as client:
            for key, thread in ((env.keys.alice, "rf-a1"), (env.keys.alice, "rf-a2"), (env.keys.bob, "rf-b1"),
                                (env.keys.globex, "rf-c1")):  # fmt: skip
                assert client.post("/api/threads", json={"id": thread}, headers=auth(key)).status_code == 201
        yield env


def say(env: Env, key: str, thread: str, text: str) -> None:
    said = httpx.post(env.url + f"/api/threads/{thread}/messages", headers=auth(key), timeout=60,
                      json={"format": "openai", "messages": [{"role": "user", "content": text}]})  # fmt: skip
    assert said.status_code == 201, said.text


def messages(env: Env, key: str, thread: str) -> str:
    page = httpx.get(env.url + f"/api/threads/{thread}/messages", headers=auth(key), timeout=60)
    assert page.status_code == 200, page.text
    return json.dumps(page.json()["messages"])


def forget(env: Env, key: str, path: str, value: Any) -> httpx.Response:
    return httpx.post(env.url + f"/api/{path}/forget", json={"value": value}, headers=auth(key), timeout=60)


def remember(env: Env, key: str, text: str) -> dict[str, Any]:
    made = httpx.post(env.url + "/api/knowledge", json={"text": text}, headers=auth(key), timeout=60)
    assert made.status_code == 201, made.text
    body: dict[str, Any] = made.json()
    return body


def search(env: Env, key: str, query: str) -> list[tuple[str, str]]:
    found = httpx.get(env.url + "/api/knowledge/search", params={"q": query}, headers=auth(key), timeout=60)
    assert found.status_code == 200, found.text
    return [(hit["scope"], hit["text"]) for hit in found.json()["hits"]]


def test_a_thread_forget_removes_the_value_from_that_thread_only(env: Env) -> None:
    card = "4111 1111 1111 1111"
    for key, thread in ((env.keys.alice, "rf-a1"), (env.keys.alice, "rf-a2"), (env.keys.bob, "rf-b1")):
        say(env, key, thread, f"My card is {card}, charge it for the trip.")
    answer = forget(env, env.keys.alice, "threads/rf-a1", card)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["thread_id"] == "rf-a1" and sum(body["forgotten"].values()) >= 1, body
    assert card not in messages(env, env.keys.alice, "rf-a1")
    assert card in messages(env, env.keys.alice, "rf-a2")  # another thread: the resource forget's job
    assert card in messages(env, env.keys.bob, "rf-b1")


def test_a_resource_forget_reaches_its_threads_and_no_other_users(env: Env) -> None:
    value = "Hollowbrook Lane 7"
    for key, thread in ((env.keys.alice, "rf-a1"), (env.keys.alice, "rf-a2"), (env.keys.bob, "rf-b1")):
        say(env, key, thread, f"I moved to {value} last week.")
    answer = forget(env, env.keys.alice, "resources/alice", value)
    assert answer.status_code == 200, answer.text
    assert answer.json()["resource_id"] == "alice"
    assert value not in messages(env, env.keys.alice, "rf-a1") + messages(env, env.keys.alice, "rf-a2")
    assert value in messages(env, env.keys.bob, "rf-b1")


def test_a_key_forgets_only_where_it_may_write(env: Env) -> None:
    value = "Zanzibar-771"
    say(env, env.keys.alice, "rf-a1", f"The locker code is {value}.")
    say(env, env.keys.globex, "rf-c1", f"The locker code is {value}.")
    refused = [
        (env.keys.bob, "threads/rf-a1", 404),  # another resource's thread: as if it did not exist
        (env.keys.globex, "threads/rf-a1", 404),  # another org's
        (env.keys.bob, "resources/alice", 404),
        (env.keys.globex, "resources/alice", 404),
        (env.keys.alice, "resources/carol", 404),
        (env.keys.alice_read_only, "threads/rf-a1", 403),
        (env.keys.alice_read_only, "resources/alice", 403),
        (env.keys.alice, "threads/no-such-thread", 404),
    ]
    for key, path, status in refused:
        answer = forget(env, key, path, value)
        assert answer.status_code == status, (path, answer.text)
        assert value not in answer.text
    assert value in messages(env, env.keys.alice, "rf-a1")
    assert value in messages(env, env.keys.globex, "rf-c1")
    # the org key reaches alice's resource, and the resource's own key its own
    assert forget(env, env.keys.acme_org, "resources/alice", value).status_code == 200
    assert value not in messages(env, env.keys.alice, "rf-a1")
    assert value in messages(env, env.keys.globex, "rf-c1")


def test_a_forget_reaches_the_keys_knowledge_and_leaves_the_orgs(env: Env) -> None:
    value = "Kestrel-budget"
    org_fact = f"Every team reports on the {value} each quarter"
    assert remember(env, env.keys.acme_org, org_fact)["scope"] == "org:acme"
    alice_fact = f"Alice owns the {value}"
    assert remember(env, env.keys.alice, alice_fact)["scope"] == "org:acme/resource:alice"
    bob_fact = f"Bob audits the {value}"
    assert remember(env, env.keys.bob, bob_fact)["scope"] == "org:acme/resource:bob"
    say(env, env.keys.alice, "rf-a2", f"Remind me about the {value}.")

    assert forget(env, env.keys.alice, "resources/alice", value).status_code == 200

    assert value not in messages(env, env.keys.alice, "rf-a2")
    assert ("org:acme/resource:alice", alice_fact) not in search(env, env.keys.alice, value)
    assert ("org:acme", org_fact) in search(env, env.keys.alice, value)  # a resource key may not change it
    assert ("org:acme/resource:bob", bob_fact) in search(env, env.keys.bob, value)
    # and the value is refused if captured again in alice's knowledge
    again = httpx.post(env.url + "/api/knowledge", json={"text": f"Alice owns the {value}"},
                       headers=auth(env.keys.alice), timeout=60)  # fmt: skip
    assert again.status_code == 409 and value not in again.text, again.text
    assert ("org:acme/resource:alice", alice_fact) not in search(env, env.keys.alice, value)


def test_a_name_in_the_keys_audit_word_is_forgotten(env: Env) -> None:
    """The key is audited as 'key:<id>': forgetting 'Key' (a user surnamed Key) is not refused."""
    say(env, env.keys.alice, "rf-a1", "Ask Mr Key about the lease.")
    answer = forget(env, env.keys.alice, "threads/rf-a1", "Key")
    assert answer.status_code == 200, answer.text
    assert "Mr Key" not in messages(env, env.keys.alice, "rf-a1")


@pytest.mark.parametrize("value", ["", "x" * 10_001, None, 42, ["a"]])
def test_a_value_that_is_no_text_or_too_long_is_refused(env: Env, value: Any) -> None:
    say(env, env.keys.alice, "rf-a1", "Nothing to see here.")
    answer = forget(env, env.keys.alice, "threads/rf-a1", value)
    assert answer.status_code == 422, answer.text
    assert "Nothing to see here." in messages(env, env.keys.alice, "rf-a1")
