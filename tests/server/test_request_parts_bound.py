"""A REST request's messages carry at most MAX_REQUEST_PARTS parts, all together. A turn's work is
linear in its parts and runs on the server's event loop: 40 messages of 9,999 one-word parts (a
12 MB body, under the 32 MiB limit) held every tenant's requests for seconds (parsing alone took
2.6 s here). Found by helper 196."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem.server.rest import MAX_REQUEST_PARTS
from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("parts-bound"))


def _messages(parts: int, per_message: int) -> list[dict[str, Any]]:
    out = []
    while parts > 0:
        n = min(parts, per_message)
        out.append({"role": "user", "parts": [{"type": "text", "text": f"w{j}"} for j in range(n)]})
        parts -= n
    return out


@pytest.mark.parametrize("route", ["turns", "messages"])
def test_more_parts_than_the_bound_are_refused_before_anything_is_stored(env: Env, route: str) -> None:
    with httpx.Client(base_url=env.url, timeout=60, headers=auth(env.keys.alice)) as client:
        assert client.post("/api/threads", json={"id": f"parts-{route}"}).status_code == 201
        many = client.post(f"/api/threads/parts-{route}/{route}", json={"messages": _messages(MAX_REQUEST_PARTS + 1, 9999)})
        assert many.status_code == 422 and f"more than {MAX_REQUEST_PARTS} parts" in many.text
        spread = client.post(f"/api/threads/parts-{route}/{route}", json={"messages": _messages(MAX_REQUEST_PARTS + 1, 7)})
        assert spread.status_code == 422  # all messages together
        stored = client.get(f"/api/threads/parts-{route}/messages").json()["messages"]
        assert stored == []
        fine = client.post(f"/api/threads/parts-{route}/{route}", json={"messages": _messages(MAX_REQUEST_PARTS, 1024)})
        assert fine.status_code == 201, fine.text


def test_openai_format_counts_content_parts_and_tool_calls(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60, headers=auth(env.keys.alice)) as client:
        assert client.post("/api/threads", json={"id": "parts-openai"}).status_code == 201
        content = [{"type": "text", "text": f"w{j}"} for j in range(MAX_REQUEST_PARTS)]
        calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        body = {"format": "openai", "messages": [
            {"role": "user", "content": content}, {"role": "assistant", "content": None, "tool_calls": calls},
        ]}
        answer = client.post("/api/threads/parts-openai/messages", json=body)
        assert answer.status_code == 422 and "parts" in answer.text
