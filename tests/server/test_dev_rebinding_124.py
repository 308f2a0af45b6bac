"""Hostile review (helper-124): ``obsmem serve --dev`` needs no key because it listens on
127.0.0.1 only. A web page the developer opens can still reach it by DNS rebinding: its own host
name (``evil.example``) is re-pointed at 127.0.0.1, so the browser's requests to it, same-origin
for the page and free to read the answers, land on the dev server, with ``Host: evil.example``.
The MCP SDK's own DNS-rebinding protection is turned off in ``obsmem serve`` (keys protect a
server that listens elsewhere). Here the requests are sent as that browser sends them, by a plain
HTTP client naming the rebound host; the same requests naming 127.0.0.1 or localhost still work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.server.conftest import Env, open_env

SECRET = "dev-secret-4711"
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("dev124"), dev=True):
        with httpx.Client(base_url=env.url, timeout=60) as client:
            assert client.post("/api/threads", json={"id": "d1", "resource_id": "me"}).status_code == 201
            client.post("/api/threads/d1/messages", json={"format": "openai", "messages": [
                {"role": "user", "content": f"My bank PIN is {SECRET}."}]}).raise_for_status()  # fmt: skip
        yield env


def _host(env: Env, name: str) -> str:
    return f"{name}:{urlsplit(env.url).port}"


def _recall(env: Env, host: str) -> httpx.Response:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "memory_status", "arguments": {"thread_id": "d1"}}}  # fmt: skip
    with httpx.Client(base_url=env.url, timeout=60) as client:
        return client.post("/mcp", json=call, headers={**MCP_HEADERS, "Host": host})


def test_a_rebound_host_gets_nothing_from_the_dev_mcp_server(env: Env) -> None:
    """Before: 200, the tool's answer (the thread's memory state) for any Host."""
    answer = _recall(env, _host(env, "evil.example"))
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["type"] == "PermissionDeniedError"
    assert "memory_status" not in answer.text and "d1" not in answer.text


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_the_dev_mcp_server_still_answers_its_own_names(env: Env, name: str) -> None:
    answer = _recall(env, _host(env, name))
    assert answer.status_code == 200, answer.text
    assert not answer.json()["result"].get("isError"), answer.text


def test_a_rebound_host_gets_nothing_from_the_dev_inspector(env: Env) -> None:
    """Before: 200, the thread's timeline with the PIN (and each page's CSRF token, so the page
    could post review decisions as well)."""
    with httpx.Client(base_url=env.url, timeout=60, headers={"Host": _host(env, "evil.example")}) as client:
        for path in ("/ui/threads?resource_id=me", "/ui/threads/d1", "/ui/threads/d1/context"):
            answer = client.get(path)
            assert answer.status_code == 403, (path, answer.status_code)
            assert SECRET not in answer.text and "csrf_token" not in answer.text
    with httpx.Client(base_url=env.url, timeout=60, headers={"Host": _host(env, "localhost")}) as client:
        assert SECRET in client.get("/ui/threads/d1").text


def test_a_rebound_host_gets_nothing_from_the_dev_rest_api(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60, headers={"Host": _host(env, "evil.example")}) as client:
        answer = client.get("/api/threads/d1/messages")
    assert answer.status_code == 403 and SECRET not in json.dumps(answer.text)
