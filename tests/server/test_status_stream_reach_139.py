"""A status stream (``GET /api/threads/{id}/status/stream``, open up to an hour) is a read like
any other: it answers only while its key is live and its thread is the key's. A key revoked, or
the thread deleted, while the stream is open ends it (``event: end``) at the next status the
stream would send, instead of streaming the thread's state to a revoked key, or a deleted
thread's id taken again by another tenant, until ``max_s``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator

import httpx
import pytest

from obsmem import Message
from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("status-stream-139"))


def events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, object]]]:
    """(event, data) of a server-sent event stream, comments skipped."""
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            yield name, json.loads(line[len("data: "):])


def say(client: httpx.Client, key: str, thread_id: str, text: str) -> None:
    said = {"format": "openai", "messages": [{"role": "user", "content": text}]}
    assert client.post(f"/api/threads/{thread_id}/messages", json=said, headers=auth(key)).status_code == 201


def new_key(client: httpx.Client, env: Env) -> str:
    made = client.post("/api/keys", json={"resource_id": "alice"}, headers=auth(env.keys.acme_admin))
    assert made.status_code == 201, made.text
    return str(made.json()["secret"])


def test_a_key_revoked_while_its_status_stream_is_open_gets_no_more_status(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        key = new_key(client, env)
        assert client.post("/api/threads", json={"id": "ss-revoked"}, headers=auth(key)).status_code == 201
        say(client, key, "ss-revoked", "first")
        url = "/api/threads/ss-revoked/status/stream?max_s=30&interval_s=0.05"
        with client.stream("GET", url, headers=auth(key)) as stream:
            assert stream.status_code == 200
            read = events(stream.iter_lines())
            name, first = next(read)
            assert name == "status" and first["unobserved_messages"] == 1, first
            revoked = client.delete(f"/api/keys/{key.split('_')[1]}", headers=auth(env.keys.acme_admin))
            assert revoked.status_code == 200, revoked.text
            assert client.get("/api/threads/ss-revoked/status", headers=auth(key)).status_code == 401
            say(client, env.keys.alice, "ss-revoked", "second, after the key was revoked")
            rest = list(read)
        # before: the revoked key was sent the thread's new state (2 unobserved messages) and the
        # stream stayed open until max_s (30 s; reason "max_s")
        assert [data for name, data in rest if name == "status"] == []
        assert rest[-1] == ("end", {"reason": "revoked", "events": 1})


def test_a_thread_deleted_while_its_status_stream_is_open_ends_the_stream(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        alice = env.keys.alice
        assert client.post("/api/threads", json={"id": "ss-deleted"}, headers=auth(alice)).status_code == 201
        say(client, alice, "ss-deleted", "first")
        url = "/api/threads/ss-deleted/status/stream?max_s=30&interval_s=0.05"
        with client.stream("GET", url, headers=auth(alice)) as stream:
            read = events(stream.iter_lines())
            name, first = next(read)
            assert name == "status" and first["thread_id"] == "ss-deleted", first
            assert client.delete("/api/threads/ss-deleted", headers=auth(alice)).status_code == 200
            # the id is free again: another org's thread takes it and says something
            globex = env.keys.globex
            taken = client.post("/api/threads", json={"id": "ss-deleted"}, headers=auth(globex))
            assert taken.status_code == 201, taken.text
            say(client, globex, "ss-deleted", "globex's own words")
            say(client, globex, "ss-deleted", "and more of them")
            rest = list(read)
        # before: alice's stream went on with the deleted thread's state, then globex's new
        # thread's (its unobserved messages), until max_s
        assert [data for name, data in rest if name == "status"] == []
        assert rest[-1] == ("end", {"reason": "not_found", "events": 1})


def test_a_key_store_failing_while_a_status_stream_is_open_ends_it_with_an_error_event(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before each event reads the key store: a store failing there ends the stream with
    ``event: end`` (reason ``error``), as a failed watch ends it, never a stream cut mid-way."""
    with httpx.Client(base_url=env.url, timeout=60) as client:
        alice = env.keys.alice
        assert client.post("/api/threads", json={"id": "ss-failing"}, headers=auth(alice)).status_code == 201
        say(client, alice, "ss-failing", "first")
        url = "/api/threads/ss-failing/status/stream?max_s=30&interval_s=0.05"
        with client.stream("GET", url, headers=auth(alice)) as stream:
            read = events(stream.iter_lines())
            assert next(read)[0] == "status"
            keys = env.live.service.keys

            async def failing(token: str) -> None:
                raise sqlite3.OperationalError("disk I/O error")

            monkeypatch.setattr(keys, "verify", failing)
            memory = env.live.service.memory  # (the API itself needs the key store now)
            env.live.call(memory.save_messages("ss-failing", [Message.user("second")]))
            rest = list(read)  # before the guard: httpx.RemoteProtocolError, the stream cut off
        assert rest[-1] == ("end", {"reason": "error", "events": 1})
