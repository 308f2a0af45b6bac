"""Tenancy: for every endpoint, a positive control with the right key, and negatives with a key of
a sibling resource (acme/bob) and of another org (globex/carol) on the same fixture: the negatives
get 404 or 403 and none of alice's data, and change nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.server.conftest import Env
from tests.server.live import auth

SECRET = "ALICE-SECRET-4242"
REPLY = "m-alice-reply"
Call = Callable[[httpx.Client, str], httpx.Response]


@dataclass
class World:
    env: Env
    client: httpx.Client

    def as_(self, key: str, method: str, path: str, **kwargs: object) -> httpx.Response:
        return self.client.request(method, path, headers=auth(key), **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def world(env: Env) -> Iterator[World]:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        w = World(env, client)
        keys = env.keys
        for key, thread in ((keys.alice, "t-alice"), (keys.bob, "t-bob"), (keys.globex, "t-carol")):
            assert w.as_(key, "POST", "/api/threads", json={"id": thread}).status_code == 201
        said = {"format": "openai", "messages": [{"role": "user", "content": f"My vault code is {SECRET}."}]}
        assert w.as_(keys.alice, "POST", "/api/threads/t-alice/messages", json=said).status_code == 201
        for key, thread in ((keys.bob, "t-bob"), (keys.globex, "t-carol")):
            w.as_(key, "POST", f"/api/threads/{thread}/messages", json={
                "format": "openai", "messages": [{"role": "user", "content": "hello"}]})  # fmt: skip
        assert w.as_(keys.alice, "POST", "/api/knowledge", json={"text": f"Alice's vault code is {SECRET}"}).status_code == 201
        # a reply saved through a turn keeps its receipt (GET /api/messages/{id}/receipt)
        turn = w.as_(keys.alice, "POST", "/api/threads/t-alice/turns", json={"messages": [
            {"role": "user", "parts": [{"type": "text", "text": "What is my vault code?"}]}]})  # fmt: skip
        assert turn.status_code == 201, turn.text
        ended = w.as_(keys.alice, "POST", f"/api/turns/{turn.json()['turn_id']}/end", json={"messages": [
            {"id": REPLY, "role": "assistant", "parts": [{"type": "text", "text": "It is in your notes."}]}]})  # fmt: skip
        assert ended.status_code == 200, ended.text
        yield w


def _negatives(world: World, call: Call, *, statuses: tuple[int, ...] = (403, 404)) -> None:
    keys = world.env.keys
    for name, key in (("sibling resource", keys.bob), ("other org", keys.globex)):
        response = call(world.client, key)
        assert response.status_code in statuses, (name, response.status_code, response.text)
        assert SECRET not in response.text, name
        assert set(response.json()) == {"error"}, name


def _alice_messages(world: World) -> list[str]:
    page = world.as_(world.env.keys.alice, "GET", "/api/threads/t-alice/messages").json()
    return [json.dumps(m) for m in page["messages"]]


READS: dict[str, tuple[str, str, dict[str, object]]] = {
    "get thread": ("GET", "/api/threads/t-alice", {}),
    "list threads": ("GET", "/api/threads", {"params": {"resource_id": "alice"}}),
    "list messages": ("GET", "/api/threads/t-alice/messages", {}),
    "context": ("GET", "/api/threads/t-alice/context", {}),
    "observations": ("GET", "/api/threads/t-alice/observations", {}),
    "generations": ("GET", "/api/threads/t-alice/generations", {}),
    "recall": ("POST", "/api/threads/t-alice/recall", {"json": {"mode": "messages"}}),
    "export": ("GET", "/api/resources/alice/export", {}),
    "usage": ("GET", "/api/resources/alice/usage", {}),
    "thread usage": ("GET", "/api/threads/t-alice/usage", {}),
    "status": ("GET", "/api/threads/t-alice/status", {}),
    "status stream": ("GET", "/api/threads/t-alice/status/stream", {"params": {"max_s": 0.2}}),
    "receipt": ("GET", f"/api/messages/{REPLY}/receipt", {"params": {"resolve": "true", "text": "true"}}),
    "knowledge search of the resource": ("GET", "/api/knowledge/search", {"params": {"q": "vault code", "resource_id": "alice"}}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(READS))
def test_reads(world: World, name: str) -> None:
    method, path, kwargs = READS[name]
    positive = world.as_(world.env.keys.alice, method, path, **kwargs)
    assert positive.status_code == 200, positive.text
    if name in ("list messages", "context", "recall", "export", "knowledge search of the resource", "receipt"):
        assert SECRET in positive.text
    _negatives(world, lambda client, key: client.request(method, path, headers=auth(key), **kwargs))  # type: ignore[arg-type]


def test_default_listings_hold_only_the_keys_own_data(world: World) -> None:
    keys = world.env.keys
    for key, own in ((keys.bob, "t-bob"), (keys.globex, "t-carol")):
        threads = world.as_(key, "GET", "/api/threads").json()["threads"]
        assert [t["id"] for t in threads] == [own]
        hits = world.as_(key, "GET", "/api/knowledge/search", params={"q": "vault code"})
        assert hits.status_code == 200 and SECRET not in hits.text
    assert SECRET in world.as_(keys.alice, "GET", "/api/knowledge/search", params={"q": "vault code"}).text


def test_id_guessing_and_prefix_ids_look_like_missing_threads(world: World) -> None:
    bob = world.env.keys.bob
    missing = world.as_(bob, "GET", "/api/threads/t-nobody").json()["error"]
    for guess in ("t-alice", "t-ali", "t-", "t-alice%", "t-alice*", "T-ALICE"):
        error = world.as_(bob, "GET", f"/api/threads/{guess}").json()["error"]
        assert error["type"] == missing["type"] == "ThreadNotFoundError"
        assert error["message"] == missing["message"].replace("t-nobody", guess)
    # a recall from bob's own thread that targets alice's thread by id
    _negatives(world, lambda client, key: client.post(
        f"/api/threads/{'t-bob' if key == bob else 't-carol'}/recall",
        json={"mode": "messages", "target_thread_id": "t-alice"}, headers=auth(key)))  # fmt: skip


def test_writes_into_another_tenants_thread_are_refused_and_change_nothing(world: World) -> None:
    before = _alice_messages(world)
    body = {"format": "openai", "messages": [{"role": "user", "content": "injected"}]}
    _negatives(world, lambda client, key: client.post("/api/threads/t-alice/messages", json=body, headers=auth(key)))
    _negatives(world, lambda client, key: client.post("/api/threads/t-alice/turns", json=body, headers=auth(key)))
    _negatives(world, lambda client, key: client.post(
        "/api/threads", json={"id": "t-alice2", "resource_id": "alice"}, headers=auth(key)))  # fmt: skip
    # the id of another tenant's thread cannot be taken over (nothing of it is shown)
    for key in (world.env.keys.bob, world.env.keys.globex):
        taken = world.as_(key, "POST", "/api/threads", json={"id": "t-alice"})
        assert taken.status_code == 409 and SECRET not in taken.text and "acme" not in taken.text
    assert _alice_messages(world) == before
    positive = world.as_(world.env.keys.alice, "POST", "/api/threads/t-alice/messages", json={
        "format": "openai", "messages": [{"role": "user", "content": "still mine"}]})  # fmt: skip
    assert positive.status_code == 201


def test_another_tenants_message_id_is_refused_showing_nothing_of_it(world: World) -> None:
    """Message ids are unique in a store: an id in use is refused whoever holds it (the README
    says so, and that the refusal tells the id exists); nothing of its message, thread or org
    is shown, and the message is unchanged."""
    before = _alice_messages(world)
    keys = world.env.keys
    for key, thread in ((keys.bob, "t-bob"), (keys.globex, "t-carol")):
        body = {"messages": [{"id": REPLY, "role": "assistant", "parts": [{"type": "text", "text": "overwritten"}]}]}
        taken = world.as_(key, "POST", f"/api/threads/{thread}/messages", json=body)
        assert taken.status_code == 400, taken.text
        assert set(taken.json()) == {"error"}
        for secret in (SECRET, "t-alice", "acme", "in your notes"):  # the id itself is the caller's own input
            assert secret not in taken.text, (secret, taken.text)
    assert _alice_messages(world) == before


def test_turns_begun_by_one_key_are_invisible_to_others(world: World) -> None:
    alice = world.env.keys.alice
    begun = world.as_(alice, "POST", "/api/threads/t-alice/turns", json={
        "format": "openai", "messages": [{"role": "user", "content": "turn input"}]})  # fmt: skip
    assert begun.status_code == 201 and SECRET in begun.text
    turn_id = begun.json()["turn_id"]
    step = {"format": "openai", "messages": [{"role": "assistant", "content": "step"}]}
    for action in ("step", "end"):
        _negatives(world, lambda client, key: client.post(f"/api/turns/{turn_id}/{action}", json=step, headers=auth(key)))
    assert world.as_(alice, "POST", f"/api/turns/{turn_id}/step", json=step).status_code == 200
    assert world.as_(alice, "POST", f"/api/turns/{turn_id}/end", json={"messages": []}).status_code == 200


def test_delete_thread(world: World) -> None:
    alice = world.env.keys.alice
    assert world.as_(alice, "POST", "/api/threads", json={"id": "t-alice-del"}).status_code == 201
    _negatives(world, lambda client, key: client.delete("/api/threads/t-alice-del", headers=auth(key)))
    assert world.as_(alice, "GET", "/api/threads/t-alice-del").status_code == 200
    assert world.as_(alice, "DELETE", "/api/threads/t-alice-del").json() == {"deleted": True}


def test_delete_and_import_resource(world: World) -> None:
    org = world.env.keys.acme_org
    assert world.as_(org, "POST", "/api/threads", json={"id": "t-zed", "resource_id": "zed"}).status_code == 201
    world.as_(org, "POST", "/api/threads/t-zed/messages", json={
        "format": "openai", "messages": [{"role": "user", "content": f"zed {SECRET}"}]})  # fmt: skip
    exported = world.as_(org, "GET", "/api/resources/zed/export").text
    _negatives(world, lambda client, key: client.delete("/api/resources/zed", headers=auth(key)))
    _negatives(world, lambda client, key: client.get("/api/resources/zed/export", headers=auth(key)))
    assert world.as_(org, "GET", "/api/threads/t-zed").status_code == 200
    assert world.as_(org, "DELETE", "/api/resources/zed").json()["deleted"]["threads"] == 1
    # an export of acme's data cannot be imported by a sibling resource or into another org
    _negatives(world, lambda client, key: client.post("/api/resources/import", json={"export": exported}, headers=auth(key)))
    # ... nor renamed into another org's resource (the threads carry acme's org)
    into_carol = world.as_(world.env.keys.globex, "POST", "/api/resources/import",
                           json={"export": exported, "into_resource": "carol"})  # fmt: skip
    assert into_carol.status_code == 403 and into_carol.json()["error"]["type"] == "PermissionDeniedError"
    assert world.as_(world.env.keys.bob, "GET", "/api/threads/t-zed").status_code == 404
    imported = world.as_(org, "POST", "/api/resources/import", json={"export": exported})
    assert imported.status_code == 201, imported.text
    assert world.as_(org, "GET", "/api/threads/t-zed").status_code == 200


def test_key_management(world: World) -> None:
    admin = world.env.keys.acme_admin
    listed = world.as_(admin, "GET", "/api/keys")
    assert listed.status_code == 200 and len(listed.json()["keys"]) >= 5
    _negatives(world, lambda client, key: client.get("/api/keys", headers=auth(key)))
    _negatives(world, lambda client, key: client.post("/api/keys", json={"org_id": "acme"}, headers=auth(key)))
    alice_id = world.env.keys.alice.split("_")[1]
    _negatives(world, lambda client, key: client.delete(f"/api/keys/{alice_id}", headers=auth(key)))
    assert world.as_(world.env.keys.alice, "GET", "/api/threads").status_code == 200


def test_gateway(world: World) -> None:
    for path, body in (
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "what is my code?"}]}),
        ("/v1/responses", {"model": "m", "input": "what is my code?"}),
    ):
        headers = {"X-Obsmem-Thread": "t-alice"}
        positive = world.client.post(path, json=body, headers={**headers, **auth(world.env.keys.alice)})
        assert positive.status_code == 200, positive.text
        sent = world.env.upstream.requests[-1]
        assert SECRET in json.dumps(sent.body)
        count = len(world.env.upstream.requests)
        _negatives(world, lambda client, key: client.post(path, json=body, headers={**headers, **auth(key)}))
        _negatives(world, lambda client, key: client.post(path, json={**body, "metadata": {"thread_id": "t-alice"}},
                                                          headers=auth(key)))  # fmt: skip
        assert len(world.env.upstream.requests) == count  # nothing of alice's went upstream for them


def test_knowledge_review_queue_and_audit_log(world: World) -> None:
    alice, org = world.env.keys.alice, world.env.keys.acme_org
    ids = []
    for text in (f"Alice prefers window seats {SECRET}", f"Alice's badge is {SECRET}", f"Alice's desk {SECRET}"):
        made = world.as_(alice, "POST", "/api/knowledge", json={"text": text, "candidate": True})
        assert made.status_code == 201, made.text
        ids.append(made.json()["id"])
    queue = world.as_(alice, "GET", "/api/knowledge/review")
    assert queue.status_code == 200 and {r["id"] for r in queue.json()["records"]} >= set(ids)
    _negatives(world, lambda client, key: client.get("/api/knowledge/review", params={"resource_id": "alice"},
                                                     headers=auth(key)))  # fmt: skip
    for key in (world.env.keys.bob, world.env.keys.globex):
        own = world.as_(key, "GET", "/api/knowledge/review")
        assert own.status_code == 200 and SECRET not in own.text
    for action, body in (("approve", {}), ("reject", {"tombstone": True}), ("edit", {"text": "planted"})):
        record = ids[["approve", "reject", "edit"].index(action)]
        _negatives(world, lambda client, key: client.post(f"/api/knowledge/review/{record}/{action}", json=body,
                                                          headers=auth(key)))  # fmt: skip
        # an org key decides only at the org's own scope, not on a resource's record
        assert world.as_(org, "POST", f"/api/knowledge/review/{record}/{action}", json=body).status_code == 404
        done = world.as_(alice, "POST", f"/api/knowledge/review/{record}/{action}", json=body)
        assert done.status_code == 200, done.text
    hits = world.as_(alice, "GET", "/api/knowledge/search", params={"q": "window seats"}).text
    assert "window seats" in hits
    audit = world.as_(alice, "GET", "/api/knowledge/audit")
    assert audit.status_code == 200 and len(audit.json()["events"]) >= 6
    _negatives(world, lambda client, key: client.get("/api/knowledge/audit", params={"resource_id": "alice"},
                                                     headers=auth(key)))  # fmt: skip
    for key in (world.env.keys.bob, world.env.keys.globex):
        events = world.as_(key, "GET", "/api/knowledge/audit").text
        assert SECRET not in events and not any(record in events for record in ids)


def test_knowledge_capture_into_another_tenant_is_refused(world: World) -> None:
    fact = "Zanzibar-intruder fact"
    for body in ({"text": fact, "resource_id": "alice"}, {"text": fact, "thread_id": "t-alice"}):
        _negatives(world, lambda client, key: client.post("/api/knowledge", json=body, headers=auth(key)))
    hits = world.as_(world.env.keys.alice, "GET", "/api/knowledge/search", params={"q": fact})
    assert hits.status_code == 200 and "Zanzibar" not in hits.text
    assert world.as_(world.env.keys.alice, "POST", "/api/knowledge", json={"text": "own fact"}).status_code == 201
