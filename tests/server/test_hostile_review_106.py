"""Hostile review (helper-106) of the REST API, as a client: ids the service cannot address later,
a resource id that reaches into a thread's knowledge scope, and who the knowledge audit log says
acted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env
from tests.server.live import auth


@pytest.fixture(scope="module")
def client(env: Env) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env.url, timeout=60) as http:
        yield http


def _as(client: httpx.Client, key: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return client.request(method, path, headers=auth(key), **kwargs)


def _thread_ids(client: httpx.Client, key: str, resource: str | None = None) -> list[str]:
    params = {"resource_id": resource} if resource else {}
    listed = _as(client, key, "GET", "/api/threads", params=params)
    return [t["id"] for t in listed.json()["threads"]] if listed.status_code == 200 else []


@pytest.mark.parametrize("thread_id", ["notes/2024", "a b", "tab\tid", "nul\x00id", "line\nbreak"])
def test_a_thread_id_the_api_could_not_address_is_refused_not_created(
    env: Env, client: httpx.Client, thread_id: str
) -> None:
    """A thread id with '/' was created (201) and then every /api/threads/{id} route answered
    404 (the '/' splits the path): the client could neither read nor delete what it had made.
    Whitespace and control characters made ids no knowledge scope accepts."""
    made = _as(client, env.keys.alice, "POST", "/api/threads", json={"id": thread_id})
    assert made.status_code == 400, made.text
    assert set(made.json()) == {"error"} and made.json()["error"]["argument"] == "id"
    assert thread_id not in _thread_ids(client, env.keys.alice)


@pytest.mark.parametrize("resource_id", ["team/alice", "x/thread:y", "two words", "ctl\x01"])
def test_a_resource_id_the_api_could_not_address_is_refused_not_created(
    env: Env, client: httpx.Client, resource_id: str
) -> None:
    """An org key created a thread in resource 'team/alice' (201); /api/resources/{id}/… could
    never name it, and its knowledge scope was not a valid scope."""
    made = _as(client, env.keys.acme_org, "POST", "/api/threads", json={"id": "r-odd", "resource_id": resource_id})
    assert made.status_code == 400, made.text
    assert made.json()["error"]["argument"] == "resource_id"
    assert _as(client, env.keys.acme_org, "GET", "/api/threads/r-odd").status_code == 404


def test_an_existing_thread_keeps_answering_and_a_plain_id_is_still_created(env: Env, client: httpx.Client) -> None:
    made = _as(client, env.keys.alice, "POST", "/api/threads", json={"id": "plain:id.with-punct_1"})
    assert made.status_code == 201, made.text
    again = _as(client, env.keys.alice, "POST", "/api/threads", json={"id": "plain:id.with-punct_1"})
    assert again.status_code in (200, 201, 409), again.text
    assert _as(client, env.keys.alice, "GET", "/api/threads/plain:id.with-punct_1").status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("GET", "/api/knowledge/review", {"params": {"resource_id": "alice/thread:t-x"}}),
        ("GET", "/api/knowledge/audit", {"params": {"resource_id": "alice/thread:t-x"}}),
        ("GET", "/api/knowledge/search", {"params": {"q": "fact", "resource_id": "alice/thread:t-x"}}),
        ("POST", "/api/knowledge", {"json": {"text": "a fact", "resource_id": "alice/thread:t-x"}}),
    ],
)
def test_a_resource_id_never_names_a_deeper_knowledge_scope(
    env: Env, client: httpx.Client, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    """resource_id 'alice/thread:t-x' was read as the thread scope org:acme/resource:alice/thread:t-x
    (200, and a fact written there: 201): a resource id is one segment, never a path."""
    answer = _as(client, env.keys.acme_org, method, path, **kwargs)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["argument"] == "resource_id"
    assert "thread:t-x" not in answer.json()["error"].get("scope", "")


def _key_id(env: Env, secret: str) -> str:
    key = env.live.call(env.live.service.keys.verify(secret))
    assert key is not None
    return str(key.key_id)


def _events(client: httpx.Client, key: str, record_id: str) -> list[dict[str, Any]]:
    events = _as(client, key, "GET", "/api/knowledge/audit", params={"limit": 500}).json()["events"]
    return [e for e in events if e["subject_id"] == record_id]


def test_review_decisions_and_captures_through_rest_are_audited_as_the_key(env: Env, client: httpx.Client) -> None:
    """The audit log answered 'obsmem' as the actor of every REST approve / reject / edit and of
    every fact remembered through the API, whoever's key did it (the inspector writes key:<id>):
    the log could not say who approved what."""
    alice = _key_id(env, env.keys.alice)
    made = []
    for text in ("Alice likes tea (audit-106)", "Alice owns a cat (audit-106)", "Alice lives in Oslo (audit-106)"):
        answer = _as(client, env.keys.alice, "POST", "/api/knowledge", json={"text": text, "candidate": True})
        assert answer.status_code == 201, answer.text
        made.append(answer.json()["id"])
    for record_id, (action, body) in zip(made, (("approve", {}), ("reject", {"reason": "wrong"}),
                                               ("edit", {"text": "Alice lives in Bergen (audit-106)"})), strict=True):  # fmt: skip
        decided = _as(client, env.keys.alice, "POST", f"/api/knowledge/review/{record_id}/{action}", json=body)
        assert decided.status_code == 200, decided.text
    for record_id in made:
        events = _events(client, env.keys.alice, record_id)
        assert len(events) >= 2, events  # created, then decided
        assert {e["actor"] for e in events} == {f"key:{alice}"}, events


def test_an_import_holding_json_nested_too_deeply_is_a_clean_400(env: Env, client: httpx.Client) -> None:
    """An export line nested 100,000 deep answered 500 InternalError (a RecursionError while the
    route read the export's owner) and the connection was reset for the next request."""
    header = '{"format": "obsmem-export", "version": 1, "resource_id": "alice"}'
    export = header + "\n" + "[" * 100_000 + "]" * 100_000
    answer = _as(client, env.keys.alice, "POST", "/api/resources/import", json={"export": export})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["argument"] == "export"
    assert "Traceback" not in answer.text
    assert _as(client, env.keys.alice, "GET", "/api/threads").status_code == 200


def test_the_gateway_still_takes_a_thread_id_with_a_slash(env: Env, client: httpx.Client) -> None:
    """The REST refusal of unaddressable ids stays in REST: a gateway client naming its thread
    'user/1/chat' (it never reads it through /api/threads/{id}) keeps working."""
    answer = client.post("/v1/chat/completions", headers={**auth(env.keys.alice), "X-Obsmem-Thread": "user/1/chat"},
                         json={"model": "m", "messages": [{"role": "user", "content": "hello"}]})  # fmt: skip
    assert answer.status_code == 200, answer.text
