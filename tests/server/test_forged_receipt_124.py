"""Hostile review (helper-124): a receipt is a message's metadata (``obsmem_receipt``), which any
client may store with its messages, in any shape. One obsmem cannot read made the MCP ``receipt``
tool answer a bare "Error executing tool receipt" and the inspector's receipt pages 500 (the
group page dropped the connection). Now: a clean not-found, naming what is wrong."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.server.conftest import Env, open_env
from tests.server.live import auth

pytestmark = pytest.mark.anyio

FORGED: dict[str, Any] = {
    "r-empty": {},
    "r-groups-text": {"hash": "x", "groups": "abc"},
    "r-group-short": {"hash": "x", "groups": [["g"]]},
    "r-group-seq": {"hash": "x", "groups": [[1, 2, "a", "b"]]},
    "r-created": {"hash": "x", "created_at": "not a date"},
    "r-huge-seq": {"hash": "x", "groups": [["g", "t124", 1, 10**30]]},
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("receipt124")):
        with httpx.Client(base_url=env.url, timeout=60, headers=auth(env.keys.alice)) as client:
            assert client.post("/api/threads", json={"id": "t124"}).status_code == 201
            for message_id, receipt in FORGED.items():
                client.post("/api/threads/t124/messages", json={"messages": [{
                    "id": message_id, "role": "assistant", "parts": [{"type": "text", "text": "hello"}],
                    "metadata": {"obsmem_receipt": receipt}}]}).raise_for_status()  # fmt: skip
        yield env


@pytest.mark.parametrize("message_id", list(FORGED))
async def test_the_mcp_receipt_tool_reports_an_unreadable_receipt_cleanly(env: Env, message_id: str) -> None:
    transport = streamable_http_client(env.url + "/mcp", http_client=httpx2.AsyncClient(headers=auth(env.keys.alice), timeout=60))
    async with Client(transport) as client:
        for resolve in (False, True):
            answer = await client.call_tool("receipt", {"message_id": message_id, "resolve": resolve})
            text = " ".join(getattr(c, "text", "") for c in answer.content)
            if message_id == "r-huge-seq" and not resolve:
                continue  # readable: only resolving its span fails
            assert answer.is_error, text
            assert "NotFoundError" in text and message_id in text and "receipt" in text, text


@pytest.mark.parametrize("message_id", list(FORGED))
@pytest.mark.parametrize("tail", ["/receipt", "/receipt/groups/0"])
def test_the_inspectors_receipt_pages_answer_not_found(env: Env, message_id: str, tail: str) -> None:
    with httpx.Client(base_url=env.url, timeout=60, cookies={"obsmem_ui_key": env.keys.alice}) as client:
        answer = client.get(f"/ui/messages/{message_id}{tail}")
    assert answer.status_code in (200, 404), (answer.status_code, answer.text[:300])
    assert answer.headers["content-type"].startswith("text/html")
    if answer.status_code == 404:
        assert "receipt" in answer.text


def test_the_rest_receipt_route_answers_not_found(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60, headers=auth(env.keys.alice)) as client:
        answers = [client.get(f"/api/messages/{message_id}/receipt") for message_id in FORGED]
    assert all(a.status_code in (200, 404) for a in answers), json.dumps([a.status_code for a in answers])
