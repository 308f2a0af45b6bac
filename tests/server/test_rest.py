"""The REST API against a live uvicorn server, with httpx: threads, messages, turns, context,
observations, recall, export/import, keys, the error shape, and auth."""

from __future__ import annotations

import asyncio

import httpx

from obsmem.server.keys import SQLiteKeyStore
from tests.server.conftest import Env
from tests.server.live import auth


def _error(response: httpx.Response, status: int, kind: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["type"] == kind and body["error"]["message"]
    return body["error"]


def test_thread_message_turn_roundtrip(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        created = client.post("/api/threads", json={"id": "rt-1", "title": "first"})
        assert created.status_code == 201, created.text
        assert created.json()["resource_id"] == "alice" and created.json()["org_id"] == "acme"
        assert client.get("/api/threads/rt-1").json()["title"] == "first"
        assert "rt-1" in [t["id"] for t in client.get("/api/threads").json()["threads"]]

        saved = client.post("/api/threads/rt-1/messages", json={
            "format": "openai", "messages": [{"role": "user", "content": "I live in Lisbon."}],
        })  # fmt: skip
        assert saved.status_code == 201 and saved.json()["messages"][0]["seq"] >= 1
        page = client.get("/api/threads/rt-1/messages", params={"limit": 1}).json()
        assert [m["parts"][0]["text"] for m in page["messages"]] == ["I live in Lisbon."]

        begun = client.post("/api/threads/rt-1/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "What is my city?"}],
        })  # fmt: skip
        assert begun.status_code == 201, begun.text
        turn_id = begun.json()["turn_id"]
        wire = begun.json()["context"]["openai"]
        assert [m["content"] for m in wire if m["role"] == "user"][-2:] == ["I live in Lisbon.", "What is my city?"]
        stepped = client.post(f"/api/turns/{turn_id}/step", json={
            "format": "openai", "messages": [{"role": "assistant", "content": "Lisbon."}],
        })  # fmt: skip
        assert stepped.status_code == 200 and stepped.json()["context"]["openai"][-1]["content"] == "Lisbon."
        ended = client.post(f"/api/turns/{turn_id}/end", json={"messages": []})
        assert ended.status_code == 200
        _error(client.post(f"/api/turns/{turn_id}/end", json={"messages": []}), 404, "TurnNotFoundError")

        assert len(client.get("/api/threads/rt-1/messages").json()["messages"]) == 3
        assert client.get("/api/threads/rt-1/context").json()["raw_messages"] == 3
        observations = client.get("/api/threads/rt-1/observations").json()
        assert observations["thread_id"] == "rt-1" and isinstance(observations["observations"], str)
        assert isinstance(client.get("/api/threads/rt-1/generations").json()["generations"], list)
        recalled = client.post("/api/threads/rt-1/recall", json={"mode": "messages"})
        assert recalled.status_code == 200, recalled.text
        assert "Lisbon" in recalled.text

        assert client.delete("/api/threads/rt-1").json() == {"deleted": True}
        _error(client.get("/api/threads/rt-1"), 404, "ThreadNotFoundError")


def test_observations_appear_after_enough_turns(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        client.post("/api/threads", json={"id": "obs-1"})
        for number in range(40):
            text = f"Note {number}: my project Falcon milestone {number} is due on day {number + 1} of the plan."
            turn = client.post("/api/threads/obs-1/turns", json={
                "format": "openai", "messages": [{"role": "user", "content": text}],
            }).json()  # fmt: skip
            client.post(f"/api/turns/{turn['turn_id']}/end", json={
                "format": "openai", "messages": [{"role": "assistant", "content": f"Noted milestone {number}."}],
            })  # fmt: skip
        env.live.call(env.live.service.settled())
        observed = client.get("/api/threads/obs-1/observations").json()
        assert "Falcon" in observed["observations"]
        used = client.get("/api/resources/alice/usage").json()
        row = next(r for r in used["per_thread"] if r["thread_id"] == "obs-1")
        assert row["messages"] == 80 and row["observation_tokens"] > 0 and row["total_tokens_observed"] > 0
        context = client.get("/api/threads/obs-1/context").json()
        assert context["has_observations"] and context["raw_messages"] < 80


def test_error_shape_validation_and_unknown_route(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        error = _error(client.post("/api/threads", json={"id": ""}), 422, "RequestValidationError")
        assert error["argument"] == "id"
        _error(client.post("/api/threads", json={"id": "x", "bogus": 1}), 422, "RequestValidationError")
        _error(client.get("/api/nothing-here"), 404, "NotFoundError")
        client.post("/api/threads", json={"id": "err-1"})
        bad = client.post("/api/threads/err-1/messages", json={"messages": [{"role": "user"}]})
        assert _error(bad, 400, "InvalidInputError")["argument"].startswith("messages[0]")
        _error(client.post("/api/threads", json={"id": "err-1"}), 409, "ThreadIdTakenError")


def test_no_key_bad_key_revoked_key_and_read_only(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        _error(client.get("/api/threads"), 401, "AuthenticationError")
        _error(client.get("/api/threads", headers=auth("om_0123456789abcdef_" + "x" * 43)), 401, "AuthenticationError")
        _error(client.get("/api/threads", headers=auth("garbage")), 401, "AuthenticationError")
        _error(client.post("/v1/chat/completions", json={}), 401, "AuthenticationError")
        assert client.get("/health").status_code == 200
        assert "/api/threads" in client.get("/openapi.json").json()["paths"]

        ro = auth(env.keys.alice_read_only)
        assert client.get("/api/threads", headers=ro).status_code == 200
        _error(client.post("/api/threads", json={"id": "ro-1"}, headers=ro), 403, "PermissionDeniedError")

        admin = auth(env.keys.acme_admin)
        made = client.post("/api/keys", json={"resource_id": "alice", "label": "temp"}, headers=admin)
        assert made.status_code == 201, made.text
        secret, key_id = made.json()["secret"], made.json()["key_id"]
        assert client.get("/api/threads", headers=auth(secret)).status_code == 200
        listed = client.get("/api/keys", headers=admin).json()["keys"]
        assert key_id in [k["key_id"] for k in listed] and all("secret" not in k for k in listed)
        assert {k["org_id"] for k in listed} == {"acme"}
        assert client.delete(f"/api/keys/{key_id}", headers=admin).json()["revoked"] is True
        _error(client.delete(f"/api/keys/{key_id}", headers=admin), 404, "NotFoundError")
        _error(client.get("/api/threads", headers=auth(secret)), 401, "AuthenticationError")
        _error(client.post("/api/keys", json={"org_id": "globex"}, headers=admin), 403, "PermissionDeniedError")


def test_keys_are_stored_hashed(env: Env) -> None:
    raw = env.store_path.read_bytes()
    for key in (env.keys.alice, env.keys.acme_admin):
        assert key.encode() not in raw and key.split("_", 2)[2].encode() not in raw
    stored = asyncio.run(SQLiteKeyStore(str(env.store_path)).list("acme"))
    assert stored and all(len(k.secret_sha256) == 64 for k in stored)


def test_export_and_import_a_resource(env: Env) -> None:
    org = auth(env.keys.acme_org)
    with httpx.Client(base_url=env.url, headers=org, timeout=60) as client:
        client.post("/api/threads", json={"id": "ex-1", "resource_id": "erin"})
        client.post("/api/threads/ex-1/messages", json={"format": "openai", "messages": [
            {"role": "user", "content": "Erin likes tea."}]})  # fmt: skip
        exported = client.get("/api/resources/erin/export")
        assert exported.status_code == 200 and "Erin likes tea." in exported.text
        deleted = client.delete("/api/resources/erin").json()
        assert deleted["deleted"]["threads"] == 1 and deleted["deleted"]["messages"] == 1
        _error(client.get("/api/threads/ex-1"), 404, "ThreadNotFoundError")
        imported = client.post("/api/resources/import", json={"export": exported.text})
        assert imported.status_code == 201, imported.text
        assert client.get("/api/threads/ex-1/messages").json()["messages"][0]["parts"][0]["text"] == "Erin likes tea."
        _error(client.post("/api/resources/import", json={"export": exported.text}), 409, "ImportConflictError")


def test_usage_reports_the_cost_ledger_per_resource_and_thread_within_tenancy(env: Env) -> None:
    from datetime import UTC, datetime

    from obsmem.calls import ModelCall

    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        client.post("/api/threads", json={"id": "led-1"})
        client.post("/api/threads", json={"id": "led-2"})
    with httpx.Client(base_url=env.url, headers=auth(env.keys.bob), timeout=60) as client:
        client.post("/api/threads", json={"id": "led-bob"})
    now = datetime.now(UTC)

    def call(thread: str, resource: str, tokens: int) -> ModelCall:
        return ModelCall(role="observer", model="openai:gpt-4o-mini", started_at=now, latency_s=0.2,
                         thread_id=thread, resource_id=resource, input_tokens=tokens, output_tokens=10)

    store = env.live.service.memory.store
    env.live.call(store.record_model_calls([call("led-1", "alice", 1000), call("led-2", "alice", 500),
                                            call("led-bob", "bob", 7000)]))
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        used = client.get("/api/resources/alice/usage").json()
        assert "per_thread" in used and used["ledger"]["prices_as_of"]  # what it returned before stays
        assert used["ledger"]["total"]["calls"] == 2 and used["ledger"]["total"]["input_tokens"] == 1500  # not bob's
        assert used["ledger"]["total"]["cost_usd"] > 0
        assert all(row["role"] for row in used["ledger"]["by_role"])
        thread = client.get("/api/threads/led-2/usage").json()
        assert thread["thread_id"] == "led-2" and thread["ledger"]["total"]["input_tokens"] == 500
        later = client.get("/api/threads/led-2/usage", params={"since": "2999-01-01"}).json()
        assert later["ledger"]["total"]["calls"] == 0
        _error(client.get("/api/threads/led-2/usage", params={"since": "yesterday"}), 400, "InvalidInputError")
        # another resource's thread and usage stay out of reach
        assert client.get("/api/threads/led-bob/usage").status_code in (403, 404)
        assert client.get("/api/resources/bob/usage").status_code in (403, 404)
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice_read_only), timeout=60) as client:
        assert client.get("/api/threads/led-1/usage").json()["ledger"]["total"]["input_tokens"] == 1000


def test_ending_a_turn_needs_no_body_fields(env: Env) -> None:
    """``end`` has nothing to save when the reply went through ``step``: ``{}`` ends the turn (as
    ``turn.end()`` does). On main it answered 422 "messages: Field required" (helper-100)."""
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        assert client.post("/api/threads", json={"id": "rt-end"}).status_code == 201
        begun = client.post("/api/threads/rt-end/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "Hello?"}],
        })  # fmt: skip
        turn_id = begun.json()["turn_id"]
        assert client.post(f"/api/turns/{turn_id}/step", json={
            "format": "openai", "messages": [{"role": "assistant", "content": "Hi."}],
        }).status_code == 200  # fmt: skip
        ended = client.post(f"/api/turns/{turn_id}/end", json={})
        assert ended.status_code == 200, ended.text
        assert len(client.get("/api/threads/rt-end/messages").json()["messages"]) == 2


def test_a_missing_thread_says_how_to_create_it_over_rest(env: Env) -> None:
    """On main the 404 said "create it with memory.create_thread(...) or start a turn with a
    resource_id", neither of which a REST client can do (REST turns take no resource_id)."""
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        for response in (
            client.get("/api/threads/nope-1"),
            client.post("/api/threads/nope-1/turns", json={"messages": [{"role": "user", "parts": [
                {"type": "text", "text": "hi"}]}]}),
        ):
            message = str(_error(response, 404, "ThreadNotFoundError")["message"])
            assert "POST /api/threads" in message and "memory.create_thread" not in message, message
